/* The dashboard's files and its swarm view (routes_ui.h).  */
#include "routes_ui.h"
#include "auth.h"
#include "http.h"
#include "samples.h"
#include "sandbox.h"
#include "ui_assets.h"
#include "utils.h"

#include <string.h>

/* Nothing but the page's own files runs or loads: no inline script, no
   eval, no other origin, no frame around it, no referrer sent.  */
#define UI_CSP                                                                                     \
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "                \
  "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

bool
esbx_gateway_ui_path (const char *method, const char *url)
{
  return (strcmp (method, "GET") == 0 || strcmp (method, "HEAD") == 0)
         && (strcmp (url, "/ui") == 0 || strncmp (url, "/ui/", 4) == 0);
}

static void
secure (struct MHD_Response *r)
{
  MHD_add_response_header (r, "Content-Security-Policy", UI_CSP);
  MHD_add_response_header (r, "X-Content-Type-Options", "nosniff");
  MHD_add_response_header (r, "X-Frame-Options", "DENY");
  MHD_add_response_header (r, "Referrer-Policy", "no-referrer");
  MHD_add_response_header (r, "Cross-Origin-Opener-Policy", "same-origin");
  MHD_add_response_header (r, "Cross-Origin-Resource-Policy", "same-origin");
  MHD_add_response_header (r, "Cache-Control", "no-store");
}

void
esbx_gateway_ui_asset (struct esbx_gateway_ctx *ctx, const char *url)
{
  const char *want = strcmp (url, "/ui") == 0 || strcmp (url, "/ui/") == 0 ? "/ui/index.html" : url;

  for (size_t i = 0; i < esbx_ui_n_assets; i++)
    if (strcmp (esbx_ui_assets[i].path, want) == 0)
      {
        ctx->stream = MHD_create_response_from_buffer (
            esbx_ui_assets[i].len, (void *)esbx_ui_assets[i].data, MHD_RESPMEM_PERSISTENT);
        if (ctx->stream == NULL)
          return esbx_gateway_reply_fail (ctx, ESBX_ERR_FAILED, 0, "no memory for the answer");
        MHD_add_response_header (ctx->stream, MHD_HTTP_HEADER_CONTENT_TYPE,
                                 esbx_ui_assets[i].content_type);
        secure (ctx->stream);
        ctx->status = MHD_HTTP_OK;
        return;
      }
  esbx_gateway_reply_fail (ctx, ESBX_ERR_NOT_FOUND, 0, "no such file of the dashboard");
}

static bool
visible (const struct esbx_session *s, const void *data)
{
  const struct esbx_gateway_ctx *ctx = data;

  return esbx_auth_sees_session (ctx->store, ctx->token, s);
}

void
esbx_gateway_ui_swarm (struct esbx_gateway_ctx *ctx)
{
  esbx_error_t err = NULL;
  json_t *arr = esbx_sandbox_list (ctx->store, NULL, visible, ctx, &err), *s;
  size_t i;

  if (arr == NULL)
    return esbx_gateway_reply_err (ctx, &err);
  json_array_foreach (arr, i, s)
    {
      const char *name = json_get_string (s, "name");
      json_t *st = esbx_sandbox_status (ctx->store, name);

      json_set (s, "runtime", st);
      json_set (s, "samples", esbx_samples_json (ctx->samples, name));
    }
  esbx_gateway_reply_json (ctx, MHD_HTTP_OK, arr);
}
