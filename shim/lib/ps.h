/* esbx shim: the processes of a session, as `esbx ps` prints them and the
   gateway sends them.  */
#ifndef ESBX_PS_H
#define ESBX_PS_H

#include "layerstore.h"

/* [{"pid", "host_pid", "command"}], "pid" as seen inside the session and
   in its order; empty when no holder runs.  Fails only for a session that
   does not exist.  */
json_t *esbx_ps_list (esbx_store_t *store, const char *session, esbx_error_t *err);

#endif
