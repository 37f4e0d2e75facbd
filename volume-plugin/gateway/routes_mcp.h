/* esbxd: the MCP server (mcp/mcp.h) at /mcp on the gateway's listeners,
   over the Streamable HTTP transport: POST one JSON-RPC message, answered
   with JSON, or with an SSE stream when the call asked for progress;
   DELETE ends the MCP session; GET is refused (405: the server sends
   nothing unasked).  An MCP session (Mcp-Session-Id) is made by initialize
   and belongs to the token that made it: its tools are those the token's
   scopes allow, on what its project or session limit reaches, decided by
   the same rules as the token's other requests (auth.c, grants.c), and
   every tool call goes to the audit log with the token's id.  */
#ifndef ESBX_PLUGIN_GATEWAY_ROUTES_MCP_H
#define ESBX_PLUGIN_GATEWAY_ROUTES_MCP_H

#include "audit.h"
#include "request.h"

/* MCP sessions kept, all tokens together, and of one token; an idle one
   goes after MCP_IDLE_SECONDS.  */
#define ESBX_GATEWAY_MCP_SESSIONS       1024
#define ESBX_GATEWAY_MCP_TOKEN_SESSIONS 64
#define ESBX_GATEWAY_MCP_IDLE_SECONDS   3600

struct esbx_gateway_mcp;

struct esbx_gateway_mcp *esbx_gateway_mcp_new (esbx_store_t *store, struct esbx_audit *audit,
                                               uint64_t exec_log_limit);
/* Cancel every call in flight (esbxd stops: before the listeners stop,
   which wait for the requests those calls answer).  */
void esbx_gateway_mcp_cancel (struct esbx_gateway_mcp *m);
/* Once no request runs: the sessions go, after their SSE threads.  */
void esbx_gateway_mcp_free (struct esbx_gateway_mcp *m);

void esbx_gateway_mcp_post (struct esbx_gateway_ctx *ctx);
void esbx_gateway_mcp_delete (struct esbx_gateway_ctx *ctx);

#endif
