/* esbxd: the gateway's exec route (scope `runtime`).  */
#ifndef ESBX_PLUGIN_GATEWAY_ROUTES_EXEC_H
#define ESBX_PLUGIN_GATEWAY_ROUTES_EXEC_H

#include "request.h"

/* POST /v1/sessions/S/exec.  */
void esbx_gateway_session_exec (struct esbx_gateway_ctx *ctx);

#endif
