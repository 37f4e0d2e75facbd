/* esbxd: the gateway's snapshot routes (snapshot and fork a session;
   list, inspect and remove snapshots) and the lifetime fields sessions
   are created with.  */
#ifndef ESBX_PLUGIN_GATEWAY_ROUTES_SNAPSHOTS_H
#define ESBX_PLUGIN_GATEWAY_ROUTES_SNAPSHOTS_H

#include "request.h"

/* "snapshot", "ttl", "idle_ttl" and "on_expiry" of the request body into
   O (durations parsed into seconds).  */
int esbx_gateway_lifetime_opts (struct esbx_gateway_ctx *ctx, struct esbx_session_opts *o,
                                esbx_error_t *err);

void esbx_gateway_session_snapshot (struct esbx_gateway_ctx *ctx);
void esbx_gateway_session_fork (struct esbx_gateway_ctx *ctx);
void esbx_gateway_snapshot_list (struct esbx_gateway_ctx *ctx);
void esbx_gateway_snapshot_inspect (struct esbx_gateway_ctx *ctx);
void esbx_gateway_snapshot_rm (struct esbx_gateway_ctx *ctx);

#endif
