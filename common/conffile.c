#include "conffile.h"
#include "utils.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int
esbx_conf_read (const char *path, bool must_exist, esbx_conf_fn fn, void *data, esbx_error_t *err)
{
  _cleanup_file_ FILE *f = NULL;
  _cleanup_free_ char *line = NULL;
  size_t cap = 0;
  unsigned lineno = 0;

  f = fopen (path, "re");
  if (f == NULL)
    {
      if (errno == ENOENT && !must_exist)
        return 0;
      return esbx_make_error (err, errno, "config `%s`", path);
    }
  while (getline (&line, &cap, f) >= 0)
    {
      _cleanup_free_ char *where = NULL;
      char *hash = strchr (line, '#'), *eq, *key;

      lineno++;
      if (hash)
        *hash = '\0';
      key = trim (line);
      if (*key == '\0')
        continue;
      where = xasprintf ("%s:%u", path, lineno);
      eq = strchr (key, '=');
      if (eq)
        *eq = '\0';
      if (eq == NULL || *trim (key) == '\0')
        return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "%s: expected `key = value`", where);
      if (fn (trim (key), trim (eq + 1), where, data, err) < 0)
        return -1;
    }
  return 0;
}
