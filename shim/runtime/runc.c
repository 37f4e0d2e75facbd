/* Find runc and become it.  Order: $ESBX_RUNC, runc= of the config file,
   then "runc" and "crun" on $PATH, skipping this executable (it may be
   installed, or linked, under either name).  crun's command line is runc's,
   so either serves; runc comes first for Docker's sake, crun is what a
   podman-only host has.  */
#include "runtime.h"
#include "utils.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

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
  static const char *const names[] = { "runc", "crun" };
  _cleanup_free_ char *copy = NULL;
  char *dir, *save = NULL;
  size_t i;

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
  for (i = 0; i < ARRAY_SIZE (names); i++)
    {
      free (copy);
      copy = xstrdup (path);
      for (dir = strtok_r (copy, ":", &save); dir; dir = strtok_r (NULL, ":", &save))
        {
          _cleanup_free_ char *candidate = xasprintf ("%s/%s", *dir ? dir : ".", names[i]);

          if (access (candidate, X_OK) == 0 && !is_self (candidate))
            {
              *out = steal_pointer (&candidate);
              return 0;
            }
        }
    }
  return esbx_make_error (err, ENOENT,
                          "neither runc nor crun found on $PATH: set runc= in %s or $ESBX_RUNC",
                          ESBX_RUNTIME_CONF);
}

bool
runtime_is_crun (const struct runtime *rt)
{
  const char *base;

  if (rt->runc == NULL)
    return false;
  base = strrchr (rt->runc, '/');
  return strcmp (base ? base + 1 : rt->runc, "crun") == 0;
}

const char *
runtime_root (const struct runtime *rt)
{
  if (rt->runc_root && rt->runc_root[0])
    return rt->runc_root;
  return runtime_is_crun (rt) ? "/run/crun" : "/run/runc";
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

int
runtime_run_runc (struct runtime *rt, const char *verb, int *status, esbx_error_t *err)
{
  esbx_error_t e = NULL;
  pid_t pid;

  pid = fork ();
  if (pid < 0)
    return esbx_make_error (err, errno, "fork");
  if (pid == 0)
    {
      runtime_exec_runc (rt, &e);
      runtime_log (rt, "error", e->msg);
      _exit (127);
    }
  if (TEMP_FAILURE_RETRY (waitpid (pid, status, 0)) < 0)
    return esbx_make_error (err, errno, "wait for `%s %s`", rt->runc, verb);
  return 0;
}
