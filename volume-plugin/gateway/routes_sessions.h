/* esbxd: the gateway's routes about sessions.  */
#ifndef ESBX_PLUGIN_GATEWAY_ROUTES_SESSIONS_H
#define ESBX_PLUGIN_GATEWAY_ROUTES_SESSIONS_H

#include "request.h"

void esbx_gateway_session_list (struct esbx_gateway_ctx *ctx);
void esbx_gateway_session_create (struct esbx_gateway_ctx *ctx);
void esbx_gateway_session_inspect (struct esbx_gateway_ctx *ctx);
void esbx_gateway_session_path (struct esbx_gateway_ctx *ctx);
void esbx_gateway_session_discard (struct esbx_gateway_ctx *ctx);
void esbx_gateway_session_diff (struct esbx_gateway_ctx *ctx);
void esbx_gateway_session_events (struct esbx_gateway_ctx *ctx);
void esbx_gateway_session_publish (struct esbx_gateway_ctx *ctx);
void esbx_gateway_session_rebase (struct esbx_gateway_ctx *ctx);
void esbx_gateway_session_stop (struct esbx_gateway_ctx *ctx);
void esbx_gateway_session_ps (struct esbx_gateway_ctx *ctx);

#endif
