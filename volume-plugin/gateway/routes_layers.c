/* The gateway's routes that read a project's layers without a session
   (scope `observe`): a path at a layer (`esbx show`), and waiting for the
   head to move (`esbx wait`).  A wait holds its connection's thread: it is
   bounded by WAIT_MAX_SECONDS, and the listener's connection budget bounds
   how many wait at once.  */
#include "routes_layers.h"
#include "http.h"
#include "utils.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define WAIT_MAX_SECONDS 600

void
esbx_gateway_project_show (struct esbx_gateway_ctx *ctx)
{
  const char *path = esbx_gateway_query (ctx, "path");
  const char *layer = esbx_gateway_query (ctx, "layer");
  _cleanup_close_ int fd = -1;
  esbx_error_t err = NULL;

  if (path == NULL)
    return esbx_gateway_reply_fail (ctx, ESBX_ERR_USAGE, 0, "query parameter `path` is required");
  fd = memfd_create ("esbx-show", MFD_CLOEXEC);
  if (fd < 0)
    return esbx_gateway_reply_fail (ctx, ESBX_ERR_FAILED, errno, "memfd: %s", strerror (errno));
  if (esbx_show (ctx->store, ctx->arg, layer, path, fd, &err) < 0)
    return esbx_gateway_reply_err (ctx, &err);
  esbx_gateway_reply_file (ctx, fd, "application/octet-stream");
}

void
esbx_gateway_project_wait (struct esbx_gateway_ctx *ctx)
{
  const char *after = esbx_gateway_query (ctx, "after");
  const char *timeout = esbx_gateway_query (ctx, "timeout");
  _cleanup_free_ char *head = NULL;
  esbx_error_t err = NULL;
  json_t *o;
  long secs = WAIT_MAX_SECONDS;
  char *end;

  if (timeout)
    {
      secs = strtol (timeout, &end, 10);
      if (*timeout == '\0' || *end != '\0' || secs < 0)
        return esbx_gateway_reply_fail (ctx, ESBX_ERR_USAGE, 0,
                                        "wait: `timeout` must be a number of seconds");
      if (secs == 0 || secs > WAIT_MAX_SECONDS)
        secs = WAIT_MAX_SECONDS;
    }
  if (esbx_project_wait (ctx->store, ctx->arg, after, (int64_t)secs * 1000, &head, &err) < 0)
    return esbx_gateway_reply_err (ctx, &err);
  o = json_new (JSON_OBJECT);
  json_set_string (o, "head", head);
  esbx_gateway_reply_json (ctx, MHD_HTTP_OK, o);
}
