/* esbxd: who may do what through the gateway.  Authentication turns the
   bearer secret into a stored token; authorization compares the token's
   scopes and project/session limits with what a request is about.  */
#ifndef ESBX_PLUGIN_GATEWAY_AUTH_H
#define ESBX_PLUGIN_GATEWAY_AUTH_H

#include "layerstore.h"
#include "request.h"

/* HEADER is the Authorization header (may be NULL).  On failure *reason
   (owned) says why, for the 401 answer and the audit log.  */
int esbx_auth_authenticate (esbx_store_t *store, const char *header, struct esbx_token **token,
                            char **reason);

/* Fill ctx->project and ctx->session from the route's target, and
   ctx->content from its content flag.  */
void esbx_auth_resolve_target (struct esbx_gateway_ctx *ctx,
                               const struct esbx_gateway_route *route);

/* true when allowed; otherwise *reason (owned) says why.  A token limited
   to a session or project is compared by the object's id, not its name.  */
bool esbx_auth_authorize (struct esbx_gateway_ctx *ctx, const struct esbx_gateway_route *route,
                          char **reason);

/* After an allowed request: bind a project token made before its project
   existed to the project as it is now (it may have just created it).  */
void esbx_auth_bind (struct esbx_gateway_ctx *ctx);

/* Whether TOKEN may see PROJECT, or session S, in a listing.  */
bool esbx_auth_sees_project (esbx_store_t *store, const struct esbx_token *token,
                             const char *project);
bool esbx_auth_sees_session (esbx_store_t *store, const struct esbx_token *token,
                             const struct esbx_session *s);

#endif
