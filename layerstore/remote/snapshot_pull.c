/* liblayerstore: fetching a snapshot that another host pushed
 * (snapshot_push.c; docs/SCALE-OUT.md, "Sessions that outlive their
 * host").  etcd names its manifest; the manifest (verified against that
 * digest) names the config and the diff blob, both verified against their
 * digests as they arrive.  The diff is unpacked by the confined importer
 * into a locked temp dir under projects/P/tmp, the overlay whiteouts and
 * opaque directories are made again from the config's lists (each path
 * resolved beneath the diff), and the snapshot is renamed into
 * projects/P/snapshots/NAME after a syncfs: a kill leaves a temp dir for
 * gc, never half a snapshot.  Its parents come first, and its base layer
 * with a sync of the project.  */
#include "remote.h"
#include "fs.h"
#include "path.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

#define MAX_DEPTH 64

static int
whiteout (int diffd, const char *rel, esbx_error_t *err)
{
  _cleanup_free_ char *base = NULL;
  _cleanup_close_ int pfd = esbx_open_parent_beneath (diffd, rel, &base, err);

  if (pfd < 0)
    return esbx_error_wrap (err, "whiteout `/%s`", rel);
  if (mknodat (pfd, base, S_IFCHR, makedev (0, 0)) < 0)
    return esbx_make_error (err, errno, "whiteout `/%s`", rel);
  return 0;
}

static int
opaque (int diffd, const char *rel, esbx_error_t *err)
{
  _cleanup_close_ int fd = rel[0] ? esbx_open_beneath (diffd, rel, O_RDONLY | O_DIRECTORY, 0, err)
                                  : fcntl (diffd, F_DUPFD_CLOEXEC, 3);

  if (fd < 0)
    return rel[0] ? esbx_error_wrap (err, "opaque `/%s`", rel)
                  : esbx_make_error (err, errno, "dup");
  if (fsetxattr (fd, "trusted.overlay.opaque", "y", 1, 0) < 0)
    return esbx_make_error (err, errno, "mark `/%s` opaque", rel);
  return 0;
}

static const char *
string_of (const json_t *v)
{
  return v && v->type == JSON_STRING ? v->text : NULL;
}

/* The markers the config C lists, made in DIFFD.  */
static int
markers (int diffd, const json_t *c, esbx_error_t *err)
{
  const json_t *v;
  size_t i;

  json_array_foreach (json_get (c, "whiteouts"), i, v)
    {
      const char *rel = string_of (v);
      if (rel == NULL || rel[0] == '\0' || whiteout (diffd, rel, err) < 0)
        return rel ? -1 : esbx_make_error (err, 0, "a whiteout that is not a path");
    }
  json_array_foreach (json_get (c, "opaque"), i, v)
    {
      const char *rel = string_of (v);
      if (rel == NULL || opaque (diffd, rel, err) < 0)
        return rel ? -1 : esbx_make_error (err, 0, "an opaque directory that is not a path");
    }
  return 0;
}

/* The manifest DIGEST of snapshot NAME parsed: the config's digest and
   size, the diff blob's descriptor.  */
static int
parse_manifest (const json_t *m, const char *name, const char **config, int64_t *csize,
                const json_t **layer, esbx_error_t *err)
{
  const json_t *c = json_get (m, "config"), *layers = json_get (m, "layers");
  const char *type = json_get_string (c, "mediaType"), *ltype;

  *config = json_get_string (c, "digest");
  *layer = json_at (layers, 0);
  ltype = json_get_string (*layer, "mediaType");
  if (type == NULL || strcmp (type, ESBX_SNAPSHOT_TYPE) != 0
      || !esbx_registry_digest_valid (*config) || !json_get_int (c, "size", csize) || *csize <= 0
      || json_len (layers) != 1 || !esbx_registry_digest_valid (json_get_string (*layer, "digest"))
      || ltype == NULL
      || (strcmp (ltype, ESBX_OCI_LAYER) != 0 && strcmp (ltype, ESBX_OCI_LAYER_GZ) != 0))
    return esbx_make_error (err, 0, "snapshot `%s`: its manifest is not a snapshot's", name);
  return 0;
}

/* The config C of snapshot NAME of PROJECT fits: its record names them,
   a base and a parent that are names.  */
