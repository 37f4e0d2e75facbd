/* esbxd: the gateway's routes, the table that gateway.c matches requests
   against; the handlers live in routes_*.c, one file per concern.  */
#ifndef ESBX_PLUGIN_GATEWAY_ROUTES_H
#define ESBX_PLUGIN_GATEWAY_ROUTES_H

#include "request.h"

extern const struct esbx_gateway_route esbx_gateway_routes[];
extern const size_t esbx_gateway_n_routes;

#endif
