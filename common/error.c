#include "error.h"
#include "utils.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[] = {
  [ESBX_ERR_FAILED] = "failed",
  [ESBX_ERR_USAGE] = "usage",
  [ESBX_ERR_NOT_FOUND] = "not-found",
  [ESBX_ERR_EXISTS] = "exists",
  [ESBX_ERR_CONFLICT] = "conflict",
  [ESBX_ERR_UNMERGED] = "unmerged",
  [ESBX_ERR_FORBIDDEN] = "forbidden",
  [ESBX_ERR_BUSY] = "busy",
  [ESBX_ERR_TOO_LARGE] = "too-large",
  [ESBX_ERR_EXEC_FAILED] = "exec-failed",
  [ESBX_ERR_EXEC_NOT_FOUND] = "exec-not-found",
};

const char *
esbx_error_kind_name (enum esbx_error_kind kind)
{
  if ((size_t)kind >= sizeof kind_names / sizeof kind_names[0])
    return "failed";
  return kind_names[kind];
}

static enum esbx_error_kind
kind_of_errno (int status)
{
  switch (status)
    {
    case ENOENT:
    case ESRCH:
      return ESBX_ERR_NOT_FOUND;
    case EEXIST:
    case ENOTEMPTY:
      return ESBX_ERR_EXISTS;
    case EPERM:
    case EACCES:
    case ELOOP: /* a symlink where none may be (O_NOFOLLOW, RESOLVE_NO_SYMLINKS) */
    case EXDEV: /* a path that leaves its root (RESOLVE_BENEATH, RESOLVE_IN_ROOT) */
      return ESBX_ERR_FORBIDDEN;
    case EBUSY:
      return ESBX_ERR_BUSY;
    case E2BIG:
    case EFBIG:
    case ENAMETOOLONG:
      return ESBX_ERR_TOO_LARGE;
    default:
      return ESBX_ERR_FAILED;
    }
}

int
esbx_error_exit_status (const struct esbx_error *err)
{
  if (err == NULL)
    return ESBX_EXIT_OK;
  switch (err->kind)
    {
    case ESBX_ERR_USAGE:
      return ESBX_EXIT_USAGE;
    case ESBX_ERR_CONFLICT:
      return ESBX_EXIT_CONFLICT;
    case ESBX_ERR_UNMERGED:
      return ESBX_EXIT_UNMERGED;
    case ESBX_ERR_EXEC_FAILED:
      return 126;
    case ESBX_ERR_EXEC_NOT_FOUND:
      return 127;
    default:
      return ESBX_EXIT_ERROR;
    }
}

enum esbx_error_kind
esbx_error_kind_of_name (const char *name)
{
  size_t i;

  for (i = 0; name && i < sizeof kind_names / sizeof kind_names[0]; i++)
    if (kind_names[i] && strcmp (kind_names[i], name) == 0)
      return (enum esbx_error_kind)i;
  return ESBX_ERR_FAILED;
}

enum esbx_error_kind
esbx_error_kind_of_exit (int code)
{
  switch (code)
    {
    case ESBX_EXIT_USAGE:
      return ESBX_ERR_USAGE;
    case ESBX_EXIT_CONFLICT:
      return ESBX_ERR_CONFLICT;
    case ESBX_EXIT_UNMERGED:
      return ESBX_ERR_UNMERGED;
    case 126:
      return ESBX_ERR_EXEC_FAILED;
    case 127:
      return ESBX_ERR_EXEC_NOT_FOUND;
    default:
      return ESBX_ERR_FAILED;
    }
}

static int __attribute__ ((format (printf, 4, 0)))
make_error_v (esbx_error_t *err, enum esbx_error_kind kind, int status, const char *fmt, va_list ap)
{
  _cleanup_free_ char *msg = NULL;
  struct esbx_error *e;

  if (err == NULL)
    return -1;
  msg = xvasprintf (fmt, ap);
  e = xmalloc0 (sizeof *e);
  e->status = status;
  e->kind = kind;
  if (status != 0)
    e->msg = xasprintf ("%s: %s", msg, strerror (status));
  else
    e->msg = steal_pointer (&msg);
  if (*err != NULL)
    esbx_error_free (err);
  *err = e;
  return -1;
}

int
esbx_make_error (esbx_error_t *err, int status, const char *fmt, ...)
{
  va_list ap;
  int ret;

  va_start (ap, fmt);
  ret = make_error_v (err, kind_of_errno (status), status, fmt, ap);
  va_end (ap);
  return ret;
}

int
esbx_make_error_kind (esbx_error_t *err, enum esbx_error_kind kind, int status, const char *fmt,
                      ...)
{
  va_list ap;
  int ret;

  va_start (ap, fmt);
  ret = make_error_v (err, kind, status, fmt, ap);
  va_end (ap);
  return ret;
}

int
esbx_error_wrap (esbx_error_t *err, const char *fmt, ...)
{
  _cleanup_free_ char *prefix = NULL;
  va_list ap;
  char *msg;

  if (err == NULL || *err == NULL)
    return -1;
  va_start (ap, fmt);
  prefix = xvasprintf (fmt, ap);
  va_end (ap);
  msg = xasprintf ("%s: %s", prefix, (*err)->msg);
  free ((*err)->msg);
  (*err)->msg = msg;
  return -1;
}

void
esbx_error_free (esbx_error_t *err)
{
  if (err == NULL || *err == NULL)
    return;
  free ((*err)->msg);
  free (*err);
  *err = NULL;
}

int
esbx_error_report (esbx_error_t *err, FILE *stream, const char *prog)
{
  int code;

  if (err == NULL || *err == NULL)
    return ESBX_EXIT_OK;
  code = esbx_error_exit_status (*err);
  fprintf (stream, "%s: %s\n", prog, (*err)->msg);
  esbx_error_free (err);
  return code;
}
