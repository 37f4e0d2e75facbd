/* The gateway's routes for the paths a rebase left unmerged: the three
   versions of one (`esbx rebase --show`, scope `observe`, like a diff) and
   marking them resolved (`esbx rebase --resolved`, scope `manage`, like a
   rebase).  */
#include "routes_unmerged.h"
#include "http.h"
#include "utils.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

void
esbx_gateway_unmerged_show (struct esbx_gateway_ctx *ctx)
{
  static const char *const sides[] = { "base", "ours", "theirs" };
  const char *path = esbx_gateway_query (ctx, "path");
  const char *side = esbx_gateway_query (ctx, "side");
  _cleanup_close_ int fd = -1;
  esbx_error_t err = NULL;
  size_t i;

  for (i = 0; side && i < 3; i++)
    if (strcmp (side, sides[i]) == 0)
      break;
  if (path == NULL || side == NULL || i == 3)
    return esbx_gateway_reply_fail (ctx, ESBX_ERR_USAGE, 0,
                                    "unmerged: ?path=P&side=base|ours|theirs is required");
  if (esbx_gateway_session_must_exist (ctx) < 0)
    return;
  fd = memfd_create ("esbx-unmerged", MFD_CLOEXEC);
  if (fd < 0)
    return esbx_gateway_reply_fail (ctx, ESBX_ERR_FAILED, errno, "memfd: %s", strerror (errno));
  if (esbx_session_unmerged_show (ctx->store, ctx->arg, path, (enum esbx_side)i, fd, &err) < 0)
    return esbx_gateway_reply_err (ctx, &err);
  esbx_gateway_reply_file (ctx, fd, "application/octet-stream");
}

void
esbx_gateway_unmerged_resolve (struct esbx_gateway_ctx *ctx)
{
  static const char *const fields[] = { "paths", NULL };
  _cleanup_free_ char **paths = NULL;
  esbx_error_t err = NULL;

  if (esbx_gateway_check_body (ctx, fields, "a") < 0 || esbx_gateway_session_must_exist (ctx) < 0)
    return;
  paths = esbx_gateway_strings (json_get (ctx->json, "paths"));
  if (paths == NULL || paths[0] == NULL)
    return esbx_gateway_reply_fail (ctx, ESBX_ERR_USAGE, 0,
                                    "resolved: \"paths\" must name at least one path");
  if (esbx_session_unmerged_resolve (ctx->store, ctx->arg, paths, &err) < 0)
    return esbx_gateway_reply_err (ctx, &err);
  esbx_gateway_reply_json (ctx, MHD_HTTP_OK, json_new (JSON_OBJECT));
}
