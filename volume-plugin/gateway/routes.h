/* esbxd: the gateway's operations, one handler per route, and the table
   that gateway.c matches requests against (routes.c).  */
#ifndef ESBX_PLUGIN_GATEWAY_ROUTES_H
#define ESBX_PLUGIN_GATEWAY_ROUTES_H

#include "request.h"

extern const struct esbx_gateway_route esbx_gateway_routes[];
extern const size_t esbx_gateway_n_routes;

/* POST /v1/sessions/S/exec (routes_exec.c).  */
void esbx_gateway_session_exec (struct esbx_gateway_ctx *ctx);

#endif
