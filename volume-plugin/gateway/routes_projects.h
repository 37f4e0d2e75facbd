/* esbxd: the gateway's routes about projects (and the token itself).  */
#ifndef ESBX_PLUGIN_GATEWAY_ROUTES_PROJECTS_H
#define ESBX_PLUGIN_GATEWAY_ROUTES_PROJECTS_H

#include "request.h"

void esbx_gateway_whoami (struct esbx_gateway_ctx *ctx);
void esbx_gateway_project_list (struct esbx_gateway_ctx *ctx);
void esbx_gateway_project_create (struct esbx_gateway_ctx *ctx);
void esbx_gateway_project_rm (struct esbx_gateway_ctx *ctx);
void esbx_gateway_project_squash (struct esbx_gateway_ctx *ctx);
void esbx_gateway_project_log (struct esbx_gateway_ctx *ctx);
void esbx_gateway_project_blame (struct esbx_gateway_ctx *ctx);
/* A project's network defaults for new sessions: GET, and PUT
   {"network", "allow"} (network_defaults.c).  */
void esbx_gateway_project_network (struct esbx_gateway_ctx *ctx);
void esbx_gateway_project_network_set (struct esbx_gateway_ctx *ctx);

#endif
