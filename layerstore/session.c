/* Sessions: a project's base plus a private upper directory, mounted as one
   overlay under ROOT/sessions/S/merged.  */
#include "internal.h"
#include "fs.h"
#include "hash.h"
#include "log.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>

/* Random bytes of a session id: 32 hex digits.  */
#define SESSION_ID_BYTES 16

char *
esbx_session_dir (esbx_store_t *store, const char *name)
{
  return xasprintf ("%s/sessions/%s", store->root, name);
}

char *
esbx_session_merged (esbx_store_t *store, const char *name)
{
  return xasprintf ("%s/sessions/%s/merged", store->root, name);
}

char *
esbx_session_upper (esbx_store_t *store, const char *name)
{
  return xasprintf ("%s/sessions/%s/upper", store->root, name);
}

int
esbx_session_open_dir (esbx_store_t *store, const char *name, esbx_error_t *err)
{
  _cleanup_free_ char *rel = NULL;
  int fd;

  if (esbx_check_name ("session", name, err) < 0)
    return -1;
  rel = xasprintf ("sessions/%s", name);
  fd = TEMP_FAILURE_RETRY (
      openat (store->rootfd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
  if (fd < 0 && errno == ENOENT)
    return esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0, "session `%s` does not exist", name);
  if (fd < 0)
    return esbx_make_error (err, errno, "open `%s/%s`", store->root, rel);
  return fd;
}

bool
esbx_session_exists (esbx_store_t *store, const char *name)
{
  _cleanup_free_ char *path = NULL;

  if (!esbx_name_valid (name))
    return false;
  path = xasprintf ("sessions/%s/session.json", name);
  return esbx_exists_at (store->rootfd, path);
}

void
esbx_session_free (struct esbx_session *s)
{
  if (s == NULL)
    return;
  free (s->id);
  free (s->name);
  free (s->project);
  free (s->base);
  {
    char **p;
    for (p = s->published; p && *p; p++)
      free (*p);
    free (s->published);
  }
  free (s->network);
  free (s->workspace);
  free (s->created);
  free (s->cpus);
  free (s->rootfs);
  free (s->snapshot);
  if (s->view)
    {
      esbx_error_t ignored = NULL;
      if (esbx_rm_rf_at (AT_FDCWD, s->view, &ignored) < 0)
        esbx_error_free (&ignored);
      close (s->view_lock);
      free (s->view);
    }
  json_free (s->labels);
  json_free (s->env);
  json_free (s->record);
  free (s);
}

/* The session's id.  A record written before sessions had ids gets one
   derived from its name, project and creation time: stable for that
   session, and never the id of a session created since, which stores a
   random one.  */
static char *
record_id (const json_t *j, const char *name)
{
  const char *id = json_get_string (j, "id"), *project = json_get_string (j, "project");
  const char *created = json_get_string (j, "created");
  _cleanup_free_ char *seed = NULL;
  char hash[ESBX_SHA256_HEX_LEN + 1];

  if (id)
    return xstrdup (id);
  seed = xasprintf ("%s\n%s\n%s", name, project, created ? created : "");
  esbx_sha256_buf (seed, strlen (seed), hash);
  return xstrndup (hash, SESSION_ID_BYTES * 2);
}

/* The record of session NAME, session.json at PATH beneath DIRFD.  */
static int
load_record (int dirfd, const char *path, const char *name, struct esbx_session **out,
             esbx_error_t *err)
{
  struct esbx_session *s;
  struct strv pub = { 0 };
  json_t *j, *arr, *item;
  int64_t v;
  size_t i;

  if (!esbx_exists_at (dirfd, path))
    return esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0, "session `%s` does not exist", name);
  j = json_parse_file_at (dirfd, path, err);
  if (j == NULL)
    return esbx_error_wrap (err, "session `%s`", name);
  if (json_get_string (j, "project") == NULL || json_get_string (j, "base") == NULL)
    {
      json_free (j);
      return esbx_make_error (err, 0, "session `%s`: record without project or base", name);
    }
  s = xmalloc0 (sizeof *s);
  s->record = j;
  s->id = record_id (j, name);
  s->name = xstrdup (name);
  s->project = xstrdup (json_get_string (j, "project"));
  s->base = xstrdup (json_get_string (j, "base"));
  s->network = xstrdup (json_get_string (j, "network") ? json_get_string (j, "network") : "none");
  s->workspace = xstrdup (json_get_string (j, "workspace") ? json_get_string (j, "workspace")
                                                           : "/workspace");
  s->created = xstrdup (json_get_string (j, "created"));
  s->cpus = xstrdup (json_get_string (j, "cpus"));
  s->rootfs = xstrdup (json_get_string (j, "rootfs"));
  s->snapshot = xstrdup (json_get_string (j, "snapshot"));
  if (s->snapshot && !esbx_name_valid (s->snapshot))
    {
      esbx_session_free (s);
      return esbx_make_error (err, 0, "session `%s`: record with a malformed snapshot", name);
    }
  if (s->rootfs && !esbx_rootfs_valid_key (s->rootfs))
    {
      esbx_session_free (s);
      return esbx_make_error (err, 0, "session `%s`: record with a malformed rootfs", name);
    }
  if (json_get_int (j, "memory", &v))
    s->memory = (uint64_t)v;
  if (json_get_int (j, "pids", &v))
    s->pids = (uint64_t)v;
  arr = json_get (j, "published");
  if (arr && arr->type == JSON_ARRAY)
    json_array_foreach (arr, i, item)
      if (item->type == JSON_STRING)
        strv_push (&pub, xstrdup (item->text));
  s->published = pub.v ? pub.v : xmalloc0 (sizeof (char *));
  s->labels = esbx_labels_copy (json_get (j, "labels"));
  s->env = esbx_session_env_copy (json_get (j, "env"));
  *out = s;
  return 0;
}

