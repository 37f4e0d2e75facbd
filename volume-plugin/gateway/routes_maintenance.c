/* The gateway's routes over the store as a whole: export, fsck, gc.  */
#include "routes_maintenance.h"
#include "sandbox.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void
esbx_gateway_export (struct esbx_gateway_ctx *ctx)
{
  const char *ref = esbx_gateway_query (ctx, "ref"), *format = esbx_gateway_query (ctx, "format");
  enum esbx_export_format fmt = ESBX_EXPORT_TAR;
  _cleanup_free_ char *rand = esbx_random_hex (8), *file = NULL;
  esbx_error_t err = NULL;
  struct stat st;
  int fd;

  if (ref == NULL)
    return esbx_gateway_reply_error (ctx, MHD_HTTP_BAD_REQUEST, ESBX_EXIT_USAGE,
                                     "query parameter `ref` is required");
  if (format && strcmp (format, "oci-layer") == 0)
    fmt = ESBX_EXPORT_OCI_LAYER;
  else if (format && strcmp (format, "tar") != 0)
    return esbx_gateway_reply_error (ctx, MHD_HTTP_BAD_REQUEST, ESBX_EXIT_USAGE,
                                     "unknown format `%s`: expected tar or oci-layer", format);
  file = xasprintf ("%s/tmp/export-%s.tar", ctx->store->root, rand);
  if (esbx_export (ctx->store, ref, file, fmt, &err) < 0)
    return esbx_gateway_reply_err (ctx, &err);
  fd = open (file, O_RDONLY | O_CLOEXEC);
  unlink (file);
  if (fd < 0 || fstat (fd, &st) < 0)
    {
      if (fd >= 0)
        close (fd);
      return esbx_gateway_reply_error (ctx, MHD_HTTP_INTERNAL_SERVER_ERROR, ESBX_EXIT_ERROR,
                                       "export: %s", strerror (errno));
    }
  /* MHD sends the file and closes FD.  */
  ctx->stream = MHD_create_response_from_fd ((uint64_t)st.st_size, fd);
  if (ctx->stream == NULL)
    {
      close (fd);
      return esbx_gateway_reply_error (ctx, MHD_HTTP_INTERNAL_SERVER_ERROR, ESBX_EXIT_ERROR,
                                       "export: cannot send the archive");
    }
  MHD_add_response_header (ctx->stream, MHD_HTTP_HEADER_CONTENT_TYPE, "application/x-tar");
  ctx->status = MHD_HTTP_OK;
}

static int
fsck_report (struct esbx_gateway_ctx *ctx, FILE *out, esbx_error_t *err)
{
  return esbx_fsck (ctx->store, ctx->project, out, err);
}

static int
gc_report (struct esbx_gateway_ctx *ctx, FILE *out, esbx_error_t *err)
{
  const char *snapshots = esbx_gateway_query (ctx, "snapshots");
  bool all = snapshots && strcmp (snapshots, "1") == 0;

  return esbx_sandbox_gc_flags (ctx->store, all ? ESBX_GC_SNAPSHOTS : 0, out, err);
}

void
esbx_gateway_fsck (struct esbx_gateway_ctx *ctx)
{
  esbx_gateway_reply_report (ctx, fsck_report);
}

void
esbx_gateway_gc (struct esbx_gateway_ctx *ctx)
{
  esbx_gateway_reply_report (ctx, gc_report);
}
