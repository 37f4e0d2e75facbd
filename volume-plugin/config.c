#include "config.h"
#include "conffile.h"
#include "layerstore.h"
#include "text.h"
#include "utils.h"

#include <stdlib.h>
#include <string.h>

void
esbx_config_clear (struct esbx_config *c)
{
  free (c->default_project);
  free (c->registry);
  free (c->etcd);
  free (c->tls_cert);
  free (c->tls_key);
  c->default_project = NULL;
  c->registry = NULL;
  c->etcd = NULL;
  c->tls_cert = NULL;
  c->tls_key = NULL;
}

static int
set_url (char **dest, const char *key, const char *value, const char *where, esbx_error_t *err)
{
  if (esbx_remote_check_url (key, value, err) < 0)
    return esbx_error_wrap (err, "%s", where);
  free (*dest);
  *dest = xstrdup (value);
  return 0;
}

static int
set (const char *key, const char *value, const char *where, void *data, esbx_error_t *err)
{
  struct esbx_config *c = data;

  if (strcmp (key, "default-project") == 0)
    {
      if (esbx_check_name ("project", value, err) < 0)
        return esbx_error_wrap (err, "%s: default-project", where);
      free (c->default_project);
      c->default_project = xstrdup (value);
      return 0;
    }
  if (strcmp (key, "registry") == 0)
    return set_url (&c->registry, key, value, where, err);
  if (strcmp (key, "etcd") == 0)
    return set_url (&c->etcd, key, value, where, err);
  if (strcmp (key, "gateway-tls-cert") == 0 || strcmp (key, "gateway-tls-key") == 0)
    {
      char **dest = strcmp (key, "gateway-tls-cert") == 0 ? &c->tls_cert : &c->tls_key;

      if (value[0] != '/')
        return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                     "%s: %s `%s`: expected an absolute path", where, key, value);
      free (*dest);
      *dest = xstrdup (value);
      return 0;
    }
  return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                               "%s: unknown setting `%s` (known: default-project, registry, etcd, "
                               "gateway-tls-cert, gateway-tls-key)",
                               where, key);
}

int
esbx_config_load (const char *path, bool must_exist, struct esbx_config *out, esbx_error_t *err)
{
  esbx_config_clear (out);
  if (esbx_conf_read (path, must_exist, set, out, err) < 0)
    {
      esbx_config_clear (out);
      return -1;
    }
  return 0;
}
