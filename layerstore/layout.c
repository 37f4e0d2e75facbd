/* The store's layout (docs/STORE-FORMAT.md): the one file that knows where
   a project, a layer and a session keep their parts.  Paths are relative
   to the store root unless they say otherwise.  */
#include "layerstore.h"
#include "utils.h"

#include <stdarg.h>
#include <string.h>

/* A "/" B: paths are built for every session a walk reads (several per
   record), and printf's machinery was a tenth of `session list`.  */
static char *
join (const char *a, const char *b)
{
  size_t la = strlen (a), lb = strlen (b);
  char *p = xmalloc (la + lb + 2);

  memcpy (p, a, la);
  p[la] = '/';
  memcpy (p + la + 1, b, lb + 1);
  return p;
}

__attribute__ ((format (printf, 2, 0))) static char *
under (const char *dir, const char *fmt, va_list ap)
{
  _cleanup_free_ char *rest = NULL;

  /* Most callers pass a plain name, or "%s" and one.  */
  if (strchr (fmt, '%') == NULL)
    return join (dir, fmt);
  if (strcmp (fmt, "%s") == 0)
    return join (dir, va_arg (ap, const char *));
  rest = xvasprintf (fmt, ap);
  return join (dir, rest);
}

char *
esbx_project_rel (const char *project)
{
  return xasprintf ("projects/%s", project);
}

char *
esbx_project_file (const char *project, const char *fmt, ...)
{
  _cleanup_free_ char *dir = esbx_project_rel (project);
  va_list ap;
  char *p;

  va_start (ap, fmt);
  p = under (dir, fmt, ap);
  va_end (ap);
  return p;
}

char *
esbx_layer_rel (const char *project, const char *id)
{
  return xasprintf ("projects/%s/layers/%s", project, id);
}

char *
esbx_layer_file (const char *project, const char *id, const char *fmt, ...)
{
  _cleanup_free_ char *dir = esbx_layer_rel (project, id);
  va_list ap;
  char *p;

  va_start (ap, fmt);
  p = under (dir, fmt, ap);
  va_end (ap);
  return p;
}

char *
esbx_frozen_rel (const char *project, const char *id)
{
  return xasprintf ("projects/%s/frozen/%s", project, id);
}

char *
esbx_session_rel (const char *name)
{
  return join ("sessions", name);
}

char *
esbx_session_file (const char *name, const char *fmt, ...)
{
  _cleanup_free_ char *dir = esbx_session_rel (name);
  va_list ap;
  char *p;

  va_start (ap, fmt);
  p = under (dir, fmt, ap);
  va_end (ap);
  return p;
}

char *
esbx_store_abs (esbx_store_t *store, const char *rel)
{
  return xasprintf ("%s/%s", store->root, rel);
}

char *
esbx_queue_rel (const char *project)
{
  return xasprintf ("projects/%s/queue", project);
}

char *
esbx_request_file (const char *project, const char *id, const char *fmt, ...)
{
  _cleanup_free_ char *dir = xasprintf ("projects/%s/queue/%s", project, id);
  va_list ap;
  char *p;

  va_start (ap, fmt);
  p = under (dir, fmt, ap);
  va_end (ap);
  return p;
}
