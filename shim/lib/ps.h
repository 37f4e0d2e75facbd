/* esbx shim: the processes of a session, as `esbx ps` prints them and the
   gateway sends them.  */
#ifndef ESBX_PS_H
#define ESBX_PS_H

#include "layerstore.h"

/* [{"pid", "host_pid", "command"}], "pid" as seen inside the session and
   in its order, "command" with the values of the session's secrets
   replaced by ***NAME***; empty when no holder runs.  Fails for a session
   that does not exist, or whose secrets cannot be read (never a command
   line unredacted).  */
json_t *esbx_ps_list (esbx_store_t *store, const char *session, esbx_error_t *err);

#endif
