/* /etc/esbx/runtime.conf: "key=value" lines, '#' comments (common/conffile.h).
 *
 *   runc=/usr/sbin/runc     the runc to exec ($ESBX_RUNC wins)
 *   root=/var/lib/esbx      an esbx store; repeat for several.  $ESBX_ROOT
 *                           and /var/lib/esbx are always recognised.
 *
 * dockerd does not hand its environment to the runtime reliably (the
 * containerd shim sits in between), so the file is how a host configures
 * the runtime; the variables are for tests and ad-hoc use.  */
#include "runtime.h"
#include "conffile.h"
#include "layerstore.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>

static int
set (const char *key, const char *value, const char *where, void *data, esbx_error_t *err)
{
  struct runtime_conf *conf = data;

  if (strcmp (key, "runc") == 0)
    {
      free (conf->runc);
      conf->runc = xstrdup (value);
    }
  else if (strcmp (key, "root") == 0)
    strv_push (&conf->roots, xstrdup (value));
  else
    return esbx_make_error (err, 0, "%s: unknown key `%s`", where, key);
  return 0;
}

int
runtime_conf_load (struct runtime_conf *conf, esbx_error_t *err)
{
  const char *path = getenv ("ESBX_RUNTIME_CONF");

  if (path == NULL || *path == '\0')
    path = ESBX_RUNTIME_CONF;
  return esbx_conf_read (path, false, set, conf, err);
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
