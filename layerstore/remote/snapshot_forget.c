/* liblayerstore: a session's automatic snapshot that a newer pushed one
 * replaced, taken off this store and the remote (docs/SCALE-OUT.md,
 * "Sessions that outlive their host"): its etcd record, then its
 * manifest; the registry's garbage-collect removes the blobs.  A snapshot
 * something builds on stays: a session here, a snapshot in etcd that
 * names it as its parent, a session whose last pushed snapshot it is.  */
#include "remote.h"
#include "log.h"
#include "utils.h"

#include <stdatomic.h>
#include <string.h>

/* A registry that does not delete is told once per process.  */
static atomic_bool told_no_delete;

/* Whether the etcd VALUE (a snapshot's record, or a session's last pushed
   snapshot) names DATA as its parent or snapshot.  */
static bool
names_it (const char *value, size_t len, void *data)
{
  _cleanup_json_ json_t *j = NULL;
  esbx_error_t ignored = NULL;
  const char *p, *s;

  j = json_parse (value, len, &ignored);
  if (j == NULL)
    {
      /* Unreadable: it might, so the snapshot stays.  */
      esbx_error_free (&ignored);
      return true;
    }
  p = json_get_string (j, "parent");
  s = json_get_string (j, "snapshot");
  return (p && strcmp (p, data) == 0) || (s && strcmp (s, data) == 0);
}

/* Whether anything in etcd builds on snapshot NAME of PROJECT.  */
static int
used (const struct esbx_remote *rm, const char *project, const char *name, bool *yes,
      esbx_error_t *err)
{
  _cleanup_free_ char *snaps = xasprintf ("esbx/projects/%s/snapshots/", project);
  _cleanup_free_ char *sessions = xasprintf ("esbx/projects/%s/sessions/", project);

  if (esbx_etcd_any_under (rm, snaps, names_it, (void *)name, yes, err) < 0)
    return -1;
  if (*yes)
    return 0;
  return esbx_etcd_any_under (rm, sessions, names_it, (void *)name, yes, err);
}

static int
forget_remote (esbx_store_t *store, const char *project, const char *name, esbx_error_t *err)
{
  _cleanup_free_ char *key = esbx_remote_snapshot_key (project, name);
  _cleanup_json_ json_t *rec = NULL;
  struct esbx_remote rm = { 0 };
  struct esbx_registry reg = { 0 };
  struct esbx_etcd_kv kv = { 0 };
  const char *manifest;
  bool yes = false, done = false;
  int ret = -1;

  if (esbx_remote_load (store, &rm, err) < 0 || esbx_registry_open (&rm, project, &reg, err) < 0
      || esbx_etcd_get (&rm, key, &kv, err) < 0)
    goto out;
  ret = 0;
  if (kv.value == NULL)
    goto out;
  ret = -1;
  rec = json_parse (kv.value, kv.len, err);
  if (rec == NULL)
    goto out;
  manifest = json_get_string (rec, "manifest");
  if (!esbx_registry_digest_valid (manifest))
    {
      esbx_make_error (err, 0, "etcd `%s`: key `%s`: no manifest digest", rm.etcd, key);
      goto out;
    }
  if (used (&rm, project, name, &yes, err) < 0)
    goto out;
  if (yes)
    {
      ret = 0;
      goto out;
    }
  if (esbx_etcd_delete_if (&rm, key, kv.mod_revision, &done, err) < 0)
    goto out;
  if (!done)
    {
      /* Pushed again meanwhile: it stays.  */
      ret = 0;
      goto out;
    }
  /* A host may have pushed a snapshot on it between the look and the
     delete: then the record goes back (the manifest is still there).  */
  if (used (&rm, project, name, &yes, err) < 0)
    goto out;
  if (yes)
    ret = esbx_etcd_put_if (&rm, key, kv.value, 0, &done, err);
  else
    ret = esbx_registry_delete_manifest (&reg, manifest, err);
  /* Readers no longer find it; the registry keeps what it will not
     delete.  */
  if (ret < 0 && (*err)->kind == ESBX_ERR_FORBIDDEN)
    {
      if (!atomic_exchange (&told_no_delete, true))
        esbx_warn ("%s: replaced snapshots stay in the registry", (*err)->msg);
      esbx_error_free (err);
      ret = 0;
    }

out:
  esbx_etcd_kv_free (&kv);
  esbx_registry_close (&reg);
  esbx_remote_free (&rm);
  return ret;
}

int
esbx_snapshot_retire (esbx_store_t *store, const char *name, esbx_error_t *err)
{
  _cleanup_free_ char *project = NULL;
  esbx_error_t ignored = NULL;

  if (esbx_snapshot_find_project (store, name, &project, err) < 0)
    return esbx_error_wrap (err, "snapshot `%s`", name);
  /* Something here uses it: it stays, here and on the remote.  */
  if (esbx_snapshot_rm (store, name, &ignored) < 0)
    {
      esbx_error_free (&ignored);
      return 0;
    }
  if (!esbx_project_is_shared (store, project))
    return 0;
  if (forget_remote (store, project, name, err) < 0)
    return esbx_error_wrap (err, "snapshot `%s`: take it off the remote", name);
  return 0;
}
