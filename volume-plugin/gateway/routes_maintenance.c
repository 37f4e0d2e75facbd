/* The gateway's routes over the store as a whole: export, fsck, gc.  */
#include "routes_maintenance.h"
#include "progress_stream.h"
#include "sandbox.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The archive of REF, exported to a file of the store's tmp/ that is gone
   once open: the fd holds it, and nothing is left behind when the answer
   ends early.  */
static int
export_archive (esbx_store_t *store, const char *ref, enum esbx_export_format fmt, off_t *size,
                esbx_error_t *err)
{
  _cleanup_free_ char *rand = esbx_random_hex (8), *file = NULL;
  struct stat st;
  int fd;

  file = xasprintf ("%s/tmp/export-%s.tar", store->root, rand);
  if (esbx_export (store, ref, file, fmt, err) < 0)
    return -1;
  fd = open (file, O_RDONLY | O_CLOEXEC);
  unlink (file);
  if (fd < 0 || fstat (fd, &st) < 0)
    {
      esbx_make_error (err, errno, "export: open the archive");
      if (fd >= 0)
        close (fd);
      return -1;
    }
  *size = st.st_size;
  return fd;
}

/* An export with ?progress=1, in the thread of progress_stream.c.  */
struct export_work
{
  esbx_store_t *store;
  char *ref;
  enum esbx_export_format fmt;
};

static json_t *
export_work (void *data, int *payload, esbx_error_t *err)
{
  struct export_work *x = data;
  json_t *res;
  off_t size;

  *payload = export_archive (x->store, x->ref, x->fmt, &size, err);
  if (*payload < 0)
    return NULL;
  res = json_new (JSON_OBJECT);
  json_set_int (res, "size", (int64_t)size);
  return res;
}

static void
export_work_free (void *data)
{
  struct export_work *x = data;

  free (x->ref);
  free (x);
}

void
esbx_gateway_export (struct esbx_gateway_ctx *ctx)
{
  const char *ref = esbx_gateway_query (ctx, "ref"), *format = esbx_gateway_query (ctx, "format");
  enum esbx_export_format fmt = ESBX_EXPORT_TAR;
  esbx_error_t err = NULL;
  off_t size;
  int fd;

  if (ref == NULL)
    return esbx_gateway_reply_fail (ctx, ESBX_ERR_USAGE, 0, "query parameter `ref` is required");
  if (format && strcmp (format, "oci-layer") == 0)
    fmt = ESBX_EXPORT_OCI_LAYER;
  else if (format && strcmp (format, "tar") != 0)
    return esbx_gateway_reply_fail (ctx, ESBX_ERR_USAGE, 0,
                                    "unknown format `%s`: expected tar or oci-layer", format);
  if (esbx_gateway_wants_progress (ctx))
    {
      struct export_work *x = xmalloc0 (sizeof *x);

      x->store = ctx->store;
      x->ref = xstrdup (ref);
      x->fmt = fmt;
      return esbx_gateway_reply_progress (ctx, export_work, x, export_work_free);
    }
  fd = export_archive (ctx->store, ref, fmt, &size, &err);
  if (fd < 0)
    return esbx_gateway_reply_err (ctx, &err);
  /* MHD sends the file and closes FD.  */
  ctx->stream = MHD_create_response_from_fd ((uint64_t)size, fd);
  if (ctx->stream == NULL)
    {
      close (fd);
      return esbx_gateway_reply_fail (ctx, ESBX_ERR_FAILED, errno,
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

static unsigned
gc_flags (struct esbx_gateway_ctx *ctx)
{
  const char *snapshots = esbx_gateway_query (ctx, "snapshots");
  const char *cache = esbx_gateway_query (ctx, "cache");

  return (snapshots && strcmp (snapshots, "1") == 0 ? ESBX_GC_SNAPSHOTS : 0)
         | (cache && strcmp (cache, "1") == 0 ? ESBX_GC_CACHE : 0);
}

static int
gc_report (struct esbx_gateway_ctx *ctx, FILE *out, esbx_error_t *err)
{
  return esbx_sandbox_gc_flags (ctx->store, gc_flags (ctx), out, err);
}

/* A gc with ?progress=1, in the thread of progress_stream.c: the result
   is the report it answers without.  */
struct gc_work
{
  esbx_store_t *store;
  unsigned flags;
};

static json_t *
gc_work (void *data, int *payload, esbx_error_t *err)
{
  struct gc_work *g = data;
  _cleanup_free_ char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream (&text, &len);
  json_t *res;
  int r;

  (void)payload;
  if (f == NULL)
    {
      esbx_make_error (err, errno, "gc: open_memstream");
      return NULL;
    }
  r = esbx_sandbox_gc_flags (g->store, g->flags, f, err);
  fclose (f);
  if (r < 0)
    return NULL;
  res = json_new (JSON_OBJECT);
  json_set_string (res, "report", text ? text : "");
  return res;
}

void
esbx_gateway_fsck (struct esbx_gateway_ctx *ctx)
{
  esbx_gateway_reply_report (ctx, fsck_report);
}

void
esbx_gateway_gc (struct esbx_gateway_ctx *ctx)
{
  if (esbx_gateway_wants_progress (ctx))
    {
      struct gc_work *g = xmalloc0 (sizeof *g);

      g->store = ctx->store;
      g->flags = gc_flags (ctx);
      return esbx_gateway_reply_progress (ctx, gc_work, g, free);
    }
  esbx_gateway_reply_report (ctx, gc_report);
}