static const json_t *
check_record (const json_t *c, const char *project, const char *name, esbx_error_t *err)
{
  const json_t *rec = json_get (c, "record");
  const char *n = json_get_string (rec, "name"), *p = json_get_string (rec, "project");
  const char *parent = json_get_string (rec, "parent");
  const json_t *pv = json_get (rec, "parent");

  if (n == NULL || strcmp (n, name) != 0 || p == NULL || strcmp (p, project) != 0
      || !esbx_name_valid (json_get_string (rec, "base"))
      || (pv && pv->type != JSON_NULL && !esbx_name_valid (parent))
      || (parent && strcmp (parent, name) == 0))
    return esbx_make_error (err, 0, "snapshot `%s`: its record does not fit", name), NULL;
  return rec;
}

/* Whether layer BASE of PROJECT is here, after a sync if it was not.  */
static int
have_base (esbx_store_t *store, const char *project, const char *base, esbx_error_t *err)
{
  _cleanup_free_ char *rel = esbx_layer_rel (project, base);

  if (esbx_exists_at (store->rootfd, rel))
    return 0;
  if (esbx_remote_sync (store, project, NULL, err) < 0)
    return -1;
  if (!esbx_exists_at (store->rootfd, rel))
    return esbx_make_error (err, 0, "its base layer `%s` is not in the project's history", base);
  return 0;
}

/* The diff blob BLOB unpacked into TMP/diff with its markers, the record
   REC (with MANIFEST) in TMP/record.json, all of it durable.  */
static int
unpack (esbx_store_t *store, int tfd, const char *tmp, const char *blob, const json_t *c,
        const json_t *rec, const char *manifest, esbx_error_t *err)
{
  _cleanup_json_ json_t *r = json_copy (rec);
  _cleanup_free_ char *text = NULL;
  _cleanup_close_ int diffd = -1;
  size_t len;

  (void)store;
  if (mkdirat (tfd, "diff", 0755) < 0)
    return esbx_make_error (err, errno, "mkdir `%s/diff`", tmp);
  diffd = esbx_open_dir_at (tfd, "diff", err);
  if (diffd < 0 || esbx_import_tree_flags (blob, diffd, ESBX_IMPORT_IMAGE_LAYER, err) < 0
      || markers (diffd, c, err) < 0)
    return -1;
  json_set_string (r, "manifest", manifest);
  json_set (r, "pulled", json_new_bool (true));
  text = json_serialize (r, true, &len);
  if (esbx_write_file_atomic_at (tfd, "record.json", text, len, 0644, err) < 0)
    return -1;
  return esbx_layer_sync (tfd, err);
}

