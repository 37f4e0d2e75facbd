#include "config.h"
#include "text.h"
#include "utils.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
esbx_config_clear (struct esbx_config *c)
{
  free (c->default_project);
  c->default_project = NULL;
}

static char *
trim (char *s)
{
  char *end;

  while (isspace ((unsigned char)*s))
    s++;
  end = s + strlen (s);
  while (end > s && isspace ((unsigned char)end[-1]))
    *--end = '\0';
  return s;
}

/* One `key = value` line (comments and blanks already gone).  */
static int
set_line (struct esbx_config *c, char *line, const char *path, unsigned lineno, esbx_error_t *err)
{
  char *eq = strchr (line, '='), *key, *value;

  if (eq == NULL)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "%s:%u: expected `key = value`", path,
                                 lineno);
  *eq = '\0';
  key = trim (line);
  value = trim (eq + 1);
  if (strcmp (key, "default-project") == 0)
    {
      if (esbx_check_name ("project", value, err) < 0)
        return esbx_error_wrap (err, "%s:%u: default-project", path, lineno);
      free (c->default_project);
      c->default_project = xstrdup (value);
      return 0;
    }
  return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                               "%s:%u: unknown setting `%s` (known: default-project)", path, lineno,
                               key);
}

int
esbx_config_load (const char *path, bool must_exist, struct esbx_config *out, esbx_error_t *err)
{
  _cleanup_file_ FILE *f = NULL;
  _cleanup_free_ char *line = NULL;
  size_t cap = 0;
  unsigned lineno = 0;
  char *hash;

  esbx_config_clear (out);
  f = fopen (path, "re");
  if (f == NULL)
    {
      if (errno == ENOENT && !must_exist)
        return 0;
      return esbx_make_error (err, errno, "config `%s`", path);
    }
  while (getline (&line, &cap, f) >= 0)
    {
      lineno++;
      hash = strchr (line, '#');
      if (hash)
        *hash = '\0';
      if (*trim (line) == '\0')
        continue;
      if (set_line (out, line, path, lineno, err) < 0)
        {
          esbx_config_clear (out);
          return -1;
        }
    }
  return 0;
}
