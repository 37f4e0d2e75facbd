/* The config.json rewrite that puts a container into its session.
 *
 * Docker bind-mounts a session's merged directory (ROOT/sessions/S/merged,
 * returned by the volume plugin) into the container; that mount is how we
 * recognise an esbx container.  Joining the holder means path entries for
 * the pid, network, uts and ipc namespaces (runc cannot join a mount
 * namespace; the session's files arrive through the bind mount itself).  */
#include "runtime.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

static bool
is_bind (const json_t *mount)
{
  const char *type = json_get_string (mount, "type");
  const json_t *options = json_get (mount, "options");
  size_t i;

  if (type && strcmp (type, "bind") == 0)
    return true;
  if (options == NULL || options->type != JSON_ARRAY)
    return false;
  for (i = 0; i < options->n; i++)
    {
      const json_t *o = options->items[i];
      if (o->type == JSON_STRING
          && (strcmp (o->text, "bind") == 0 || strcmp (o->text, "rbind") == 0))
        return true;
    }
  return false;
}

/* If PATH is ROOT/sessions/S/merged or beneath it, return S (owned).  */
static char *
session_of (const char *path, const char *root)
{
  size_t rlen = strlen (root);
  const char *s, *end;

  while (rlen > 1 && root[rlen - 1] == '/')
    rlen--;
  if (strncmp (path, root, rlen) != 0 || !esbx_has_prefix (path + rlen, "/sessions/"))
    return NULL;
  s = path + rlen + strlen ("/sessions/");
  end = strchr (s, '/');
  if (end == NULL || end == s || !esbx_has_prefix (end, "/merged"))
    return NULL;
  if (end[strlen ("/merged")] != '\0' && end[strlen ("/merged")] != '/')
    return NULL;
  return xstrndup (s, (size_t)(end - s));
}

struct found
{
  char *session;
  size_t root; /* index in the list of roots */
};

static int
add_session (struct found *found, char *session, size_t root, esbx_error_t *err)
{
  if (found->session == NULL)
    {
      found->session = session;
      found->root = root;
      return 0;
    }
  if (strcmp (found->session, session) != 0 || found->root != root)
    {
      esbx_make_error (err, 0,
                       "the container mounts two esbx sessions, `%s` and `%s`: a container "
                       "joins one session's holder",
                       found->session, session);
      free (session);
      return -1;
    }
  free (session);
  return 0;
}

/* The session of a mount source under any of ROOTS (REAL: their realpaths,
   NULL where missing); *root receives the index.  A source that no longer
   exists but has the shape of a session's merged directory is an error.  */
static int
mount_session (const char *source, char *const *roots, char *const *real_roots, char **session,
               size_t *root, esbx_error_t *err)
{
  char real[PATH_MAX];
  size_t i;

  *session = NULL;
  if (realpath (source, real) == NULL)
    {
      int saved = errno;

      /* A vanished merged directory means the session was discarded after
         Docker resolved the volume: say so rather than let runc report a
         bare ENOENT.  */
      for (i = 0; roots[i]; i++)
        {
          _cleanup_free_ char *s = session_of (source, roots[i]);
          if (s == NULL && real_roots[i])
            s = session_of (source, real_roots[i]);
          if (s)
            return esbx_make_error (
                err, saved, "esbx session `%s` is gone (discarded?): mount `%s`", s, source);
        }
      return 0;
    }
  for (i = 0; roots[i]; i++)
    {
      char *s;

      if (real_roots[i] == NULL)
        continue;
      s = session_of (real, real_roots[i]);
      if (s == NULL)
        continue;
      if (!esbx_name_valid (s))
        {
          free (s);
          continue;
        }
      *session = s;
      *root = i;
      return 0;
    }
  return 0;
}

int
spec_find_session (const json_t *config, char *const *roots, char **session, size_t *root,
                   esbx_error_t *err)
{
  const json_t *mounts = json_get (config, "mounts");
  /* Has holes (roots that do not exist): not a NULL-terminated vector.  */
  _cleanup_free_ char **real_roots = NULL;
  struct found found = { NULL, 0 };
  size_t i, n = strv_len (roots);
  int ret = 0;

  *session = NULL;
  if (config->type != JSON_OBJECT)
    return esbx_make_error (err, 0, "config.json is not a JSON object");
  if (mounts == NULL)
    return 0;
  if (mounts->type != JSON_ARRAY)
    return esbx_make_error (err, 0, "config.json: `mounts` is not an array");
  real_roots = xmalloc0 ((n + 1) * sizeof (char *));
  for (i = 0; i < n; i++)
    real_roots[i] = realpath (roots[i], NULL);
  for (i = 0; i < mounts->n && ret == 0; i++)
    {
      const json_t *m = mounts->items[i];
      const char *source = json_get_string (m, "source");
      char *s;
      size_t r;

      if (source == NULL || source[0] != '/' || !is_bind (m))
        continue;
      ret = mount_session (source, roots, real_roots, &s, &r, err);
      if (ret == 0 && s)
        ret = add_session (&found, s, r, err);
    }
  for (i = 0; i < n; i++)
    free (real_roots[i]);
  if (ret < 0)
    {
      free (found.session);
      return -1;
    }
  *session = found.session;
  *root = found.root;
  return 0;
}

