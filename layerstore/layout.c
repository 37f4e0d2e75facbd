/* The store's layout (docs/STORE-FORMAT.md): the one file that knows where
   a project, a layer and a session keep their parts.  Paths are relative
   to the store root unless they say otherwise.  */
#include "layerstore.h"
#include "utils.h"

#include <stdarg.h>

__attribute__ ((format (printf, 2, 0))) static char *
under (const char *dir, const char *fmt, va_list ap)
{
  _cleanup_free_ char *rest = xvasprintf (fmt, ap);

  return xasprintf ("%s/%s", dir, rest);
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
  return xasprintf ("sessions/%s", name);
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
