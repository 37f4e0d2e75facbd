/* esbxd: the gateway's export and maintenance routes.  */
#ifndef ESBX_PLUGIN_GATEWAY_ROUTES_MAINTENANCE_H
#define ESBX_PLUGIN_GATEWAY_ROUTES_MAINTENANCE_H

#include "request.h"

void esbx_gateway_export (struct esbx_gateway_ctx *ctx);
void esbx_gateway_fsck (struct esbx_gateway_ctx *ctx);
void esbx_gateway_gc (struct esbx_gateway_ctx *ctx);

#endif