static int
pull_one (esbx_store_t *store, const struct esbx_remote *rm, struct esbx_registry *reg,
          const char *project, const char *name, int depth, esbx_error_t *err)
{
  _cleanup_free_ char *dir = esbx_snapshot_rel (project, name);
  _cleanup_free_ char *rel = xasprintf ("%s/record.json", dir);
  _cleanup_free_ char *digest = NULL, *tmp = NULL, *blob = NULL, *hex = esbx_random_hex (8);
  _cleanup_free_ char *snaps = esbx_project_file (project, "snapshots");
  _cleanup_json_ json_t *m = NULL, *c = NULL;
  struct esbx_registry_blob b[2] = { { 0 } };
  _cleanup_close_ int tfd = -1;
  const json_t *layer, *rec;
  const char *config, *parent;
  esbx_error_t ignored = NULL;
  int64_t csize, lsize = 0;
  int ret = -1;

  b[0].fd = b[1].fd = -1;
  if (esbx_exists_at (store->rootfd, rel))
    return 0;
  if (depth > MAX_DEPTH)
    return esbx_make_error (err, 0, "snapshot `%s`: chain of parents deeper than %d", name,
                            MAX_DEPTH);
  if (esbx_remote_snapshot_manifest (rm, project, name, &digest, err) < 0)
    return esbx_error_wrap (err, "snapshot `%s`", name);
  if (digest == NULL)
    return esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0,
                                 "snapshot `%s` is neither here nor in etcd `%s`", name, rm->etcd);
  if (esbx_registry_get_manifest (reg, digest, &m, err) < 0
      || parse_manifest (m, name, &config, &csize, &layer, err) < 0)
    return esbx_error_wrap (err, "snapshot `%s`", name);
  tmp = esbx_project_file (project, "tmp/snapshot-pull-%s", hex);
  tfd = esbx_mkdir_locked (store, tmp, err);
  if (tfd < 0)
    goto out;
  blob = xasprintf ("%s/%s/diff.blob", store->root, tmp);
  json_get_int (layer, "size", &lsize);
  b[0].digest = config;
  b[0].size = (uint64_t)csize;
  b[1].digest = json_get_string (layer, "digest");
  b[1].size = lsize > 0 ? (uint64_t)lsize : 0;
  b[1].fd
      = TEMP_FAILURE_RETRY (openat (tfd, "diff.blob", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (b[1].fd < 0)
    {
      esbx_make_error (err, errno, "create `%s`", blob);
      goto out;
    }
  if (esbx_registry_get_blobs (reg, b, 2, err) < 0)
    goto out;
  c = json_parse_limit (b[0].buf, b[0].len, JSON_MAX_DOCUMENT, err);
  if (c == NULL || (rec = check_record (c, project, name, err)) == NULL)
    goto out;
  parent = json_get_string (rec, "parent");
  if ((parent && pull_one (store, rm, reg, project, parent, depth + 1, err) < 0)
      || have_base (store, project, json_get_string (rec, "base"), err) < 0)
    goto out;
  close (b[1].fd);
  b[1].fd = -1;
  if (unpack (store, tfd, tmp, blob, c, rec, digest, err) < 0)
    goto out;
  unlinkat (tfd, "diff.blob", 0);
  if (mkdirat (store->rootfd, snaps, 0755) < 0 && errno != EEXIST)
    {
      esbx_make_error (err, errno, "mkdir `%s`", snaps);
      goto out;
    }
  if (renameat2 (store->rootfd, tmp, store->rootfd, dir, RENAME_NOREPLACE) < 0)
    {
      /* Another create pulled it meanwhile.  */
      if (errno != EEXIST || !esbx_exists_at (store->rootfd, rel))
        {
          esbx_make_error (err, errno, "install `%s`", dir);
          goto out;
        }
    }
  else
    {
      free (tmp);
      tmp = NULL;
    }
  if (esbx_fsync_at (store->rootfd, snaps, err) < 0)
    goto out;
  ret = 0;

out:
  free (b[0].buf);
  if (b[1].fd >= 0)
    close (b[1].fd);
  if (tmp && esbx_rm_rf_at (store->rootfd, tmp, &ignored) < 0)
    esbx_error_free (&ignored);
  if (ret < 0)
    esbx_error_wrap (err, "snapshot `%s`", name);
  return ret;
}

int
esbx_snapshot_pull (esbx_store_t *store, const char *project, const char *name, esbx_error_t *err)
{
  struct esbx_remote rm = { 0 };
  struct esbx_registry reg = { 0 };
  int ret = -1;

  _cleanup_free_ char *dir = NULL, *rel = NULL;

  if (esbx_check_name ("snapshot", name, err) < 0)
    return -1;
  dir = esbx_snapshot_rel (project, name);
  rel = xasprintf ("%s/record.json", dir);
  if (esbx_exists_at (store->rootfd, rel))
    return 0;
  if (esbx_remote_load (store, &rm, err) == 0 && esbx_registry_open (&rm, project, &reg, err) == 0)
    ret = pull_one (store, &rm, &reg, project, name, 0, err);
  esbx_registry_close (&reg);
  esbx_remote_free (&rm);
  return ret;
}

int
esbx_snapshot_last_pushed (esbx_store_t *store, const char *project, const char *session,
                           char **name, esbx_error_t *err)
{
  struct esbx_remote rm = { 0 };
  _cleanup_free_ char *key = NULL;
  _cleanup_json_ json_t *j = NULL;
  struct esbx_etcd_kv kv = { 0 };
  const char *snap;
  int ret = -1;

  *name = NULL;
  if (esbx_remote_load (store, &rm, err) < 0)
    return -1;
  key = esbx_remote_last_snapshot_key (project, session);
  if (esbx_etcd_get (&rm, key, &kv, err) < 0)
    goto out;
  ret = 0;
  if (kv.value == NULL)
    goto out;
  j = json_parse (kv.value, kv.len, err);
  snap = json_get_string (j, "snapshot");
  if (j == NULL || !esbx_name_valid (snap))
    {
      if (j)
        esbx_make_error (err, 0, "etcd `%s`: key `%s`: no snapshot name", rm.etcd, key);
      ret = -1;
      goto out;
    }
  *name = xstrdup (snap);

out:
  esbx_etcd_kv_free (&kv);
  esbx_remote_free (&rm);
  return ret;
}
