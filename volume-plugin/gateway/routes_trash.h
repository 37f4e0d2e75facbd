/* esbxd: the gateway's trash routes (list, restore, purge).  */
#ifndef ESBX_PLUGIN_GATEWAY_ROUTES_TRASH_H
#define ESBX_PLUGIN_GATEWAY_ROUTES_TRASH_H

#include "request.h"

void esbx_gateway_trash_list (struct esbx_gateway_ctx *ctx);
void esbx_gateway_trash_restore (struct esbx_gateway_ctx *ctx);
void esbx_gateway_trash_purge (struct esbx_gateway_ctx *ctx);

#endif
