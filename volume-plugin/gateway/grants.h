/* esbxd: what a token may give the sessions it makes (create, fork) and a
   project's future sessions (network defaults), beyond the scope and the
   target of the route (auth.c).  A token limited to a project or a session
   acts for whoever may use that project: what reaches beyond it needs a
   token without limits, as importing host paths (--from, --rootfs) is not
   offered over the gateway at all.  Each check is true when allowed, and
   otherwise sets *REASON (owned) for a 403.  */
#ifndef ESBX_PLUGIN_GATEWAY_GRANTS_H
#define ESBX_PLUGIN_GATEWAY_GRANTS_H

#include "request.h"

/* Whether the token of CTX may make a session of PROJECT on NETWORK (NULL:
   the project's default network), or set NETWORK as PROJECT's default.
   The host's network needs a token without limits.  */
bool esbx_grant_network (struct esbx_gateway_ctx *ctx, const char *project, const char *network,
                         char **reason);

/* Whether the token of CTX may attach the secrets of SPECS
   ("NAME[,env=...]", NULL-terminated) to a session of PROJECT: a limited
   token only secrets of PROJECT; one without limits any (the store then
   checks that a project's secret goes to that project's sessions).  A
   secret that is not PROJECT's, and one that does not exist, are refused
   alike, so that the answer tells a limited token nothing of the store's
   or another project's secrets.  */
bool esbx_grant_secrets (struct esbx_gateway_ctx *ctx, const char *project, char *const *specs,
                         char **reason);

/* Whether the token of CTX may make a session of PROJECT with a disk of
   DISK bytes (0: the default, ESBX_DISK_NONE: none).  Where a default
   applies (the project's or the store's), a limited token gets at most
   that: a larger disk, or none, needs a token without limits.  */
bool esbx_grant_disk (struct esbx_gateway_ctx *ctx, const char *project, int64_t disk,
                      char **reason);

/* Whether the token of CTX has room for one more session of PROJECT on
   NETWORK (NULL: the project's default): fewer sessions than its
   max_sessions, and when the session is on the egress network, fewer of
   those than its max_egress (struct esbx_token).  On success *LOCK, when
   not -1, is the token's lock (esbx_token_lock), to close once the
   session is made.  */
bool esbx_grant_room (struct esbx_gateway_ctx *ctx, const char *project, const char *network,
                      int *lock, char **reason);

#endif
