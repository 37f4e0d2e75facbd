/* liblayerstore: pushing layers, configs and manifests, and `project push`,
 * which shares a local project (docs/SCALE-OUT.md, "push P").  */
#include "remote.h"
#include "fs.h"
#include "hash.h"
#include "text.h"
#include "utils.h"

#include <fcntl.h>
#include <string.h>
#include <sys/utsname.h>

static const char *
oci_arch (void)
{
  struct utsname u;

  if (uname (&u) == 0 && strcmp (u.machine, "aarch64") == 0)
    return "arm64";
  return "amd64";
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

void
esbx_remote_manifest_free (struct esbx_remote_manifest *m)
{
  free (m->body);
  free (m->digest);
  memset (m, 0, sizeof *m);
}

int
esbx_remote_push_config (struct esbx_registry *reg, struct esbx_remote_desc *d, size_t n,
                         const char *record, size_t len, unsigned flags,
                         struct esbx_remote_manifest *m, esbx_error_t *err)
{
  _cleanup_json_ json_t *config = json_new (JSON_OBJECT);
  _cleanup_json_ json_t *manifest = json_new (JSON_OBJECT);
  _cleanup_free_ char *ctext = NULL, *rtext = xstrndup (record, len);
  json_t *rootfs = json_new (JSON_OBJECT), *diff_ids = json_new (JSON_ARRAY);
  json_t *history = json_new (JSON_ARRAY), *layers = json_new (JSON_ARRAY);
  char hex[ESBX_SHA256_HEX_LEN + 1];
  size_t i, clen;

  memset (m, 0, sizeof *m);
  for (i = 0; i < n; i++)
    {
      json_t *h = json_new (JSON_OBJECT);
      _cleanup_free_ char *by = xasprintf ("esbx layer %s", d[i].id);

      json_append (diff_ids, json_new_string (d[i].diff_id));
      json_set_string (h, "created_by", by);
      json_append (history, h);
    }
  json_set_string (config, "architecture", oci_arch ());
  json_set_string (config, "os", "linux");
  json_set (config, "config", json_new (JSON_OBJECT));
  json_set_string (rootfs, "type", "layers");
  json_set (rootfs, "diff_ids", diff_ids);
  json_set (config, "rootfs", rootfs);
  json_set (config, "history", history);
  /* The top layer's record, byte for byte: image tools ignore the member,
     and the manifest tagged with the layer's id keeps the config (and so
     the record) for the registry's garbage collector.  */
  json_set_string (config, ESBX_CONFIG_RECORD, rtext);
  ctext = json_serialize (config, false, &clen);
  esbx_sha256_buf (ctext, clen, hex);
  free (d[n - 1].record);
  d[n - 1].record = xasprintf ("sha256:%s", hex);
  d[n - 1].record_in_config = true;
  for (i = 0; i < n; i++)
    {
      json_t *l, *annot = json_new (JSON_OBJECT);

      l = descriptor (d[i].gzip ? ESBX_OCI_LAYER_GZ : ESBX_OCI_LAYER, d[i].digest, d[i].size);
      json_set_string (annot, ESBX_ANNOT_LAYER, d[i].id);
      json_set_string (annot, d[i].record_in_config ? ESBX_ANNOT_RECORD_CONFIG : ESBX_ANNOT_RECORD,
                       d[i].record);
      /* Readers of the manifest alone (the next publish) need it for the
         config; image tools read the config's diff_ids.  */
      if (d[i].gzip)
        json_set_string (annot, ESBX_ANNOT_DIFF_ID, d[i].diff_id);
      json_set (l, "annotations", annot);
      json_append (layers, l);
    }
  json_set_int (manifest, "schemaVersion", 2);
  json_set_string (manifest, "mediaType", ESBX_OCI_MANIFEST);
  json_set (manifest, "config", descriptor (ESBX_OCI_CONFIG, d[n - 1].record, (int64_t)clen));
  json_set (manifest, "layers", layers);
  m->body = json_serialize (manifest, false, &m->len);
  esbx_sha256_buf (m->body, m->len, hex);
  m->digest = xasprintf ("sha256:%s", hex);
  if (esbx_registry_push_blob (reg, d[n - 1].record, ctext, clen, flags, err) < 0)
    {
      esbx_remote_manifest_free (m);
      return -1;
    }
  return 0;
}

int
esbx_remote_config_record (const char *config, size_t clen, char **text, size_t *len,
                           esbx_error_t *err)
{
  _cleanup_json_ json_t *j = json_parse (config, clen, err);
  const char *record;

  *text = NULL;
  if (j == NULL)
    return esbx_error_wrap (err, "config");
  record = json_get_string (j, ESBX_CONFIG_RECORD);
  if (record == NULL)
    return esbx_make_error (err, 0, "config: no `%s` string", ESBX_CONFIG_RECORD);
  *text = xstrdup (record);
  *len = strlen (record);
  return 0;
}

int
esbx_remote_push_manifest (struct esbx_registry *reg, struct esbx_remote_desc *d, size_t n,
                           const char *record, size_t len, const char *tag,
                           struct esbx_remote_manifest *m, esbx_error_t *err)
{
  if (esbx_remote_push_config (reg, d, n, record, len, 0, m, err) < 0)
    return -1;
  if (esbx_registry_put_manifest (reg, tag, m->body, m->len, err) < 0)
    {
      esbx_remote_manifest_free (m);
      return -1;
    }
  return 0;
}

int
esbx_remote_make_diff (const struct esbx_registry *reg, int diffd, const char *tmp,
                       struct esbx_remote_desc *d, esbx_error_t *err)
{
  _cleanup_free_ char *tar = xasprintf ("%s/layer.tar", tmp);
  _cleanup_free_ char *gz = xasprintf ("%s/layer.tar.gz", tmp);
  _cleanup_close_ int fd = -1;
  _cleanup_close_ int gzfd = -1;
  char hex[ESBX_SHA256_HEX_LEN + 1];
  off_t size;

  fd = TEMP_FAILURE_RETRY (open (tar, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (fd < 0)
    return esbx_make_error (err, errno, "create `%s`", tar);
  if (esbx_export_diff_oci (diffd, fd, err) < 0)
    return esbx_error_wrap (err, "layer tar");
  if (lseek (fd, 0, SEEK_SET) < 0 || esbx_sha256_fd (fd, hex, &size, err) < 0)
    return esbx_error_wrap (err, "layer tar");
  free (d->diff_id);
  d->diff_id = xasprintf ("sha256:%s", hex);
  d->gzip = reg->gzip;
  if (d->gzip)
    {
      /* OCI: the descriptor's digest is over the compressed bytes.  */
      gzfd = TEMP_FAILURE_RETRY (open (gz, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
      if (gzfd < 0)
        return esbx_make_error (err, errno, "create `%s`", gz);
      if (esbx_gzip_fd (fd, gzfd, err) < 0 || lseek (gzfd, 0, SEEK_SET) < 0
          || esbx_sha256_fd (gzfd, hex, &size, err) < 0)
        return esbx_error_wrap (err, "layer tar.gz");
      close (fd);
      fd = take_fd (&gzfd);
    }
  free (d->digest);
  d->digest = xasprintf ("sha256:%s", hex);
  d->size = (int64_t)size;
  return take_fd (&fd);
}

int
esbx_remote_push_diff (struct esbx_registry *reg, int diffd, const char *tmp,
                       struct esbx_remote_desc *d, unsigned flags, esbx_error_t *err)
{
  _cleanup_close_ int fd = esbx_remote_make_diff (reg, diffd, tmp, d, err);

  if (fd < 0)
    return -1;
  return esbx_registry_push_blob_fd (reg, d->digest, fd, flags, err);
}

/* Push layer ID of PROJECT, the top of D[0..N): its blob, then the
   config carrying its record and the manifest of the stack up to it,
   tagged ID, into *TOP.  */
static int
push_layer (esbx_store_t *store, struct esbx_registry *reg, const char *project, const char *id,
            const char *tmp, struct esbx_remote_desc *d, size_t n, struct esbx_remote_manifest *top,
            esbx_error_t *err)
{
  _cleanup_free_ char *diff = esbx_layer_file (project, id, "diff");
  _cleanup_free_ char *rec = esbx_layer_file (project, id, "record.json");
  _cleanup_free_ char *text = NULL;
  _cleanup_close_ int diffd = -1;
  size_t len;

  d[n - 1].id = xstrdup (id);
  diffd = esbx_open_dir_at (store->rootfd, diff, err);
  if (diffd < 0 || esbx_remote_push_diff (reg, diffd, tmp, &d[n - 1], 0, err) < 0)
    return -1;
  if (esbx_read_file_at (store->rootfd, rec, JSON_MAX_DOCUMENT, &text, &len, err) < 0)
    return -1;
  return esbx_remote_push_manifest (reg, d, n, text, len, id, top, err);
}

int
esbx_project_push (esbx_store_t *store, const char *project, esbx_error_t *err)
{
  struct esbx_remote rm = { 0 };
  struct esbx_registry reg = { 0 };
  struct esbx_remote_head h = { 0 };
  struct esbx_remote_desc *d = NULL;
  _cleanup_strv_ char **ids = NULL;
  _cleanup_free_ char *tmp = NULL, *key = NULL, *value = NULL;
  struct esbx_remote_manifest top = { 0 };
  _cleanup_close_ int lock = -1;
  _cleanup_close_ int tmpfd = -1;
  esbx_error_t ignored = NULL;
  size_t n = 0, i, pushed = 0;
  bool won = false, same;
  int ret = -1;

  if (esbx_check_name ("project", project, err) < 0)
    return -1;
  if (!esbx_project_exists (store, project))
    return esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0, "project push `%s`: no such project",
                                 project);
  /* Another host would pull its layers without the project's git record,
     and could not publish: its commits would have to be made inside the
     remote's transaction (docs/GIT.md, "Not yet").  */
  if (esbx_project_is_git (store, project))
    return esbx_make_error (err, 0,
                            "project push `%s`: a git project cannot be shared through a "
                            "registry yet",
                            project);
  if (esbx_remote_load (store, &rm, err) < 0 || esbx_registry_open (&rm, project, &reg, err) < 0)
    goto out;
  lock = esbx_project_lock (store, project, err);
  if (lock < 0 || esbx_project_stack (store, project, &ids, &n, err) < 0)
    goto out;
  if (esbx_remote_head_read (&rm, project, &h, err) < 0)
    goto out;
  if (h.exists)
    {
      same = h.n == n;
      for (i = 0; same && i < n; i++)
        same = strcmp (h.ids[i], ids[i]) == 0;
      if (!same)
        {
          esbx_make_error_kind (err, ESBX_ERR_EXISTS, 0,
                                "etcd `%s` has another head for it (%zu layers): pull it on a "
                                "store without this project",
                                rm.etcd, h.n);
          goto out;
        }
      ret = esbx_remote_mark_shared (store, project, err);
      goto out;
    }
  tmpfd = esbx_store_tmpdir (store, "push", &tmp, err);
  if (tmpfd < 0)
    goto out;
  d = xmalloc0 (n * sizeof *d);
  for (i = 0; i < n; i++)
    {
      esbx_remote_manifest_free (&top);
      pushed = i + 1;
      if (push_layer (store, &reg, project, ids[i], tmp, d, i + 1, &top, err) < 0)
        goto out;
    }
  key = esbx_remote_head_key (project);
  value = esbx_remote_head_value (ids, n, top.digest);
  if (esbx_etcd_put_if (&rm, key, value, 0, &won, err) < 0)
    goto out;
  if (!won)
    {
      esbx_make_error_kind (err, ESBX_ERR_CONFLICT, 0,
                            "another store pushed a project of that name meanwhile");
      goto out;
    }
  if (esbx_registry_put_manifest (&reg, "head", top.body, top.len, &ignored) < 0)
    esbx_error_free (&ignored);
  ret = esbx_remote_mark_shared (store, project, err);

out:
  if (tmp && esbx_rm_rf_at (AT_FDCWD, tmp, &ignored) < 0)
    esbx_error_free (&ignored);
  esbx_remote_manifest_free (&top);
  esbx_remote_descs_free (d, pushed);
  esbx_remote_head_free (&h);
  esbx_registry_close (&reg);
  esbx_remote_free (&rm);
  if (ret < 0)
    esbx_error_wrap (err, "project push `%s`", project);
  return ret;
}
