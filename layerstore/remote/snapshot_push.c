/* liblayerstore: pushing a session's snapshot to the remote, so that the
 * session can be made again on another host (docs/SCALE-OUT.md, "Sessions
 * that outlive their host").  The snapshot's diff goes to the registry as
 * an OCI layer blob (overlay whiteouts as `.wh.` entries, as a published
 * layer's), its record as the config of a manifest tagged snap.NAME, with
 * the paths of its whiteouts and opaque directories (the importer skips
 * the `.wh.` entries on the way back); etcd gets its record
 * (esbx/projects/P/snapshots/NAME, created once) and the session's last
 * pushed snapshot (esbx/projects/P/sessions/S/snapshot).  The values of
 * the session's secrets never travel: a snapshot records names only.  */
#include "remote.h"
#include "fs.h"
#include "hash.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

/* A snapshot's diff is no deeper than a path is long.  */
#define MARKERS_MAX 100000

/* The whiteouts and opaque directories of the diff DFD (at REL), as paths
   relative to its root.  */
static int
markers (int dfd, const char *rel, json_t *whiteouts, json_t *opaque, esbx_error_t *err)
{
  _cleanup_strv_ char **names = esbx_list_dir_at (dfd, ".", err);
  size_t i;

  if (names == NULL)
    return -1;
  for (i = 0; names[i]; i++)
    {
      _cleanup_free_ char *child = rel[0] ? xasprintf ("%s/%s", rel, names[i]) : xstrdup (names[i]);
      _cleanup_close_ int cfd = -1;
      struct stat st;

      if (fstatat (dfd, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0)
        return esbx_make_error (err, errno, "stat `/%s`", child);
      if (json_len (whiteouts) + json_len (opaque) >= MARKERS_MAX)
        return esbx_make_error (err, E2BIG, "more than %d whiteouts and opaque directories",
                                MARKERS_MAX);
      if (esbx_is_whiteout (&st))
        json_append (whiteouts, json_new_string (child));
      if (!S_ISDIR (st.st_mode))
        continue;
      if (esbx_is_opaque_at (dfd, names[i]))
        json_append (opaque, json_new_string (child));
      cfd = TEMP_FAILURE_RETRY (
          openat (dfd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (cfd < 0)
        return esbx_make_error (err, errno, "open `/%s`", child);
      if (markers (cfd, child, whiteouts, opaque, err) < 0)
        return -1;
    }
  return 0;
}

/* The config blob of snapshot REC with diff DFD: {"record", "whiteouts",
   "opaque"}.  */
static char *
config_text (const json_t *rec, int dfd, size_t *len, esbx_error_t *err)
{
  _cleanup_json_ json_t *c = json_new (JSON_OBJECT);
  json_t *whiteouts = json_new (JSON_ARRAY), *opaque = json_new (JSON_ARRAY);
  json_t *r = json_copy (rec);

  /* What only this host knows stays here.  */
  json_remove (r, "manifest");
  json_remove (r, "pulled");
  json_set (c, "record", r);
  json_set (c, "whiteouts", whiteouts);
  json_set (c, "opaque", opaque);
  if (esbx_is_opaque_at (dfd, "."))
    json_append (opaque, json_new_string (""));
  if (markers (dfd, "", whiteouts, opaque, err) < 0)
    return NULL;
  return json_serialize (c, false, len);
}

static json_t *
descriptor (const char *media_type, const char *digest, int64_t size)
{
  json_t *j = json_new (JSON_OBJECT);

  json_set_string (j, "mediaType", media_type);
  json_set_string (j, "digest", digest);
  json_set_int (j, "size", size);
  return j;
}

/* Push the blobs and the manifest of snapshot NAME (record REC, diff
   DIFF); *DIGEST receives the manifest's.  */
static int
push_artifact (esbx_store_t *store, struct esbx_registry *reg, const char *name, const json_t *rec,
               const char *diff, char **digest, esbx_error_t *err)
{
  _cleanup_json_ json_t *manifest = json_new (JSON_OBJECT);
  _cleanup_free_ char *ctext = NULL, *cdigest = NULL, *mtext = NULL, *tmp = NULL, *tag = NULL;
  _cleanup_close_ int dfd = -1, tmpfd = -1, blob = -1;
  struct esbx_remote_desc d = { 0 };
  char hex[ESBX_SHA256_HEX_LEN + 1];
  esbx_error_t ignored = NULL;
  json_t *layers, *annot;
  size_t clen, mlen;
  int ret = -1;

  dfd = esbx_open_dir_at (store->rootfd, diff, err);
  if (dfd < 0 || (ctext = config_text (rec, dfd, &clen, err)) == NULL)
    return -1;
  tmpfd = esbx_store_tmpdir (store, "snapshot-push", &tmp, err);
  if (tmpfd < 0)
    return -1;
  blob = esbx_remote_make_diff (reg, dfd, tmp, &d, err);
  if (blob < 0 || esbx_registry_push_blob_fd (reg, d.digest, blob, 0, err) < 0)
    goto out;
  esbx_sha256_buf (ctext, clen, hex);
  cdigest = xasprintf ("sha256:%s", hex);
  if (esbx_registry_push_blob (reg, cdigest, ctext, clen, 0, err) < 0)
    goto out;
  json_set_int (manifest, "schemaVersion", 2);
  json_set_string (manifest, "mediaType", ESBX_OCI_MANIFEST);
  json_set (manifest, "config", descriptor (ESBX_SNAPSHOT_TYPE, cdigest, (int64_t)clen));
  layers = json_new (JSON_ARRAY);
  json_append (layers, descriptor (d.gzip ? ESBX_OCI_LAYER_GZ : ESBX_OCI_LAYER, d.digest, d.size));
  json_set (manifest, "layers", layers);
  annot = json_new (JSON_OBJECT);
  json_set_string (annot, ESBX_ANNOT_SNAPSHOT, name);
  json_set (manifest, "annotations", annot);
  mtext = json_serialize (manifest, false, &mlen);
  tag = esbx_remote_snapshot_tag (name);
  if (esbx_registry_put_manifest (reg, tag, mtext, mlen, err) < 0)
    goto out;
  esbx_sha256_buf (mtext, mlen, hex);
  *digest = xasprintf ("sha256:%s", hex);
  ret = 0;

out:
  if (tmp && esbx_rm_rf_at (AT_FDCWD, tmp, &ignored) < 0)
    esbx_error_free (&ignored);
  free (d.digest);
  free (d.diff_id);
  return ret;
}

/* Make KEY VALUE whatever it was; a put between our read and our write is
   overwritten too (the last snapshot pushed wins).  */
static int
put (const struct esbx_remote *rm, const char *key, const char *value, esbx_error_t *err)
{
  int attempt;

  for (attempt = 0; attempt < 16; attempt++)
    {
      struct esbx_etcd_kv kv;
      int64_t revision;
      bool won = false;

      if (esbx_etcd_get (rm, key, &kv, err) < 0)
        return -1;
      revision = kv.mod_revision;
      esbx_etcd_kv_free (&kv);
      if (esbx_etcd_put_if (rm, key, value, revision, &won, err) < 0)
        return -1;
      if (won)
        return 0;
    }
  return esbx_make_error (err, EAGAIN, "etcd `%s`: key `%s` keeps changing", rm->etcd, key);
}

/* Push snapshot NAME of PROJECT unless etcd has it; DEPTH counts the
   parents under the one asked for.  */
static int
push_one (esbx_store_t *store, const struct esbx_remote *rm, struct esbx_registry *reg,
          const char *project, const char *name, int depth, esbx_error_t *err)
{
  _cleanup_json_ json_t *rec = esbx_snapshot_load_record (store, project, name, err);
  _cleanup_json_ json_t *value = json_new (JSON_OBJECT);
  _cleanup_free_ char *have = NULL, *digest = NULL, *diff = NULL, *key = NULL, *text = NULL;
  _cleanup_free_ char *dir = NULL;
  const char *parent, *mine;
  _cleanup_close_ int sfd = -1;
  bool won = false;
  size_t len;

  if (rec == NULL)
    return -1;
  if (depth > 64)
    return esbx_make_error (err, 0, "snapshot `%s`: chain of parents deeper than 64", name);
  parent = json_get_string (rec, "parent");
  mine = json_get_string (rec, "manifest");
  if (esbx_remote_snapshot_manifest (rm, project, name, &have, err) < 0)
    return -1;
  if (have)
    {
      /* Pushed before, from here or (pulled here since) from elsewhere.  */
      if (mine && strcmp (mine, have) == 0)
        return 0;
      if (depth > 0 || json_get_bool (rec, "pulled", false))
        return 0;
      return esbx_make_error_kind (err, ESBX_ERR_EXISTS, 0,
                                   "snapshot `%s`: etcd `%s` has another snapshot of that name",
                                   name, rm->etcd);
    }
  if (json_len (json_get (rec, "frozen")) > 0)
    return esbx_make_error (err, 0,
                            "snapshot `%s`: stacks frozen layers (taken before project `%s` was "
                            "shared): only a copy can be pushed",
                            name, project);
  if (parent && push_one (store, rm, reg, project, parent, depth + 1, err) < 0)
    return -1;
  dir = esbx_snapshot_rel (project, name);
  diff = xasprintf ("%s/diff", dir);
  if (push_artifact (store, reg, name, rec, diff, &digest, err) < 0)
    return esbx_error_wrap (err, "snapshot `%s`", name);
  json_set_string (value, "manifest", digest);
  json_set_string (value, "session", json_get_string (rec, "session"));
  json_set (value, "parent", parent ? json_new_string (parent) : json_new (JSON_NULL));
  json_set_string (value, "created", json_get_string (rec, "created"));
  text = json_serialize (value, false, &len);
  key = esbx_remote_snapshot_key (project, name);
  if (esbx_etcd_put_if (rm, key, text, 0, &won, err) < 0)
    return esbx_error_wrap (err, "snapshot `%s`", name);
  if (!won)
    return esbx_make_error_kind (err, ESBX_ERR_EXISTS, 0,
                                 "snapshot `%s`: another host pushed a snapshot of that name "
                                 "meanwhile",
                                 name);
  /* Known pushed here from now on.  */
  json_set_string (rec, "manifest", digest);
  free (text);
  text = json_serialize (rec, true, &len);
  sfd = esbx_open_dir_at (store->rootfd, dir, err);
  if (sfd < 0 || esbx_write_file_atomic_at (sfd, "record.json", text, len, 0644, err) < 0)
    return esbx_error_wrap (err, "snapshot `%s`", name);
  return 0;
}

int
esbx_snapshot_push (esbx_store_t *store, const char *name, char **manifest, esbx_error_t *err)
{
  struct esbx_remote rm = { 0 };
  struct esbx_registry reg = { 0 };
  _cleanup_free_ char *project = NULL, *key = NULL, *text = NULL;
  _cleanup_json_ json_t *rec = NULL, *last = json_new (JSON_OBJECT);
  const char *session;
  size_t len;
  int ret = -1;

  if (esbx_snapshot_find_project (store, name, &project, err) < 0)
    return esbx_error_wrap (err, "snapshot push");
  if (!esbx_project_is_shared (store, project))
    {
      esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                            "snapshot push `%s`: project `%s` is not shared (`esbx project push "
                            "%s` first)",
                            name, project, project);
      return -1;
    }
  if (esbx_remote_load (store, &rm, err) < 0 || esbx_registry_open (&rm, project, &reg, err) < 0
      || push_one (store, &rm, &reg, project, name, 0, err) < 0)
    goto out;
  rec = esbx_snapshot_load_record (store, project, name, err);
  if (rec == NULL)
    goto out;
  session = json_get_string (rec, "session");
  json_set_string (last, "snapshot", name);
  json_set_string (last, "manifest", json_get_string (rec, "manifest"));
  json_set_string (last, "created", json_get_string (rec, "created"));
  text = json_serialize (last, false, &len);
  if (session && esbx_name_valid (session))
    {
      key = esbx_remote_last_snapshot_key (project, session);
      if (put (&rm, key, text, err) < 0)
        goto out;
    }
  if (manifest)
    *manifest = xstrdup (json_get_string (rec, "manifest"));
  ret = 0;

out:
  esbx_registry_close (&reg);
  esbx_remote_free (&rm);
  if (ret < 0)
    esbx_error_wrap (err, "snapshot push `%s`", name);
  return ret;
}
