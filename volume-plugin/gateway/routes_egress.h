/* esbxd: the gateway's egress routes (esbx egress check).  */
#ifndef ESBX_PLUGIN_GATEWAY_ROUTES_EGRESS_H
#define ESBX_PLUGIN_GATEWAY_ROUTES_EGRESS_H

#include "request.h"

void esbx_gateway_egress_check (struct esbx_gateway_ctx *ctx);

#endif
