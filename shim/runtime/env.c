/* The session's env in a container's config.
 *
 * A container gets the session's `--env` keys its config lacks, except HOME
 * and the variables that choose what code a process loads before or
 * besides its own: the dynamic loader's (LD_PRELOAD, LD_LIBRARY_PATH, ...,
 * and the rest of what glibc drops for setuid programs), the shells'
 * startup files and exported functions, and the interpreters' module paths
 * and option hooks.  Whoever creates a session (a project token's holder)
 * is not whoever starts a container that joins it (with its own
 * credentials): a session's LD_PRELOAD naming a library in the workspace
 * would run in every such container before its command.  A container that
 * wants them asks with ESBX_SESSION_LOADER_ENV=1 in its own env; its own
 * `docker run -e` values are never touched.  */
#include "runtime.h"
#include "text.h"
#include "utils.h"

#include <stdlib.h>
#include <string.h>

#define LOADER_OPT_IN "ESBX_SESSION_LOADER_ENV"

/* Exact names.  glibc's UNSECURE_ENVVARS (sysdeps/generic/unsecvars.h)
   less the LD_ ones (a prefix below) and TMPDIR, which loads nothing;
   then shells and interpreters.  */
static const char *const loader_names[] = {
  "GCONV_PATH",
  "GETCONF_DIR",
  "HOSTALIASES",
  "LOCALDOMAIN",
  "LOCPATH",
  "MALLOC_TRACE",
  "NIS_PATH",
  "NLSPATH",
  "RESOLV_HOST_CONF",
  "RES_OPTIONS",
  "TMPDIR",
  "TZDIR",
  /* shells */
  "BASH_ENV",
  "ENV",
  "SHELLOPTS",
  "BASHOPTS",
  "PS4",
  "PROMPT_COMMAND",
  "IFS",
  /* interpreters */
  "PYTHONPATH",
  "PYTHONHOME",
  "PYTHONSTARTUP",
  "PYTHONINSPECT",
  "PERL5LIB",
  "PERL5OPT",
  "PERLLIB",
  "PERL5DB",
  "RUBYLIB",
  "RUBYOPT",
  "NODE_OPTIONS",
  "NODE_PATH",
  "JAVA_TOOL_OPTIONS",
  "_JAVA_OPTIONS",
  "JDK_JAVA_OPTIONS",
  "CLASSPATH",
  "GIT_EXEC_PATH",
  "GIT_CONFIG_GLOBAL",
  "GIT_CONFIG_SYSTEM",
};

/* Prefixes: every LD_ variable (LD_PRELOAD, LD_AUDIT, ...; the loader
   ignores unknown ones, so none is worth the risk) and bash's exported
   functions (BASH_FUNC_name%%).  */
static const char *const loader_prefixes[] = { "LD_", "BASH_FUNC_" };

bool
runtime_env_is_loader (const char *key)
{
  size_t i;

  for (i = 0; i < ARRAY_SIZE (loader_names); i++)
    if (strcmp (key, loader_names[i]) == 0)
      return true;
  for (i = 0; i < ARRAY_SIZE (loader_prefixes); i++)
    if (esbx_has_prefix (key, loader_prefixes[i]))
      return true;
  return false;
}

/* The entry of "KEY=VALUE" for KEY in LIST, or NULL.  */
static const char *
env_value (const json_t *list, const char *key)
{
  size_t i, klen = strlen (key);
  const json_t *e;

  json_array_foreach (list, i, e)
    if (e->type == JSON_STRING && strncmp (e->text, key, klen) == 0
        && (e->text[klen] == '=' || e->text[klen] == '\0'))
      return e->text[klen] == '=' ? e->text + klen + 1 : "";
  return NULL;
}

static int
cmp_str (const void *a, const void *b)
{
  return strcmp (*(char *const *)a, *(char *const *)b);
}

json_t *
spec_fill_env (json_t *config, const json_t *env)
{
  json_t *process = json_get (config, "process");
  _cleanup_strv_ char **held = NULL;
  struct strv withheld = { 0 };
  json_t *list, *out;
  const json_t *v;
  const char *key, *opt_in;
  bool loader_ok;
  size_t i;

  if (process == NULL || process->type != JSON_OBJECT || json_len (env) == 0)
    return NULL;
  list = json_get (process, "env");
  if (list == NULL || list->type != JSON_ARRAY)
    {
      list = json_new (JSON_ARRAY);
      json_set (process, "env", list);
    }
  opt_in = env_value (list, LOADER_OPT_IN);
  loader_ok = opt_in && strcmp (opt_in, "1") == 0;
  /* HOME is left to runc, which takes the image's user's from its
     /etc/passwd when the config has none: a session's HOME names a
     directory of the session's root, not of the image's.  */
  json_object_foreach (env, i, key, v)
    {
      _cleanup_free_ char *kv = NULL;

      if (strcmp (key, "HOME") == 0 || env_value (list, key))
        continue;
      if (!loader_ok && runtime_env_is_loader (key))
        {
          strv_push (&withheld, xstrdup (key));
          continue;
        }
      kv = xasprintf ("%s=%s", key, v->text);
      json_append (list, json_new_string (kv));
    }
  if (withheld.n == 0)
    return NULL;
  held = withheld.v;
  esbx_sort (held, withheld.n, sizeof *held, cmp_str);
  out = json_new (JSON_ARRAY);
  for (i = 0; i < withheld.n; i++)
    json_append (out, json_new_string (held[i]));
  return out;
}