int
esbx_session_load (esbx_store_t *store, const char *name, struct esbx_session **out,
                   esbx_error_t *err)
{
  _cleanup_free_ char *path = NULL;

  if (esbx_check_name ("session", name, err) < 0)
    return -1;
  path = xasprintf ("sessions/%s/session.json", name);
  return load_record (store->rootfd, path, name, out, err);
}

int
esbx_session_load_at (int dfd, const char *name, struct esbx_session **out, esbx_error_t *err)
{
  if (esbx_check_name ("session", name, err) < 0)
    return -1;
  return load_record (dfd, "session.json", name, out, err);
}

/* Write session.json of an existing session atomically.  */
int
esbx_session_save (esbx_store_t *store, const char *name, const json_t *record, esbx_error_t *err)
{
  _cleanup_free_ char *dir = xasprintf ("sessions/%s", name);
  _cleanup_free_ char *text = NULL;
  _cleanup_close_ int dfd = -1;
  size_t len;

  dfd = esbx_open_dir_at (store->rootfd, dir, err);
  if (dfd < 0)
    return esbx_error_wrap (err, "session `%s`", name);
  text = json_serialize (record, true, &len);
  if (esbx_write_file_atomic_at (dfd, "session.json", text, len, 0644, err) < 0)
    return esbx_error_wrap (err, "session `%s`", name);
  return 0;
}

int
esbx_session_lock (esbx_store_t *store, const char *name, esbx_error_t *err)
{
  _cleanup_free_ char *path = xasprintf ("sessions/%s/lock", name);
  int fd = esbx_lock_at (store->rootfd, path, true, true, err);

  if (fd < 0)
    return esbx_error_wrap (err, "session `%s`", name);
  return fd;
}

static int
parse_labels (char **labels, json_t *obj, esbx_error_t *err)
{
  size_t i;

  for (i = 0; labels && labels[i]; i++)
    {
      const char *eq = strchr (labels[i], '=');
      _cleanup_free_ char *key = NULL;

      if (eq == NULL || eq == labels[i])
        return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "label `%s`: expected KEY=VALUE",
                                     labels[i]);
      key = xstrndup (labels[i], (size_t)(eq - labels[i]));
      if (!esbx_utf8_valid (labels[i], strlen (labels[i])))
        return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "label `%s`: not UTF-8", key);
      json_set_string (obj, key, eq + 1);
    }
  return 0;
}

