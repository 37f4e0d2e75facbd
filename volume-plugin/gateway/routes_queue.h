/* esbxd: the gateway's routes of the deliberate gate (README, "The gate"):
   a project's policy and its merge queue's requests.  */
#ifndef ESBX_PLUGIN_GATEWAY_ROUTES_QUEUE_H
#define ESBX_PLUGIN_GATEWAY_ROUTES_QUEUE_H

#include "request.h"

/* GET /v1/projects/P/gate: the policy.  PUT: a new one ({"mode", "checks",
   "check_timeout", "approvals", "parallel", "secrets"}), for tokens
   without limits only: a project's own token could otherwise turn its
   review off.  */
void esbx_gateway_gate_get (struct esbx_gateway_ctx *ctx);
void esbx_gateway_gate_set (struct esbx_gateway_ctx *ctx);
/* GET /v1/requests[?project=P][&all=1]: the requests the token sees.  */
void esbx_gateway_request_list (struct esbx_gateway_ctx *ctx);
/* GET /v1/requests/ID[?wait=SECONDS]: its record, once final when asked to
   wait (at most 60 s).  */
void esbx_gateway_request_show (struct esbx_gateway_ctx *ctx);
/* GET /v1/requests/ID/log: its checks' output.  */
void esbx_gateway_request_log (struct esbx_gateway_ctx *ctx);
/* GET /v1/requests/ID/file?path=P: P as the request filed it (runtime).  */
void esbx_gateway_request_file (struct esbx_gateway_ctx *ctx);
/* POST /v1/requests/ID/approve, .../reject {"message"}; DELETE
   /v1/requests/ID withdraws it.  The caller is "token:ID".  */
void esbx_gateway_request_approve (struct esbx_gateway_ctx *ctx);
void esbx_gateway_request_reject (struct esbx_gateway_ctx *ctx);
void esbx_gateway_request_cancel (struct esbx_gateway_ctx *ctx);

#endif
