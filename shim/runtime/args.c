/* runc's command line, read but never changed: the argv we exec is the one
   we were given.  runc's flag parser (urfave/cli over Go's flag package)
   accepts "-flag" and "--flag", "--flag value" and "--flag=value".  */
#include "runtime.h"
#include "utils.h"

#include <string.h>

/* Global flags of runc and crun that take a value (crun's --cgroup-manager
   is podman's `--runtime-arg --cgroup-manager --runtime-arg disabled`).
   Anything else that starts with a dash is a boolean (--debug,
   --systemd-cgroup, --help, --version).  */
static const char *const global_value_flags[]
    = { "root", "log", "log-format", "criu", "rootless", "cgroup-manager" };

/* Flags of create, run and delete that take a value.  */
/* create, run, delete and exec: the flags that take a value.  */
static const char *const verb_value_flags[] = { "bundle",
                                                "b",
                                                "console-socket",
                                                "pid-file",
                                                "preserve-fds",
                                                "process",
                                                "p",
                                                "cwd",
                                                "env",
                                                "e",
                                                "user",
                                                "u",
                                                "additional-gids",
                                                "g",
                                                "cap",
                                                "c",
                                                "apparmor",
                                                "process-label",
                                                "cgroup" };

static bool
in_list (const char *name, size_t len, const char *const *list, size_t n)
{
  size_t i;

  for (i = 0; i < n; i++)
    if (strlen (list[i]) == len && strncmp (list[i], name, len) == 0)
      return true;
  return false;
}

/* Split argv[*i] ("-x", "--x", "--x=v") into its name and value; consume the
   next argument when the flag takes a value and has no '='.  */
static void
next_flag (int argc, char **argv, int *i, const char *const *value_flags, size_t n,
           const char **name, size_t *name_len, const char **value)
{
  const char *arg = argv[*i];
  const char *eq;

  arg += arg[1] == '-' ? 2 : 1;
  eq = strchr (arg, '=');
  *name = arg;
  *name_len = eq ? (size_t)(eq - arg) : strlen (arg);
  *value = NULL;
  if (eq)
    *value = eq + 1;
  else if (in_list (arg, *name_len, value_flags, n) && *i + 1 < argc)
    *value = argv[++*i];
}

static bool
is_flag (const char *arg, size_t len, const char *name)
{
  return strlen (name) == len && strncmp (arg, name, len) == 0;
}

void
runtime_parse_globals (struct runtime *rt, int argc, char **argv)
{
  int i;

  rt->argc = argc;
  rt->argv = argv;
  for (i = 1; i < argc; i++)
    {
      const char *name, *value;
      size_t len;

      if (strcmp (argv[i], "--") == 0)
        {
          i++;
          break;
        }
      if (argv[i][0] != '-' || argv[i][1] == '\0')
        break;
      next_flag (argc, argv, &i, global_value_flags, ARRAY_SIZE (global_value_flags), &name, &len,
                 &value);
      if (is_flag (name, len, "root"))
        rt->runc_root = value;
      else if (is_flag (name, len, "log"))
        rt->log = value;
      else if (is_flag (name, len, "log-format"))
        rt->log_format = value;
      else if (is_flag (name, len, "systemd-cgroup"))
        rt->systemd_cgroup = value == NULL || strcmp (value, "false") != 0;
      else if (is_flag (name, len, "cgroup-manager"))
        rt->cgroup_manager = value;
    }
  rt->verb = i;
}

void
runtime_parse_verb (int argc, char **argv, struct verb_args *out)
{
  int i;

  memset (out, 0, sizeof *out);
  for (i = 0; i < argc; i++)
    {
      const char *name, *value;
      size_t len;

      if (strcmp (argv[i], "--") == 0)
        {
          if (out->id == NULL && i + 1 < argc)
            out->id = argv[i + 1];
          return;
        }
      if (argv[i][0] != '-' || argv[i][1] == '\0')
        {
          if (out->id == NULL)
            out->id = argv[i];
          continue;
        }
      next_flag (argc, argv, &i, verb_value_flags, ARRAY_SIZE (verb_value_flags), &name, &len,
                 &value);
      if (is_flag (name, len, "bundle") || is_flag (name, len, "b"))
        out->bundle = value;
    }
}
