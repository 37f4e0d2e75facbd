/* Making a session: its options checked, its record written (labels, env,
   secrets by name, lifetime, network), the directory built in ROOT/tmp and
   renamed into place, then mounted.  Above session.c: it needs snapshots,
   secrets, the remote and the project's defaults.  */
#include "internal.h"
#include "git.h"
#include "fs.h"
#include "hash.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

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
  _cleanup_free_ char *now = esbx_rfc3339_now (), *id = esbx_random_hex (ESBX_SESSION_ID_BYTES);

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
  if (o->tmpfs_size)
    json_set_int (j, "tmpfs_size", (int64_t)o->tmpfs_size);
  if (o->shm_size)
    json_set_int (j, "shm_size", (int64_t)o->shm_size);
  if (o->cpus)
    json_set_string (j, "cpus", o->cpus);
  if (o->disk > 0)
    json_set_int (j, "disk", o->disk);
  /* gVisor's gofer writes the workspace as host root: no idmap under it.  */
  json_set_string (j, "isolation", o->isolation ? o->isolation : "namespaces");
  json_set_string (j, "userns",
                   o->isolation && strcmp (o->isolation, "gvisor") == 0 ? "off"
                   : o->userns                                          ? o->userns
                                                                        : "auto");
  if (rootfs)
    json_set_string (j, "rootfs", rootfs);
  if (o->snapshot)
    json_set_string (j, "snapshot", o->snapshot);
  if (o->push_every > 0)
    json_set_int (j, "push_every", o->push_every);
  /* The gateway token that made it: what counts against its caps.  */
  if (o->token)
    json_set_string (j, "token", o->token);
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

/* A gVisor sandbox's root binds host directories (shim/lib/gvisor_spec.c),
   and runsc makes a missing mount point through them, on the host: a
   workspace must not lie beneath one.  */
static bool
gvisor_bound (const char *ws)
{
  static const char *const bound[]
      = { "usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "proc", "sys", "dev" };
  size_t i, n;

  while (*ws == '/')
    ws++;
  n = strcspn (ws, "/");
  for (i = 0; i < ARRAY_SIZE (bound); i++)
    if (strlen (bound[i]) == n && strncmp (ws, bound[i], n) == 0)
      return true;
  return false;
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
  if (o->isolation && strcmp (o->isolation, "namespaces") != 0
      && strcmp (o->isolation, "gvisor") != 0)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "invalid --isolation `%s`: expected namespaces or gvisor",
                                 o->isolation);
  if (o->isolation && strcmp (o->isolation, "gvisor") == 0)
    {
      if (o->rootfs)
        return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                     "--isolation gvisor: --rootfs is not available; the sandbox "
                                     "runs the host's /usr");
      if (o->workspace && gvisor_bound (o->workspace))
        return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                     "--isolation gvisor: workspace `%s` is beneath the host's "
                                     "directories the sandbox binds (/usr, /etc, /lib*, /bin, "
                                     "/sbin) or gVisor's /proc, /sys, /dev",
                                     o->workspace);
    }
  if (o->userns && strcmp (o->userns, "auto") != 0 && strcmp (o->userns, "off") != 0)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "invalid --userns `%s`: expected auto or off", o->userns);
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

/* The names of the secrets the session of snapshot NAME held or kept: the
   snapshot's diff may hold their values (a copy in the workspace), so a
   session made from it keeps them for publish to look for.  */
static json_t *
snapshot_secret_names (esbx_store_t *store, const char *project, const char *name,
                       esbx_error_t *err)
{
  _cleanup_json_ json_t *rec = esbx_snapshot_load_record (store, project, name, err);
  const json_t *names, *v;
  json_t *out;
  size_t i;

  if (rec == NULL)
    return NULL;
  out = json_new (JSON_ARRAY);
  names = json_get (rec, "secrets");
  json_array_foreach (names, i, v)
    if (v->type == JSON_STRING && esbx_name_valid (v->text))
      json_append (out, json_new_string (v->text));
  return out;
}

static int session_create (esbx_store_t *store, const char *project,
                           const struct esbx_session_opts *opts, char **name_out,
                           esbx_error_t *err);

/* A session made from a snapshot stacks its frozen layers and keeps the
   paths its source had left unmerged (esbx_unmerged_entries): without
   their kept versions, which stay with the source session.  */
static int
inherit_unmerged (esbx_store_t *store, const char *project, const char *snapshot, json_t *record,
                  esbx_error_t *err)
{
  static const char *const sides[] = { "base", "ours", "theirs" };
  _cleanup_json_ json_t *rec = esbx_snapshot_load_record (store, project, snapshot, err);
  _cleanup_json_ json_t *entries = NULL;
  size_t i, k;

  if (rec == NULL)
    return -1;
  /* Its frozen layers, shared: the session stacks them over the base.  */
  if (json_get (rec, "frozen"))
    json_set (record, "frozen", json_copy (json_get (rec, "frozen")));
  entries = esbx_unmerged_entries (rec);
  if (json_len (entries) == 0)
    return 0;
  for (i = 0; i < json_len (entries); i++)
    for (k = 0; k < 3; k++)
      json_set (json_at (entries, i), sides[k], json_new (JSON_NULL));
  json_set (record, "unmerged", steal_pointer (&entries));
  return 0;
}

