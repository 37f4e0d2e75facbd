/* The gateway's secret routes.  A value goes in (POST, manage scope) and
   never comes out: the list holds names, sizes, creation times and owners,
   and no route answers a value, whatever the token.  A secret belongs to a
   project or to the store (secret_owner.c): a token limited to project P
   makes, lists and removes P's secrets only (the body's "project", the
   query's ?project=P, which authorization checks as for any route); the
   store's are for tokens without project or session limits.  */
#include "routes_secrets.h"
#include "text.h"
#include "utils.h"

#include <string.h>

void
esbx_gateway_secret_create (struct esbx_gateway_ctx *ctx)
{
  static const char *const fields[]
      = { "name", "value", "project", "for", "header", "basic", "query", NULL };
  _cleanup_json_ json_t *inject = NULL;
  struct strv hosts = { 0 };
  const json_t *h;
  const char *name, *value;
  esbx_error_t err = NULL;
  size_t i;
  int r;

  if (esbx_gateway_check_body (ctx, fields, "sssasss") < 0)
    return;
  name = json_get_string (ctx->json, "name");
  value = json_get_string (ctx->json, "value");
  if (name == NULL || value == NULL)
    return esbx_gateway_reply_fail (ctx, ESBX_ERR_USAGE, 0,
                                    "fields `name` and `value` are required");
  json_array_foreach (json_get (ctx->json, "for"), i, h)
    if (h->type == JSON_STRING)
      strv_push (&hosts, xstrdup (h->text));
  r = esbx_secret_inject_parse (name, hosts.v, json_get_string (ctx->json, "header"),
                                json_get_string (ctx->json, "basic"),
                                json_get_string (ctx->json, "query"), &inject, &err);
  strv_free (&hosts);
  if (r < 0)
    return esbx_gateway_reply_err (ctx, &err);
  if (esbx_secret_create_inject (ctx->store, name, ctx->project, inject, value, strlen (value),
                                 &err)
      < 0)
    return esbx_gateway_reply_err (ctx, &err);
  esbx_gateway_reply_string (ctx, MHD_HTTP_CREATED, "name", name);
}

void
esbx_gateway_secret_list (struct esbx_gateway_ctx *ctx)
{
  esbx_error_t err = NULL;

  if (ctx->project && esbx_check_name ("project", ctx->project, &err) < 0)
    return esbx_gateway_reply_err (ctx, &err);
  esbx_gateway_reply_view (ctx, esbx_secret_list (ctx->store, ctx->project, &err), &err);
}

void
esbx_gateway_secret_rm (struct esbx_gateway_ctx *ctx)
{
  _cleanup_free_ char *owner = NULL;
  esbx_error_t err = NULL;

  /* ?project=P removes a secret of P, nothing else: a secret of another
     project, or the store's, is out of reach whether it exists or not.  */
  if (ctx->project)
    {
      if (esbx_secret_owner (ctx->store, ctx->arg, &owner, &err) < 0)
        esbx_error_free (&err);
      if (owner == NULL || strcmp (owner, ctx->project) != 0)
        return esbx_gateway_reply_forbidden (
            ctx, xasprintf ("`%s` is not a secret of project `%s`", ctx->arg, ctx->project));
    }
  esbx_gateway_reply_done (ctx, esbx_secret_rm);
}
