/* The gateway's trash routes: what `esbx trash` does on the store, for
   tokens without limits (an entry may be of any project).  */
#include "routes_trash.h"
#include "utils.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

void
esbx_gateway_trash_list (struct esbx_gateway_ctx *ctx)
{
  esbx_error_t err = NULL;

  esbx_gateway_reply_view (ctx, esbx_trash_list (ctx->store, &err), &err);
}

void
esbx_gateway_trash_restore (struct esbx_gateway_ctx *ctx)
{
  static const char *const fields[] = { "name", NULL };
  _cleanup_free_ char *restored = NULL;
  esbx_error_t err = NULL;

  if (esbx_gateway_check_body (ctx, fields, "s") < 0)
    return;
  if (esbx_trash_restore (ctx->store, ctx->arg, json_get_string (ctx->json, "name"), &restored,
                          &err)
      < 0)
    return esbx_gateway_reply_err (ctx, &err);
  esbx_gateway_reply_string (ctx, MHD_HTTP_OK, "session", restored);
}

static int
purge_report (struct esbx_gateway_ctx *ctx, FILE *out, esbx_error_t *err)
{
  return esbx_trash_purge (ctx->store, ctx->arg[0] ? ctx->arg : NULL, out, err);
}

/* DELETE /v1/trash/ENTRY, or DELETE /v1/trash for every entry.  */
void
esbx_gateway_trash_purge (struct esbx_gateway_ctx *ctx)
{
  esbx_gateway_reply_report (ctx, purge_report);
}
