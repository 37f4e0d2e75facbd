/* The gateway's secret routes.  A value goes in (POST, manage scope) and
   never comes out: the list holds names, sizes and creation times, and no
   route answers a value, whatever the token.  Secrets belong to the store,
   not to a project, so the routes are for tokens without project or
   session limits, as snapshots and the trash are.  */
#include "routes_secrets.h"
#include "utils.h"

#include <string.h>

void
esbx_gateway_secret_create (struct esbx_gateway_ctx *ctx)
{
  static const char *const fields[] = { "name", "value", NULL };
  const char *name, *value;
  esbx_error_t err = NULL;

  if (esbx_gateway_check_body (ctx, fields, "ss") < 0)
    return;
  name = json_get_string (ctx->json, "name");
  value = json_get_string (ctx->json, "value");
  if (name == NULL || value == NULL)
    return esbx_gateway_reply_error (ctx, MHD_HTTP_BAD_REQUEST, ESBX_EXIT_USAGE,
                                     "fields `name` and `value` are required");
  if (esbx_secret_create (ctx->store, name, value, strlen (value), &err) < 0)
    return esbx_gateway_reply_err (ctx, &err);
  esbx_gateway_reply_string (ctx, MHD_HTTP_CREATED, "name", name);
}

void
esbx_gateway_secret_list (struct esbx_gateway_ctx *ctx)
{
  esbx_error_t err = NULL;

  esbx_gateway_reply_view (ctx, esbx_secret_list (ctx->store, &err), &err);
}

void
esbx_gateway_secret_rm (struct esbx_gateway_ctx *ctx)
{
  esbx_gateway_reply_done (ctx, esbx_secret_rm);
}
