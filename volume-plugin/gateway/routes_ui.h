/* esbxd: the operator's dashboard (README, "The dashboard") on the
   gateway's listeners.  Its page, script and style are served at /ui/
   without a token (they hold no data); everything they show comes from
   the gateway's routes with the token the operator logs in with, sent in
   the Authorization header only.  */
#ifndef ESBX_PLUGIN_GATEWAY_ROUTES_UI_H
#define ESBX_PLUGIN_GATEWAY_ROUTES_UI_H

#include "request.h"

#include <stdbool.h>

/* Whether METHOD URL asks for a file of the dashboard.  */
bool esbx_gateway_ui_path (const char *method, const char *url);
/* Answer it: the file with headers that forbid running anything else
   (Content-Security-Policy: scripts of the page's origin only, no inline
   script, no frame), or 404.  */
void esbx_gateway_ui_asset (struct esbx_gateway_ctx *ctx, const char *url);
/* GET /v1/ui/swarm: every session the token sees, with its holder's
   memory, CPU and pids now and its samples (samples.h).  */
void esbx_gateway_ui_swarm (struct esbx_gateway_ctx *ctx);
/* GET /v1/ui/stream: server-sent events (ui_stream.c): "session" (a line
   of a session's events), "queue" (a line of a queue's events), "tick"
   (every 2 s).  */
void esbx_gateway_ui_stream (struct esbx_gateway_ctx *ctx);

#endif
