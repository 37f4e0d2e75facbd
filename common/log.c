#include "log.h"

#include <stdarg.h>
#include <stdio.h>

static const char *prog = "esbx";

void
esbx_log_set_prog (const char *p)
{
  prog = p;
}

static void
emit (const char *level, const char *fmt, va_list ap)
{
  /* One write per line so that concurrent threads do not interleave.  */
  char line[2048];
  int n;

  n = snprintf (line, sizeof line, "%s: %s", prog, level);
  if (n < 0 || (size_t)n >= sizeof line)
    return;
  vsnprintf (line + n, sizeof line - (size_t)n, fmt, ap);
  fprintf (stderr, "%s\n", line);
}

void
esbx_warn (const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  emit ("warning: ", fmt, ap);
  va_end (ap);
}

void
esbx_info (const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  emit ("", fmt, ap);
  va_end (ap);
}
