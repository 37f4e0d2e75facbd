#include "config.h"
#include "conffile.h"
#include "text.h"
#include "utils.h"

#include <stdlib.h>
#include <string.h>

void
esbx_config_clear (struct esbx_config *c)
{
  free (c->default_project);
  c->default_project = NULL;
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
  return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                               "%s: unknown setting `%s` (known: default-project)", where, key);
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
