#include "utils.h"

#include <stdarg.h>
#include <string.h>

static void
oom (void)
{
  fputs ("esbx: out of memory\n", stderr);
  abort ();
}

void *
xmalloc (size_t size)
{
  void *p = malloc (size ? size : 1);
  if (p == NULL)
    oom ();
  return p;
}

void *
xmalloc0 (size_t size)
{
  void *p = calloc (1, size ? size : 1);
  if (p == NULL)
    oom ();
  return p;
}

void *
xrealloc (void *ptr, size_t size)
{
  void *p = realloc (ptr, size ? size : 1);
  if (p == NULL)
    oom ();
  return p;
}

char *
xstrdup (const char *s)
{
  char *p;

  if (s == NULL)
    return NULL;
  p = strdup (s);
  if (p == NULL)
    oom ();
  return p;
}

char *
xstrndup (const char *s, size_t n)
{
  char *p = strndup (s, n);
  if (p == NULL)
    oom ();
  return p;
}

char *
xvasprintf (const char *fmt, va_list ap)
{
  char *p;

  if (vasprintf (&p, fmt, ap) < 0)
    oom ();
  return p;
}

char *
xasprintf (const char *fmt, ...)
{
  va_list ap;
  char *p;

  va_start (ap, fmt);
  p = xvasprintf (fmt, ap);
  va_end (ap);
  return p;
}

void
strv_push (struct strv *s, char *owned)
{
  if (s->n + 2 > s->cap)
    {
      s->cap = s->cap ? s->cap * 2 : 8;
      s->v = xrealloc (s->v, s->cap * sizeof (char *));
    }
  s->v[s->n++] = owned;
  s->v[s->n] = NULL;
}

void
strv_free (struct strv *s)
{
  size_t i;

  for (i = 0; i < s->n; i++)
    free (s->v[i]);
  free (s->v);
  s->v = NULL;
  s->n = s->cap = 0;
}

size_t
strv_len (char *const *v)
{
  size_t n = 0;

  while (v && v[n])
    n++;
  return n;
}
