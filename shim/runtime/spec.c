/* The config.json rewrite that puts a container into its session.
 *
 * Docker bind-mounts a session's merged directory (ROOT/sessions/S/merged,
 * returned by the volume plugin) into the container; that mount is how we
 * recognise an esbx container.  Joining the holder means path entries for
 * the network, uts and ipc namespaces (runc cannot join a mount namespace;
 * the session's files arrive through the bind mount itself).  The pid
 * namespace is not joined: the container keeps the one its config asks
 * for (a new one, as Docker and podman ask by default), so that the
 * session's commands and the container cannot name each other's processes
 * and so cannot open each other's /proc/PID/environ or /proc/PID/root.  */
#include "runtime.h"
#include "path.h"
#include "text.h"
#include "layerstore.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>

static bool
is_bind (const json_t *mount)
{
  const char *type = json_get_string (mount, "type");
  const json_t *options = json_get (mount, "options");
  const json_t *o;
  size_t i;

  if (type && strcmp (type, "bind") == 0)
    return true;
  if (options == NULL || options->type != JSON_ARRAY)
    return false;
  json_array_foreach (options, i, o)
    {
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

/* The same for REL, a path relative to a store root.  */
static char *
session_of_rel (const char *rel)
{
  _cleanup_free_ char *abs = xasprintf ("/%s", rel);

  return session_of (abs, "");
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

/* The first symlink on REL beneath ROOTFD, for the message of a refusal
   (owned; NULL when none is found any more).  */
static char *
first_symlink (int rootfd, const char *rel)
{
  _cleanup_free_ char *copy = xstrdup (rel);
  char *p = copy;
  struct stat st;

  for (;;)
    {
      char *slash = strchr (p, '/');

      if (slash)
        *slash = '\0';
      if (fstatat (rootfd, copy, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return NULL;
      if (S_ISLNK (st.st_mode))
        return xstrdup (copy);
      if (slash == NULL)
        return NULL;
      *slash = '/';
      p = slash + 1;
    }
}

/* SOURCE leads to REL beneath the store ROOT (a realpath): resolve REL with
   openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) semantics.  Nothing beneath
   a store is ever followed: below ROOT/sessions/S/merged is session S's
   content, and a symlink there (`link -> ../../T/merged`, or an absolute
   one) would make runc bind-mount another session's files while we attach
   the container to S, or to T.  */
static int
source_in_store (const char *source, const char *root, const char *rel, char **session,
                 esbx_error_t *err)
{
  _cleanup_free_ char *clean = NULL;
  _cleanup_free_ char *s = NULL;
  _cleanup_free_ char *link = NULL;
  _cleanup_close_ int rootfd = -1;
  _cleanup_close_ int fd = -1;
  esbx_error_t e = NULL;
  struct stat st;

  if (esbx_clean_relpath (rel, true, &clean, &e) < 0)
    {
      esbx_error_free (&e);
      return esbx_make_error (err, 0, "mount `%s`: `..` beneath the esbx store `%s`: refused",
                              source, root);
    }
  s = session_of_rel (clean);
  rootfd = TEMP_FAILURE_RETRY (open (root, O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (rootfd < 0)
    return esbx_make_error (err, errno, "open the esbx store `%s`", root);
  /* O_PATH with O_NOFOLLOW opens a trailing symlink itself: fstat tells.  */
  fd = esbx_open_beneath (rootfd, clean, O_PATH, 0, &e);
  if (fd >= 0 && fstat (fd, &st) < 0)
    return esbx_make_error (err, errno, "mount `%s`: stat", source);
  if (fd >= 0 && !S_ISLNK (st.st_mode))
    {
      if (s && esbx_name_valid (s))
        *session = steal_pointer (&s);
      return 0;
    }
  if (fd >= 0 || e->status == ELOOP)
    {
      esbx_error_free (&e);
      link = first_symlink (rootfd, clean);
      if (s && link && strlen (link) > strlen ("sessions//merged") + strlen (s))
        return esbx_make_error (err, 0,
                                "mount `%s`: `%s` in esbx session `%s` is a symlink: refused (a "
                                "session's content is never followed)",
                                source, link + strlen ("sessions//merged") + strlen (s), s);
      return esbx_make_error (err, 0,
                              "mount `%s`: `%s` is a symlink beneath the esbx store `%s`: refused",
                              source, link ? link : clean, root);
    }
  if (e->status != ENOENT && e->status != ENOTDIR)
    {
      int saved = e->status;
      esbx_error_free (&e);
      return esbx_make_error (err, saved, "mount `%s`", source);
    }
  esbx_error_free (&e);
  if (s == NULL)
    return 0; /* not a session's: runc says what is missing */
  {
    _cleanup_free_ char *dir = esbx_session_file (s, "merged");
    if (fstatat (rootfd, dir, &st, AT_SYMLINK_NOFOLLOW) == 0)
      return esbx_make_error (err, ENOENT, "mount `%s`: not in esbx session `%s`", source, s);
  }
  /* A vanished merged directory means the session was discarded after
     Docker resolved the volume: say so rather than let runc report a bare
     ENOENT.  */
  return esbx_make_error (err, ENOENT, "esbx session `%s` is gone (discarded?): mount `%s`", s,
                          source);
}

/* Which of REAL_ROOTS (N of them, NULL where missing) PATH names; N when
   none.  */
static size_t
which_root (const char *path, char *const *real_roots, size_t n)
{
  size_t i;

  for (i = 0; i < n; i++)
    if (real_roots[i] && strcmp (path, real_roots[i]) == 0)
      return i;
  return n;
}

/* Resolve SOURCE like realpath(3) until it reaches one of the stores: the
   host's own symlinks (an operator's /var/run -> /run, a link to a session's
   merged directory) are followed, but from a store root on, the rest is
   resolved by source_in_store.  *root receives the index of the store, N
   when SOURCE does not lead into one.  */
static int
resolve_source (const char *source, char *const *real_roots, size_t n, size_t *root, char **rest,
                esbx_error_t *err)
{
  _cleanup_free_ char *todo = xstrdup (source);
  char cur[PATH_MAX] = "";
  unsigned hops = 0;

  *root = n;
  *rest = NULL;
  for (;;)
    {
      char target[PATH_MAX], next[PATH_MAX];
      char *p = todo, *slash;
      struct stat st;
      ssize_t len;

      *root = which_root (cur[0] ? cur : "/", real_roots, n);
      if (*root < n)
        {
          *rest = xstrdup (todo);
          return 0;
        }
      while (*p == '/')
        p++;
      if (*p == '\0')
        return 0;
      slash = strchrnul (p, '/');
      if ((slash - p == 1 && p[0] == '.') || (slash - p == 2 && p[0] == '.' && p[1] == '.'))
        {
          if (slash - p == 2 && strrchr (cur, '/'))
            *strrchr (cur, '/') = '\0';
          memmove (todo, slash, strlen (slash) + 1);
          continue;
        }
      if (snprintf (next, sizeof next, "%s/%.*s", cur, (int)(slash - p), p) >= (int)sizeof next)
        return esbx_make_error (err, ENAMETOOLONG, "mount `%s`", source);
      if (lstat (next, &st) < 0)
        return 0; /* runc says what is missing */
      memmove (todo, slash, strlen (slash) + 1);
      if (!S_ISLNK (st.st_mode))
        {
          memcpy (cur, next, strlen (next) + 1);
          continue;
        }
      if (++hops > 40)
        return esbx_make_error (err, ELOOP, "mount `%s`", source);
      len = readlink (next, target, sizeof target - 1);
      if (len < 0)
        return esbx_make_error (err, errno, "mount `%s`: readlink `%s`", source, next);
      target[len] = '\0';
      {
        _cleanup_free_ char *joined = xasprintf ("%s%s", target, todo);
        free (todo);
        todo = steal_pointer (&joined);
      }
      if (target[0] == '/')
        cur[0] = '\0';
    }
}

/* The session of a mount source under any of ROOTS (REAL: their realpaths,
   NULL where missing); *root receives the index.  A source that no longer
   exists but has the shape of a session's merged directory is an error, and
   so is a symlink anywhere beneath a store.  */
static int
mount_session (const char *source, char *const *roots, char *const *real_roots, char **session,
               size_t *root, esbx_error_t *err)
{
  _cleanup_free_ char *rest = NULL;
  size_t i, n = strv_len (roots);

  *session = NULL;
  if (resolve_source (source, real_roots, n, root, &rest, err) < 0)
    return -1;
  if (*root < n)
    return source_in_store (source, real_roots[*root], rest, session, err);
  /* Not in a store (any more): a session discarded with its merged
     directory.  */
  for (i = 0; roots[i]; i++)
    {
      _cleanup_free_ char *s = session_of (source, roots[i]);
      if (s == NULL && real_roots[i])
        s = session_of (source, real_roots[i]);
      if (s && access (source, F_OK) < 0)
        return esbx_make_error (err, errno, "esbx session `%s` is gone (discarded?): mount `%s`", s,
                                source);
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
  for (i = 0; i < json_len (mounts) && ret == 0; i++)
    {
      const json_t *m = json_at (mounts, i);
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

static const char *const joined_types[] = { "network", "uts", "ipc" };

static bool
joined_type (const char *type)
{
  size_t i;

  for (i = 0; i < ARRAY_SIZE (joined_types); i++)
    if (strcmp (type, joined_types[i]) == 0)
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

json_t *
spec_object_member (json_t *obj, const char *key)
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
  json_t *old = json_get (linux_, "namespaces");
  json_t *ns = json_new (JSON_ARRAY);
  size_t i;

  /* Keep the other namespaces (pid, mount, cgroup, user...) in their
     order.  */
  if (old && old->type == JSON_ARRAY)
    for (i = 0; i < json_len (old); i++)
      {
        const char *type = json_get_string (json_at (old, i), "type");

        if (type && joined_type (type))
          continue;
        json_append (ns, json_take_at (old, i));
      }
  for (i = 0; i < ARRAY_SIZE (joined_types); i++)
    json_append (ns, ns_entry (joined_types[i], pid));
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
  for (i = 0; i < json_len (args) && i < 2; i++)
    {
      const json_t *a = json_at (args, i);

      if (a->type == JSON_STRING && strcmp (a->text, "libnetwork-setkey") == 0)
        return true;
    }
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
      for (i = 0; i < json_len (list); i++)
        if (!is_network_hook (json_at (list, i)))
          json_append (kept, json_take_at (list, i));
      json_set (hooks, stages[s], kept);
    }
}

void
spec_join_holder (json_t *config, const char *session, pid_t pid, const char *cgroups_path)
{
  json_t *linux_ = spec_object_member (config, "linux");

  join_namespaces (linux_, pid);
  /* runc would set the hostname inside the joined uts namespace, i.e. the
     session's: the hostname is the holder's (the session name).  */
  json_remove (config, "hostname");
  json_remove (config, "domainname");
  drop_network_hooks (config);
  if (cgroups_path)
    json_set_string (linux_, "cgroupsPath", cgroups_path);
  json_set_string (spec_object_member (config, "annotations"), ESBX_SESSION_ANNOTATION, session);
}
