/* `--env-file FILE` of `session create`, read as `docker run --env-file`
   reads one: a KEY=VALUE line each, the value taken as written (no quotes,
   no expansion); blank lines and lines starting with `#` (after leading
   white space) are skipped; a bare KEY takes the caller's value, and is
   skipped when the caller has none.  The file is the caller's own: it is
   read with the caller's rights, symlinks followed.  */
#include "cli.h"
#include "utils.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UTF8_BOM "\xef\xbb\xbf"

/* One line, without its newline: appended to OUT as "K=V", or skipped.  */
static int
env_line (char *line, struct strv *out, esbx_error_t *err)
{
  char *eq, *value;

  while (isspace ((unsigned char)*line))
    line++;
  if (*line == '\0' || *line == '#')
    return 0;
  eq = strchr (line, '=');
  if (eq)
    {
      *eq = '\0';
      value = eq + 1;
    }
  else if ((value = getenv (line)) == NULL)
    return 0;
  if (esbx_session_env_check (line, value, err) < 0)
    return -1;
  strv_push (out, xasprintf ("%s=%s", line, value));
  return 0;
}

int
cli_read_env_file (const char *path, struct strv *out, esbx_error_t *err)
{
  _cleanup_file_ FILE *f = fopen (path, "re");
  _cleanup_free_ char *line = NULL;
  size_t cap = 0, lineno = 0;
  ssize_t n;

  if (f == NULL)
    return esbx_make_error (err, errno, "env file `%s`", path);
  errno = 0;
  while ((n = getline (&line, &cap, f)) >= 0)
    {
      char *start = line;

      lineno++;
      if (n > 0 && line[n - 1] == '\n')
        line[--n] = '\0';
      if (n > 0 && line[n - 1] == '\r')
        line[--n] = '\0';
      if ((size_t)n != strlen (line))
        return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "env file `%s` line %zu: a NUL byte",
                                     path, lineno);
      if (lineno == 1 && strncmp (start, UTF8_BOM, strlen (UTF8_BOM)) == 0)
        start += strlen (UTF8_BOM);
      if (env_line (start, out, err) < 0)
        return esbx_error_wrap (err, "env file `%s` line %zu", path, lineno);
      errno = 0;
    }
  if (ferror (f))
    return esbx_make_error (err, errno, "read env file `%s`", path);
  return 0;
}
