#include "log.h"
#include "text.h"
#include "utils.h"

#include <stdarg.h>
#include <stdio.h>

static const char *prog = "esbx";

void
esbx_log_set_prog (const char *p)
{
  prog = p;
}

/* Names, paths and URLs in a message may come from a request or from
   session content: the whole message is escaped (esbx_escape_line), so a
   newline in a name can never start a forged line of its own.  */
static void __attribute__ ((format (printf, 2, 0)))
emit (const char *level, const char *fmt, va_list ap)
{
  _cleanup_free_ char *shown = NULL;
  char line[2048];

  vsnprintf (line, sizeof line, fmt, ap);
  shown = esbx_escape_line (line);
  /* One write per line so that concurrent threads do not interleave.  */
  fprintf (stderr, "%s: %s%s\n", prog, level, shown);
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
