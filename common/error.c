#include "error.h"
#include "utils.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static int __attribute__ ((format (printf, 4, 0)))
make_error_v (esbx_error_t *err, int code, int status, const char *fmt, va_list ap)
{
  _cleanup_free_ char *msg = NULL;
  struct esbx_error *e;

  if (err == NULL)
    return -1;
  msg = xvasprintf (fmt, ap);
  e = xmalloc0 (sizeof *e);
  e->status = status;
  e->code = code;
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
  ret = make_error_v (err, ESBX_EXIT_ERROR, status, fmt, ap);
  va_end (ap);
  return ret;
}

int
esbx_make_error_code (esbx_error_t *err, int code, int status, const char *fmt, ...)
{
  va_list ap;
  int ret;

  va_start (ap, fmt);
  ret = make_error_v (err, code, status, fmt, ap);
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
  code = (*err)->code;
  fprintf (stream, "%s: %s\n", prog, (*err)->msg);
  esbx_error_free (err);
  return code;
}