static json_t *
session_record (const char *name, const char *project, const char *base,
                const struct esbx_session_opts *o, json_t *labels, json_t *env, const char *rootfs)
{
  json_t *j = json_new (JSON_OBJECT);
  _cleanup_free_ char *now = esbx_rfc3339_now (), *id = esbx_random_hex (SESSION_ID_BYTES);

  /* Gateway tokens are bound to the id, not the name: a session made later
     under the same name is another session for them.  */
  json_set_string (j, "id", id);
  json_set_string (j, "name", name);
  json_set_string (j, "project", project);
  json_set_string (j, "base", base);
  json_set (j, "published", json_new (JSON_ARRAY));
  json_set_string (j, "created", now);
  json_set (j, "labels", labels);
  /* Older readers skip the members they do not know.  */
  json_set (j, "env", env);
  json_set_string (j, "network", o->network ? o->network : "none");
  json_set_string (j, "workspace", o->workspace ? o->workspace : "/workspace");
  if (o->memory)
    json_set_int (j, "memory", (int64_t)o->memory);
  if (o->pids)
    json_set_int (j, "pids", (int64_t)o->pids);
  if (o->cpus)
    json_set_string (j, "cpus", o->cpus);
  if (rootfs)
    json_set_string (j, "rootfs", rootfs);
  if (o->snapshot)
    json_set_string (j, "snapshot", o->snapshot);
  if (o->network && strcmp (o->network, "egress") == 0)
    {
      json_t *allow = NULL;
      esbx_error_t ignored = NULL;

      /* Checked by check_opts already.  */
      if (esbx_egress_allow_parse (o->allow, &allow, &ignored) < 0)
        esbx_error_free (&ignored);
      else
        json_set (j, "allow", allow);
    }
  return j;
}

static int
check_opts (const struct esbx_session_opts *o, esbx_error_t *err)
{
  if (o->name && esbx_check_name ("session", o->name, err) < 0)
    return -1;
  if (o->network && strcmp (o->network, "none") != 0 && strcmp (o->network, "host") != 0
      && strcmp (o->network, "egress") != 0)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "invalid network `%s`: expected none, host or egress", o->network);
  if (o->allow && o->allow[0] && (o->network == NULL || strcmp (o->network, "egress") != 0))
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "--allow `%s`: only a session with --network egress has an "
                                 "allow-list",
                                 o->allow[0]);
  if (o->workspace
      && (o->workspace[0] != '/' || strstr (o->workspace, "..") != NULL
          || strcmp (o->workspace, "/") == 0))
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "invalid workspace `%s`: expected an absolute path below /",
                                 o->workspace);
  if (o->snapshot && o->base)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "--base and --from-snapshot: a snapshot has its own base");
  if (o->snapshot && esbx_check_name ("snapshot", o->snapshot, err) < 0)
    return -1;
  if (esbx_lifetime_check (o, err) < 0)
    return -1;
  if (o->allow)
    {
      _cleanup_json_ json_t *allow = NULL;
      if (esbx_egress_allow_parse (o->allow, &allow, err) < 0)
        return -1;
    }
  if (o->cpus)
    {
      char *end;
      double c = strtod (o->cpus, &end);
      if (*end != '\0' || !(c > 0.0) || c > 4096)
        return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                     "invalid cpus `%s`: expected a positive number", o->cpus);
    }
  return 0;
}

int
esbx_session_mount (esbx_store_t *store, const char *name, esbx_error_t *err)
{
  struct esbx_session *s = NULL;
  int ret;

  if (esbx_session_load (store, name, &s, err) < 0)
    return -1;
  ret = esbx_session_mount_record (store, s, err);
  esbx_session_free (s);
  return ret;
}

