/* The gateway's project routes and whoami: each the equivalent of a CLI
   verb, answering with the JSON view `esbx --json` prints (view.c) so that
   the remote CLI prints the same bytes.  */
#include "routes_projects.h"
#include "auth.h"
#include "grants.h"
#include "utils.h"

void
esbx_gateway_whoami (struct esbx_gateway_ctx *ctx)
{
  esbx_gateway_reply_json (ctx, MHD_HTTP_OK, esbx_token_to_json (ctx->token));
}

void
esbx_gateway_project_list (struct esbx_gateway_ctx *ctx)
{
  _cleanup_strv_ char **names = NULL;
  esbx_error_t err = NULL;
  json_t *arr;
  size_t i;

  names = esbx_project_list (ctx->store, &err);
  if (names == NULL)
    return esbx_gateway_reply_err (ctx, &err);
  arr = json_new (JSON_ARRAY);
  for (i = 0; names[i]; i++)
    {
      json_t *o;

      if (!esbx_auth_sees_project (ctx->store, ctx->token, names[i]))
        continue;
      o = esbx_project_json (ctx->store, names[i], &err);
      if (o == NULL)
        {
          json_free (arr);
          return esbx_gateway_reply_err (ctx, &err);
        }
      json_append (arr, o);
    }
  esbx_gateway_reply_json (ctx, MHD_HTTP_OK, arr);
}

void
esbx_gateway_project_create (struct esbx_gateway_ctx *ctx)
{
  static const char *const fields[] = { "name", NULL };
  esbx_error_t err = NULL;
  const char *name;

  if (esbx_gateway_check_body (ctx, fields, "s") < 0)
    return;
  name = json_get_string (ctx->json, "name");
  if (name == NULL)
    return esbx_gateway_reply_fail (ctx, ESBX_ERR_USAGE, 0, "field `name` is required");
  /* No `from`: importing would read host paths with the daemon's rights.  */
  if (esbx_project_create (ctx->store, name, NULL, &err) < 0)
    return esbx_gateway_reply_err (ctx, &err);
  esbx_gateway_reply_string (ctx, MHD_HTTP_CREATED, "name", name);
}

void
esbx_gateway_project_rm (struct esbx_gateway_ctx *ctx)
{
  esbx_gateway_reply_done (ctx, esbx_project_rm);
}

void
esbx_gateway_project_squash (struct esbx_gateway_ctx *ctx)
{
  _cleanup_free_ char *id = NULL;
  esbx_error_t err = NULL;

  if (esbx_project_squash (ctx->store, ctx->arg, &id, &err) < 0)
    return esbx_gateway_reply_err (ctx, &err);
  esbx_gateway_reply_string (ctx, MHD_HTTP_OK, "layer", id);
}

void
esbx_gateway_project_log (struct esbx_gateway_ctx *ctx)
{
  esbx_error_t err = NULL;

  esbx_gateway_reply_view (ctx, esbx_project_log_json (ctx->store, ctx->arg, &err), &err);
}

void
esbx_gateway_project_blame (struct esbx_gateway_ctx *ctx)
{
  const char *path = esbx_gateway_query (ctx, "path");
  struct esbx_layer *l = NULL;
  esbx_error_t err = NULL;

  if (path == NULL)
    return esbx_gateway_reply_fail (ctx, ESBX_ERR_USAGE, 0, "query parameter `path` is required");
  if (esbx_blame (ctx->store, ctx->arg, path, &l, &err) < 0)
    return esbx_gateway_reply_err (ctx, &err);
  esbx_gateway_reply_json (ctx, MHD_HTTP_OK, esbx_layer_summary_json (l));
  esbx_layer_free (l);
}

void
esbx_gateway_project_network (struct esbx_gateway_ctx *ctx)
{
  esbx_error_t err = NULL;

  esbx_gateway_reply_view (ctx, esbx_project_network_get (ctx->store, ctx->arg, &err), &err);
}

void
esbx_gateway_project_network_set (struct esbx_gateway_ctx *ctx)
{
  static const char *const fields[] = { "network", "allow", NULL };
  _cleanup_free_ char **allow = NULL;
  const char *network;
  esbx_error_t err = NULL;
  char *reason = NULL;

  if (esbx_gateway_check_body (ctx, fields, "sa") < 0)
    return;
  network = json_get_string (ctx->json, "network");
  if (network && !esbx_grant_network (ctx, ctx->arg, network, &reason))
    return esbx_gateway_reply_forbidden (ctx, reason);
  allow = esbx_gateway_strings (json_get (ctx->json, "allow"));
  /* {} would read as "none" and drop the defaults: say so instead.  */
  if (network == NULL && allow[0] == NULL)
    return esbx_gateway_reply_fail (ctx, ESBX_ERR_USAGE, 0,
                                    "field `network` or `allow` is required");
  if (esbx_project_network_set (ctx->store, ctx->arg, network, allow, &err) < 0)
    return esbx_gateway_reply_err (ctx, &err);
  esbx_gateway_reply_view (ctx, esbx_project_network_get (ctx->store, ctx->arg, &err), &err);
}
