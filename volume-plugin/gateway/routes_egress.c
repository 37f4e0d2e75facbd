/* GET /v1/sessions/S/egress/check?url=URL[&method=M]: what the store's
   egress proxy would do with the request (esbx_egress_check), sent
   nowhere; 200 with "allowed" either way.  */
#include "routes_egress.h"
#include "egress.h"
#include "utils.h"

void
esbx_gateway_egress_check (struct esbx_gateway_ctx *ctx)
{
  const char *url = esbx_gateway_query (ctx, "url"), *method = esbx_gateway_query (ctx, "method"),
             *p;
  esbx_error_t err = NULL;

  if (url == NULL)
    return esbx_gateway_reply_fail (ctx, ESBX_ERR_USAGE, 0, "query parameter `url` is required");
  if (method == NULL || *method == '\0')
    method = "GET";
  for (p = method; *p; p++)
    if (*p < 'A' || *p > 'Z' || p - method > 16)
      return esbx_gateway_reply_fail (ctx, ESBX_ERR_USAGE, 0,
                                      "query parameter `method`: upper-case letters only");
  if (esbx_gateway_session_must_exist (ctx) < 0)
    return;
  esbx_gateway_reply_view (ctx, esbx_egress_check (ctx->store, ctx->arg, method, url, &err), &err);
}