int
esbx_session_mount_record (esbx_store_t *store, const struct esbx_session *s, esbx_error_t *err)
{
  _cleanup_free_ char *dir = esbx_session_dir (store, s->name);
  _cleanup_free_ char *merged = NULL, *upper = NULL, *work = NULL;
  _cleanup_strv_ char **lowers = NULL;
  size_t n;
  int ret;

  merged = xasprintf ("%s/merged", dir);
  if (esbx_is_mountpoint (merged))
    return 0;
  upper = xasprintf ("%s/upper", dir);
  work = xasprintf ("%s/work", dir);
  ret = esbx_stack_lowers (store, s->project, s->base, NULL, &lowers, &n, err);
  if (ret == 0 && s->snapshot)
    {
      struct strv v = { .v = steal_pointer (&lowers), .n = n, .cap = n + 1 };
      ret = esbx_snapshot_lowers (store, s->project, s->snapshot, &v, err);
      lowers = v.v;
      n = v.n;
    }
  if (ret == 0)
    {
      _cleanup_free_ char *folded = xasprintf ("%s/lower", dir);
      ret = esbx_mount_stack (lowers, n, upper, work, merged, folded, err);
    }
  if (ret < 0)
    esbx_error_wrap (err, "session `%s`", s->name);
  return ret;
}

bool
esbx_session_is_mounted (esbx_store_t *store, const char *name)
{
  _cleanup_free_ char *merged = esbx_session_merged (store, name);
  return esbx_is_mountpoint (merged);
}

/* Unmount the merged view, then the folded bottom layers under it.  */
int
esbx_session_unmount_views (esbx_store_t *store, const char *name, bool lazy, esbx_error_t *err)
{
  _cleanup_free_ char *dir = esbx_session_dir (store, name);
  _cleanup_free_ char *merged = xasprintf ("%s/merged", dir);
  _cleanup_free_ char *folded = xasprintf ("%s/lower", dir);

  if (esbx_unmount (merged, lazy, err) < 0 || esbx_unmount (folded, lazy, err) < 0)
    return esbx_error_wrap (err, "session `%s`", name);
  return 0;
}

int
esbx_session_unmount (esbx_store_t *store, const char *name, esbx_error_t *err)
{
  return esbx_session_unmount_views (store, name, false, err);
}

static int session_create (esbx_store_t *store, const char *project,
                           const struct esbx_session_opts *opts, char **name_out,
                           esbx_error_t *err);

int
esbx_session_create (esbx_store_t *store, const char *project, const struct esbx_session_opts *opts,
                     char **name_out, esbx_error_t *err)
{
  struct esbx_session_opts o = *opts;
  struct esbx_network_defaults d;
  int ret;

  if (esbx_check_name ("project", project, err) < 0
      || esbx_network_defaults_apply (store, project, &o, &d, err) < 0)
    return -1;
  ret = session_create (store, project, &o, name_out, err);
  esbx_network_defaults_clear (&d);
  return ret;
}