static bool
joined_type (const char *type)
{
  static const char *const types[] = { "pid", "network", "uts", "ipc" };
  size_t i;

  for (i = 0; i < ARRAY_SIZE (types); i++)
    if (strcmp (type, types[i]) == 0)
      return true;
  return false;
}

static const char *
proc_ns_name (const char *type)
{
  return strcmp (type, "network") == 0 ? "net" : type;
}

static json_t *
ns_entry (const char *type, pid_t pid)
{
  json_t *e = json_new (JSON_OBJECT);
  _cleanup_free_ char *path = xasprintf ("/proc/%d/ns/%s", (int)pid, proc_ns_name (type));

  json_set_string (e, "type", type);
  json_set_string (e, "path", path);
  return e;
}

static json_t *
object_member (json_t *obj, const char *key)
{
  json_t *v = json_get (obj, key);

  if (v == NULL || v->type != JSON_OBJECT)
    {
      v = json_new (JSON_OBJECT);
      json_set (obj, key, v);
    }
  return v;
}

static void
join_namespaces (json_t *linux_, pid_t pid)
{
  static const char *const types[] = { "pid", "network", "uts", "ipc" };
  json_t *old = json_get (linux_, "namespaces");
  json_t *ns = json_new (JSON_ARRAY);
  size_t i;

  /* Keep the other namespaces (mount, cgroup, user...) in their order.  */
  if (old && old->type == JSON_ARRAY)
    for (i = 0; i < old->n; i++)
      {
        const char *type = json_get_string (old->items[i], "type");

        if (type && joined_type (type))
          continue;
        /* Moved to NS; a placeholder keeps OLD freeable.  */
        json_append (ns, old->items[i]);
        old->items[i] = json_new (JSON_NULL);
      }
  for (i = 0; i < ARRAY_SIZE (types); i++)
    json_append (ns, ns_entry (types[i], pid));
  json_set (linux_, "namespaces", ns);
}

/* Docker's libnetwork hook configures the container's network namespace
   from the outside (moving a veth into it).  The namespace is now the
   session's, shared by every container of the session: a second container
   would collide with the first one's interfaces.  */
static bool
is_network_hook (const json_t *hook)
{
  const json_t *args = json_get (hook, "args");
  size_t i;

  if (args == NULL || args->type != JSON_ARRAY)
    return false;
  for (i = 0; i < args->n && i < 2; i++)
    if (args->items[i]->type == JSON_STRING
        && strcmp (args->items[i]->text, "libnetwork-setkey") == 0)
      return true;
  return false;
}

static void
drop_network_hooks (json_t *config)
{
  static const char *const stages[] = { "prestart", "createRuntime" };
  json_t *hooks = json_get (config, "hooks");
  size_t s, i;

  if (hooks == NULL || hooks->type != JSON_OBJECT)
    return;
  for (s = 0; s < ARRAY_SIZE (stages); s++)
    {
      json_t *list = json_get (hooks, stages[s]);
      json_t *kept;

      if (list == NULL || list->type != JSON_ARRAY)
        continue;
      kept = json_new (JSON_ARRAY);
      for (i = 0; i < list->n; i++)
        {
          if (is_network_hook (list->items[i]))
            continue;
          /* Moved to KEPT; a placeholder keeps LIST freeable.  */
          json_append (kept, list->items[i]);
          list->items[i] = json_new (JSON_NULL);
        }
      json_set (hooks, stages[s], kept);
    }
}

void
spec_join_holder (json_t *config, const char *session, pid_t pid, const char *cgroups_path)
{
  json_t *linux_ = object_member (config, "linux");

  join_namespaces (linux_, pid);
  /* runc would set the hostname inside the joined uts namespace, i.e. the
     session's: the hostname is the holder's (the session name).  */
  json_remove (config, "hostname");
  json_remove (config, "domainname");
  drop_network_hooks (config);
  if (cgroups_path)
    json_set_string (linux_, "cgroupsPath", cgroups_path);
  json_set_string (object_member (config, "annotations"), ESBX_SESSION_ANNOTATION, session);
}
