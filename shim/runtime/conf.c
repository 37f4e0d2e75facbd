/* /etc/esbx/runtime.conf: "key=value" lines, '#' comments.
 *
 *   runc=/usr/sbin/runc     the runc to exec ($ESBX_RUNC wins)
 *   root=/var/lib/esbx      an esbx store; repeat for several.  $ESBX_ROOT
 *                           and /var/lib/esbx are always recognised.
 *
 * dockerd does not hand its environment to the runtime reliably (the
 * containerd shim sits in between), so the file is how a host configures
 * the runtime; the variables are for tests and ad-hoc use.  */
#include "runtime.h"
#include "layerstore.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>

static char *
trim (char *s)
{
  char *end;

  while (*s == ' ' || *s == '\t')
    s++;
  end = s + strlen (s);
  while (end > s && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\n' || end[-1] == '\r'))
    *--end = '\0';
  return s;
}

int
runtime_conf_load (struct runtime_conf *conf, esbx_error_t *err)
{
  const char *path = getenv ("ESBX_RUNTIME_CONF");
  _cleanup_file_ FILE *f = NULL;
  _cleanup_free_ char *line = NULL;
  size_t cap = 0;
  unsigned lineno = 0;

  if (path == NULL || *path == '\0')
    path = ESBX_RUNTIME_CONF;
  f = fopen (path, "re");
  if (f == NULL)
    {
      if (errno == ENOENT)
        return 0;
      return esbx_make_error (err, errno, "open `%s`", path);
    }
  while (getline (&line, &cap, f) >= 0)
    {
      char *key = trim (line), *value, *eq;

      lineno++;
      if (*key == '\0' || *key == '#')
        continue;
      eq = strchr (key, '=');
      if (eq == NULL)
        return esbx_make_error (err, 0, "%s:%u: expected key=value", path, lineno);
      *eq = '\0';
      key = trim (key);
      value = trim (eq + 1);
      if (strcmp (key, "runc") == 0)
        {
          free (conf->runc);
          conf->runc = xstrdup (value);
        }
      else if (strcmp (key, "root") == 0)
        {
          strv_push (&conf->roots, xstrdup (value));
        }
      else
        return esbx_make_error (err, 0, "%s:%u: unknown key `%s`", path, lineno, key);
    }
  return 0;
}

void
runtime_conf_free (struct runtime_conf *conf)
{
  free (conf->runc);
  strv_free (&conf->roots);
  conf->runc = NULL;
}

char **
runtime_store_roots (const struct runtime *rt)
{
  const char *env = getenv ("ESBX_ROOT");
  struct strv roots = { 0 };
  size_t i;

  if (env && *env)
    strv_push (&roots, xstrdup (env));
  for (i = 0; i < rt->conf.roots.n; i++)
    if (*rt->conf.roots.v[i])
      strv_push (&roots, xstrdup (rt->conf.roots.v[i]));
  strv_push (&roots, xstrdup (ESBX_DEFAULT_ROOT));
  return roots.v;
}
