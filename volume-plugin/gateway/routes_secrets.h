/* esbxd: the gateway's secret routes (esbx secret create|list|rm).  */
#ifndef ESBX_PLUGIN_GATEWAY_ROUTES_SECRETS_H
#define ESBX_PLUGIN_GATEWAY_ROUTES_SECRETS_H

#include "request.h"

void esbx_gateway_secret_create (struct esbx_gateway_ctx *ctx);
void esbx_gateway_secret_list (struct esbx_gateway_ctx *ctx);
void esbx_gateway_secret_rm (struct esbx_gateway_ctx *ctx);

#endif