static int
session_create (esbx_store_t *store, const char *project, const struct esbx_session_opts *opts,
                char **name_out, esbx_error_t *err)
{
  static const char *const subdirs[] = { "upper", "work", "merged" };
  _cleanup_free_ char *name = NULL, *base = NULL, *tmp = NULL, *text = NULL, *dest = NULL;
  _cleanup_free_ char *rootfs = NULL;
  _cleanup_close_ int tmpfd = -1, guard = -1;
  json_t *labels = json_new (JSON_OBJECT);
  _cleanup_json_ json_t *record = NULL, *env = NULL, *secrets = NULL;
  size_t i, len;

  if (esbx_check_name ("project", project, err) < 0 || check_opts (opts, err) < 0
      || parse_labels (opts->labels, labels, err) < 0
      || esbx_session_env_parse (opts->env, &env, err) < 0
      || esbx_secret_attach_parse (store, opts->secrets, &secrets, err) < 0)
    {
      json_free (labels);
      return -1;
    }
  /* A shared project not here (never pulled, or its copy dropped by gc
     --cache) is pulled first.  */
  if (!esbx_project_exists (store, project)
      && (esbx_remote_pull_absent (store, project, err) < 0
          || !esbx_project_exists (store, project)))
    {
      json_free (labels);
      if (err && *err)
        return esbx_error_wrap (err, "session create");
      return esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0, "project `%s` does not exist",
                                   project);
    }
  /* A shared project starts from the head in etcd (docs/SCALE-OUT.md).  */
  if (esbx_project_is_shared (store, project) && esbx_remote_sync (store, project, NULL, err) < 0)
    {
      json_free (labels);
      return esbx_error_wrap (err, "session create");
    }
  if (opts->snapshot ? esbx_snapshot_resolve (store, project, opts->snapshot, &base, err) < 0
                     : esbx_layer_resolve (store, project, opts->base, &base, err) < 0)
    {
      json_free (labels);
      return -1;
    }
  if (opts->name)
    name = xstrdup (opts->name);
  else
    {
      _cleanup_free_ char *hex = esbx_random_hex (4);
      /* Keep generated names within the rule's 128 characters.  */
      name = xasprintf ("%.110s-%s", project, hex);
    }
  if (esbx_exists_at (store->rootfd, (dest = xasprintf ("sessions/%s", name))))
    {
      json_free (labels);
      return esbx_make_error (err, EEXIST, "session `%s`", name);
    }

  /* Build the session in ROOT/tmp, then rename it into place: a crash leaves
     a temp dir for gc, never a half session.  */
  tmpfd = esbx_store_tmpdir (store, "session", &tmp, err);
  if (tmpfd < 0)
    {
      json_free (labels);
      return esbx_error_wrap (err, "session `%s`", name);
    }
  for (i = 0; i < ARRAY_SIZE (subdirs); i++)
    if (mkdirat (tmpfd, subdirs[i], 0755) < 0)
      {
        json_free (labels);
        esbx_make_error (err, errno, "session `%s`: mkdir `%s`", name, subdirs[i]);
        goto fail;
      }
  /* Held shared until the session names its rootfs: gc removes unused
     ones holding it exclusively.  */
  if (opts->rootfs)
    {
      guard = esbx_store_creation_lock (store, false, err);
      if (guard < 0 || esbx_rootfs_add (store, opts->rootfs, &rootfs, err) < 0)
        {
          json_free (labels);
          esbx_error_wrap (err, "session `%s`", name);
          goto fail;
        }
    }
  record = session_record (name, project, base, opts, labels, steal_pointer (&env), rootfs);
  /* Names only: values stay in ROOT/secrets.  */
  if (secrets)
    json_set (record, "secrets", steal_pointer (&secrets));
  if (esbx_lifetime_record (store, project, opts, record, err) < 0)
    goto fail;
  text = json_serialize (record, true, &len);
  /* Two fsyncs, each a journal commit (most of a create on a busy host):
     the record, straight into the private temp directory, before the
     rename; sessions/ after it.  */
  if (esbx_write_new_file_at (tmpfd, "session.json", text, len, 0644, err) < 0)
    goto fail;
  if (renameat2 (AT_FDCWD, tmp, store->rootfd, dest, RENAME_NOREPLACE) < 0)
    {
      esbx_make_error (err, errno, "session `%s`", name);
      goto fail;
    }
  {
    esbx_error_t ignored = NULL;
    /* Best effort, as before: the session exists whatever fsync says.  */
    if (esbx_fsync_at (store->rootfd, "sessions", &ignored) < 0)
      esbx_error_free (&ignored);
  }
  if (esbx_session_mount (store, name, err) < 0)
    {
      esbx_error_t ignored = NULL;
      if (esbx_rm_rf_at (store->rootfd, dest, &ignored) < 0)
        esbx_error_free (&ignored);
      return -1;
    }
  *name_out = steal_pointer (&name);
  return 0;

fail:
  {
    esbx_error_t ignored = NULL;
    if (esbx_rm_rf_at (AT_FDCWD, tmp, &ignored) < 0)
      esbx_error_free (&ignored);
  }
  return -1;
}

char **
esbx_session_list (esbx_store_t *store, const char *project, esbx_error_t *err)
{
  _cleanup_strv_ char **names = esbx_list_dir_at (store->rootfd, "sessions", err);
  struct strv out = { 0 };
  size_t i;

  if (names == NULL)
    return NULL;
  for (i = 0; names[i]; i++)
    {
      struct esbx_session *s = NULL;
      esbx_error_t ignored = NULL;

      if (!esbx_session_exists (store, names[i]))
        continue;
      if (project)
        {
          if (esbx_session_load (store, names[i], &s, &ignored) < 0)
            {
              esbx_error_free (&ignored);
              continue;
            }
          if (strcmp (s->project, project) != 0)
            {
              esbx_session_free (s);
              continue;
            }
          esbx_session_free (s);
        }
      strv_push (&out, xstrdup (names[i]));
    }
  return out.v ? out.v : xmalloc0 (sizeof (char *));
}
