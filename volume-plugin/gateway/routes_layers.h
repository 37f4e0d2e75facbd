/* esbxd: the gateway's routes that read what a project's layers hold.  */
#ifndef ESBX_PLUGIN_GATEWAY_ROUTES_LAYERS_H
#define ESBX_PLUGIN_GATEWAY_ROUTES_LAYERS_H

#include "request.h"

/* GET /v1/projects/P/show?path=PATH[&layer=L]: what esbx show prints.  */
void esbx_gateway_project_show (struct esbx_gateway_ctx *ctx);
/* GET /v1/projects/P/wait?after=L&timeout=SECONDS: {"head"} once it moved.  */
void esbx_gateway_project_wait (struct esbx_gateway_ctx *ctx);

#endif