static int
start_repository (esbx_store_t *store, const char *project, int sessionfd, const char *name,
                  const char *base, esbx_error_t *err)
{
  _cleanup_free_ char *commit = NULL;
  _cleanup_close_ int upper = esbx_open_dir_at (sessionfd, "upper", err);

  if (upper < 0 || esbx_git_layer_commit (store, project, base, &commit, err) < 0
      || esbx_git_session_init (upper, name, commit, err) < 0)
    return esbx_error_wrap (err, "session `%s`: its git repository", name);
  return 0;
}

/* A fork's repository came with its snapshot's layers: its HEAD moves to a
   branch of its own at the commit its parent's branch was at, as `git
   worktree add -b` would (a detached HEAD stays as it was).  */
static int
fork_repository (esbx_store_t *store, const char *project, int sessionfd, const char *name,
                 const char *snapshot, esbx_error_t *err)
{
  _cleanup_free_ char *branch = NULL, *commit = NULL;
  _cleanup_close_ int upper = esbx_open_dir_at (sessionfd, "upper", err);
  struct strv lowers = { 0 };
  int r;

  if (upper < 0 || esbx_snapshot_lowers (store, project, snapshot, &lowers, err) < 0)
    return esbx_error_wrap (err, "session `%s`: its git repository", name);
  r = esbx_git_session_head (-1, lowers.v, lowers.n, &branch, &commit);
  strv_free (&lowers);
  if (r < 0 || branch == NULL || commit == NULL)
    return 0;
  if (esbx_git_session_init (upper, name, commit, err) < 0)
    return esbx_error_wrap (err, "session `%s`: its git repository", name);
  return 0;
}

int
esbx_session_create (esbx_store_t *store, const char *project, const struct esbx_session_opts *opts,
                     char **name_out, esbx_error_t *err)
{
  struct esbx_session_opts o = *opts;
  struct esbx_network_defaults d;
  int ret;

  if (esbx_check_name ("project", project, err) < 0
      || esbx_session_defaults_apply (store, &o, err) < 0
      || esbx_disk_defaults_apply (store, project, &o, err) < 0
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
  _cleanup_json_ json_t *record = NULL, *env = NULL, *secrets = NULL, *kept = NULL;
  size_t i, len;

  if (esbx_check_name ("project", project, err) < 0 || check_opts (opts, err) < 0
      || parse_labels (opts->labels, labels, err) < 0
      || esbx_session_env_parse (opts->env, &env, err) < 0
      || esbx_secret_attach_parse (store, project, opts->secrets, &secrets, err) < 0)
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
  /* A shared project starts from the head in etcd (docs/SCALE-OUT.md):
     read there, unless esbxd's watch keeps this store at it.  */
  if (esbx_project_is_shared (store, project)
      && esbx_remote_sync_unwatched (store, project, err) < 0)
    {
      json_free (labels);
      return esbx_error_wrap (err, "session create");
    }
  /* A snapshot another host pushed is fetched first.  */
  if (opts->snapshot && esbx_project_is_shared (store, project)
      && esbx_snapshot_pull (store, project, opts->snapshot, err) < 0)
    {
      json_free (labels);
      return esbx_error_wrap (err, "session create");
    }
  if (opts->pending_base)
    {
      _cleanup_strv_ char **chain = NULL;
      size_t nchain;

      if (esbx_layer_chain (store, project, opts->pending_base, &chain, &nchain, err) < 0)
        {
          json_free (labels);
          return -1;
        }
      base = xstrdup (opts->pending_base);
    }
  else if (opts->snapshot ? esbx_snapshot_resolve (store, project, opts->snapshot, &base, err) < 0
                          : esbx_layer_resolve (store, project, opts->base, &base, err) < 0)
    {
      json_free (labels);
      return -1;
    }
  if (opts->snapshot
      && (kept = snapshot_secret_names (store, project, opts->snapshot, err)) == NULL)
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
  if (esbx_exists_at (store->rootfd, (dest = esbx_session_rel (name))))
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
  /* Its own disk: from here on, upper/ is the disk's.  */
  if (opts->disk > 0 && esbx_session_disk_make (tmpfd, tmp, opts->disk, err) < 0)
    {
      json_free (labels);
      esbx_error_wrap (err, "session `%s`", name);
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
  if (opts->snapshot && inherit_unmerged (store, project, opts->snapshot, record, err) < 0)
    goto fail;
  /* A session of a git project is on a branch of its own at its base's
     commit, a fork at its parent's.  */
  if (esbx_project_is_git (store, project)
      && (opts->snapshot ? fork_repository (store, project, tmpfd, name, opts->snapshot, err)
                         : start_repository (store, project, tmpfd, name, base, err))
             < 0)
    goto fail;
  /* Names only: values stay in ROOT/secrets.  */
  if (secrets)
    json_set (record, "secrets", steal_pointer (&secrets));
  if (json_len (kept) > 0)
    json_set (record, "kept_secrets", steal_pointer (&kept));
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
      _cleanup_free_ char *dir = esbx_session_dir (store, name);
      esbx_error_t ignored = NULL;

      esbx_session_disk_unmount_dir (dir);
      if (esbx_rm_rf_at (store->rootfd, dest, &ignored) < 0)
        esbx_error_free (&ignored);
      return -1;
    }
  *name_out = steal_pointer (&name);
  return 0;

fail:
  {
    esbx_error_t ignored = NULL;

    esbx_session_disk_unmount_dir (tmp);
    if (esbx_rm_rf_at (AT_FDCWD, tmp, &ignored) < 0)
      esbx_error_free (&ignored);
  }
  return -1;
}
