/* Find runc and become it.  Order: $ESBX_RUNC, runc= of the config file,
   then "runc" on $PATH, skipping this executable (it may be installed, or
   linked, under the name runc).  */
#include "runtime.h"
#include "utils.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

extern char **environ;

static bool
is_self (const char *path)
{
  struct stat self, st;

  if (stat ("/proc/self/exe", &self) < 0 || stat (path, &st) < 0)
    return false;
  return self.st_dev == st.st_dev && self.st_ino == st.st_ino;
}

static int
find_runc (const struct runtime *rt, char **out, esbx_error_t *err)
{
  const char *env = getenv ("ESBX_RUNC");
  const char *path = getenv ("PATH");
  _cleanup_free_ char *copy = NULL;
  char *dir, *save = NULL;

  if (env && *env)
    {
      *out = xstrdup (env);
      return 0;
    }
  if (rt->conf.runc && *rt->conf.runc)
    {
      *out = xstrdup (rt->conf.runc);
      return 0;
    }
  if (path == NULL || *path == '\0')
    path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  copy = xstrdup (path);
  for (dir = strtok_r (copy, ":", &save); dir; dir = strtok_r (NULL, ":", &save))
    {
      _cleanup_free_ char *candidate = xasprintf ("%s/runc", *dir ? dir : ".");

      if (access (candidate, X_OK) == 0 && !is_self (candidate))
        {
          *out = steal_pointer (&candidate);
          return 0;
        }
    }
  return esbx_make_error (err, ENOENT, "runc not found: set runc= in %s, $ESBX_RUNC or $PATH",
                          ESBX_RUNTIME_CONF);
}

int
runtime_find_runc (struct runtime *rt, esbx_error_t *err)
{
  if (rt->runc)
    return 0;
  return find_runc (rt, &rt->runc, err);
}

int
runtime_exec_runc (struct runtime *rt, esbx_error_t *err)
{
  if (runtime_find_runc (rt, err) < 0)
    return -1;
  /* argv[0] is the only argument we replace: runc re-executes itself
     through /proc/self/exe, never through argv[0], but ps and runc's own
     messages read better with its real name.  */
  rt->argv[0] = rt->runc;
  execve (rt->runc, rt->argv, environ);
  return esbx_make_error (err, errno, "exec `%s`", rt->runc);
}
