/* The gateway's file routes (scope `runtime`): read a file or list a
   directory of a session's merged view, or write a file into it, every path
   resolved beneath the view.  */
#include "routes_files.h"
#include "fs.h"
#include "path.h"
#include "sandbox.h"
#include "utils.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The session's merged view, mounted on demand, as a directory fd that
   every request path is resolved beneath.  */
static int
open_session_root (struct esbx_gateway_ctx *ctx)
{
  _cleanup_free_ char *merged = NULL;
  esbx_error_t err = NULL;
  int fd;

  if (esbx_gateway_session_must_exist (ctx) < 0)
    return -1;
  if (esbx_sandbox_view_acquire (ctx->store, ctx->arg, &merged, &err) < 0)
    {
      esbx_gateway_reply_err (ctx, &err);
      return -1;
    }
  fd = esbx_open_dir_at (AT_FDCWD, merged, &err);
  if (fd < 0)
    esbx_gateway_reply_err (ctx, &err);
  return fd;
}

static int
clean_request_path (struct esbx_gateway_ctx *ctx, bool allow_root, char **rel)
{
  const char *path = esbx_gateway_query (ctx, "path");
  esbx_error_t err = NULL;

  if (path == NULL)
    {
      esbx_gateway_reply_fail (ctx, ESBX_ERR_USAGE, 0, "query parameter `path` is required");
      return -1;
    }
  if (esbx_clean_relpath (path, allow_root, rel, &err) < 0)
    {
      esbx_gateway_reply_fail (ctx, ESBX_ERR_USAGE, 0, "path `%s`: %s", path, err->msg);
      esbx_error_free (&err);
      return -1;
    }
  return 0;
}

static void
list_dir (struct esbx_gateway_ctx *ctx, int fd)
{
  _cleanup_dir_ DIR *d = fdopendir (fcntl (fd, F_DUPFD_CLOEXEC, 3));
  json_t *arr;
  struct dirent *de;

  if (d == NULL)
    return esbx_gateway_reply_fail (ctx, ESBX_ERR_FAILED, errno, "opendir: %s", strerror (errno));
  arr = json_new (JSON_ARRAY);
  while ((de = readdir (d)))
    {
      struct stat st;
      json_t *o;

      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
        continue;
      if (fstatat (dirfd (d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        continue;
      o = json_new (JSON_OBJECT);
      json_set_string (o, "name", de->d_name);
      json_set_string (o, "type", esbx_file_mode_name (st.st_mode));
      json_set_int (o, "size", (int64_t)st.st_size);
      json_set_int (o, "mode", st.st_mode & 07777);
      json_append (arr, o);
    }
  esbx_gateway_reply_json (ctx, MHD_HTTP_OK, arr);
}

void
esbx_gateway_file_read (struct esbx_gateway_ctx *ctx)
{
  _cleanup_close_ int root = -1, fd = -1;
  _cleanup_free_ char *rel = NULL;
  esbx_error_t err = NULL;
  struct stat st;

  if (clean_request_path (ctx, true, &rel) < 0 || (root = open_session_root (ctx)) < 0)
    return;
  /* O_NOFOLLOW on every component: a symlink is refused, never followed.  */
  fd = rel[0] ? esbx_open_beneath (root, rel, O_RDONLY | O_NONBLOCK, 0, &err)
              : fcntl (root, F_DUPFD_CLOEXEC, 3);
  if (fd < 0)
    {
      if (err)
        return esbx_gateway_reply_err (ctx, &err);
      return esbx_gateway_reply_fail (ctx, ESBX_ERR_FAILED, errno, "dup");
    }
  if (fstat (fd, &st) < 0)
    return esbx_gateway_reply_fail (ctx, ESBX_ERR_FAILED, errno, "stat: %s", strerror (errno));
  if (S_ISDIR (st.st_mode))
    return list_dir (ctx, fd);
  if (!S_ISREG (st.st_mode))
    return esbx_gateway_reply_fail (ctx, ESBX_ERR_FAILED, 0, "`%s` is a %s, not a regular file",
                                    rel, esbx_file_mode_name (st.st_mode));
  if ((uint64_t)st.st_size > ESBX_GATEWAY_MAX_FILE_READ)
    return esbx_gateway_reply_fail (ctx, ESBX_ERR_TOO_LARGE, 0, "`%s` is larger than %u bytes", rel,
                                    ESBX_GATEWAY_MAX_FILE_READ);
  esbx_gateway_reply_file (ctx, fd, "application/octet-stream");
}

void
esbx_gateway_file_write (struct esbx_gateway_ctx *ctx)
{
  _cleanup_close_ int root = -1, dir = -1, fd = -1;
  _cleanup_free_ char *rel = NULL, *base = NULL;
  const char *mode_s = esbx_gateway_query (ctx, "mode");
  esbx_error_t err = NULL;
  unsigned long mode = 0644;
  char *end;
  json_t *o;

  if (mode_s)
    {
      mode = strtoul (mode_s, &end, 8);
      if (*mode_s == '\0' || *end || mode > 0777)
        return esbx_gateway_reply_fail (ctx, ESBX_ERR_USAGE, 0,
                                        "query parameter `mode` must be octal permission bits (no "
                                        "setuid, setgid or sticky)");
    }
  if (clean_request_path (ctx, false, &rel) < 0 || (root = open_session_root (ctx)) < 0)
    return;
  dir = esbx_open_parent_beneath (root, rel, &base, &err);
  if (dir < 0)
    return esbx_gateway_reply_err (ctx, &err);
  /* O_NOFOLLOW: writing through a symlink planted in the session could land
     outside it.  */
  fd = openat (dir, base, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK,
               (mode_t)mode);
  if (fd < 0)
    return esbx_gateway_reply_fail (
        ctx, errno == ELOOP ? ESBX_ERR_FORBIDDEN : ESBX_ERR_FAILED, errno, "write `%s`: %s", rel,
        errno == ELOOP ? "is a symlink; refusing to follow it" : strerror (errno));
  {
    struct stat st;
    if (fstat (fd, &st) < 0 || !S_ISREG (st.st_mode))
      return esbx_gateway_reply_fail (ctx, ESBX_ERR_FAILED, 0, "write `%s`: not a regular file",
                                      rel);
  }
  if (esbx_write_all (fd, ctx->body, ctx->len) < 0 || fchmod (fd, (mode_t)mode) < 0)
    return esbx_gateway_reply_fail (ctx, ESBX_ERR_FAILED, errno, "write `%s`: %s", rel,
                                    strerror (errno));
  o = json_new (JSON_OBJECT);
  json_set_string (o, "path", rel);
  json_set_int (o, "size", (int64_t)ctx->len);
  esbx_gateway_reply_json (ctx, MHD_HTTP_OK, o);
}
