/* liblayerstore: a store's remote (ROOT/remote.json), the shared marker of
 * a project, its head in etcd and the manifests that describe it (sync.c
 * brings the local stack up to that head).  */
#include "remote.h"
#include "fs.h"
#include "hash.h"
#include "path.h"
#include "text.h"
#include "utils.h"

#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>

#define REMOTE_FILE "remote.json"

static pthread_mutex_t override_lock = PTHREAD_MUTEX_INITIALIZER;
static char *override_registry, *override_etcd;

void
esbx_remote_override (const char *registry, const char *etcd)
{
  pthread_mutex_lock (&override_lock);
  free (override_registry);
  free (override_etcd);
  override_registry = registry ? xstrdup (registry) : NULL;
  override_etcd = etcd ? xstrdup (etcd) : NULL;
  while (override_etcd && override_etcd[0] && override_etcd[strlen (override_etcd) - 1] == '/')
    override_etcd[strlen (override_etcd) - 1] = '\0';
  pthread_mutex_unlock (&override_lock);
}

/* *URL becomes OVERRIDE when there is one.  */
static void
apply_override (char **url, const char *override)
{
  if (override == NULL)
    return;
  free (*url);
  *url = xstrdup (override);
}

void
esbx_remote_free (struct esbx_remote *rm)
{
  free (rm->registry);
  free (rm->etcd);
  free (rm->ca);
  free (rm->cert);
  free (rm->key);
  free (rm->token_file);
  free (rm->credentials);
  free (rm->credentials_error);
  memset (rm, 0, sizeof *rm);
}

int
esbx_remote_check_url (const char *what, const char *url, esbx_error_t *err)
{
  if (url == NULL || (!esbx_has_prefix (url, "http://") && !esbx_has_prefix (url, "https://"))
      || strlen (url) > 1024 || strpbrk (url, " \t\r\n") != NULL)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "remote: %s `%s`: expected an http:// "
                                 "or https:// URL",
                                 what, url ? url : "");
  return 0;
}

/* FILE as an absolute path into J[KEY] when given; it must be readable.  */
static int
set_file (json_t *j, const char *key, const char *option, const char *file, esbx_error_t *err)
{
  _cleanup_free_ char *abs = NULL;

  if (file == NULL)
    return 0;
  abs = realpath (file, NULL);
  if (abs == NULL || access (abs, R_OK) < 0)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, errno, "remote: %s `%s`", option, file);
  json_set_string (j, key, abs);
  return 0;
}

int
esbx_remote_set (esbx_store_t *store, const struct esbx_remote_config *c, esbx_error_t *err)
{
  _cleanup_json_ json_t *j = json_new (JSON_OBJECT);
  _cleanup_free_ char *text = NULL;
  _cleanup_free_ char *etcd_trimmed = NULL;
  size_t len;

  if (esbx_remote_check_url ("--registry", c->registry, err) < 0
      || esbx_remote_check_url ("--etcd", c->etcd, err) < 0)
    return -1;
  if (c->compression && strcmp (c->compression, "gzip") != 0
      && strcmp (c->compression, "none") != 0)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "remote: --compression `%s`: expected gzip or none",
                                 c->compression);
  if ((c->cert == NULL) != (c->key == NULL))
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "remote: --cert and --key go together");
  etcd_trimmed = xstrdup (c->etcd);
  len = strlen (etcd_trimmed);
  while (len > 0 && etcd_trimmed[len - 1] == '/')
    etcd_trimmed[--len] = '\0';
  json_set_string (j, "registry", c->registry);
  json_set_string (j, "etcd", etcd_trimmed);
  json_set_string (j, "compression", c->compression ? c->compression : "gzip");
  if (set_file (j, "ca", "--ca", c->ca, err) < 0 || set_file (j, "cert", "--cert", c->cert, err) < 0
      || set_file (j, "key", "--key", c->key, err) < 0
      || set_file (j, "token_file", "--token-file", c->token_file, err) < 0)
    return -1;
  text = json_serialize (j, true, &len);
  return esbx_write_file_atomic_at (store->rootfd, REMOTE_FILE, text, len, 0644, err);
}

/* The token file's first line, read once for every registry handle of
   this remote (a publish opens six).  */
static void
read_credentials (struct esbx_remote *rm)
{
  _cleanup_free_ char *text = NULL;
  esbx_error_t e = NULL;
  size_t len;

  if (rm->token_file == NULL)
    return;
  if (esbx_read_file_at (AT_FDCWD, rm->token_file, 4096, &text, &len, &e) < 0)
    {
      rm->credentials_error = xasprintf ("token file: %s", e->msg);
      esbx_error_free (&e);
      return;
    }
  len = strcspn (text, "\r\n");
  if (len == 0)
    rm->credentials_error = xasprintf ("token file `%s` is empty", rm->token_file);
  else
    rm->credentials = xstrndup (text, len);
}

int
esbx_remote_load (esbx_store_t *store, struct esbx_remote *rm, esbx_error_t *err)
{
  _cleanup_json_ json_t *j = NULL;
  const char *env_reg = getenv ("ESBX_REGISTRY"), *env_etcd = getenv ("ESBX_ETCD");
  const char *compression;

  memset (rm, 0, sizeof *rm);
  if (esbx_exists_at (store->rootfd, REMOTE_FILE))
    {
      j = json_parse_file_at (store->rootfd, REMOTE_FILE, err);
      if (j == NULL)
        return esbx_error_wrap (err, "remote");
      rm->registry = xstrdup (json_get_string (j, "registry"));
      rm->etcd = xstrdup (json_get_string (j, "etcd"));
      rm->ca = xstrdup (json_get_string (j, "ca"));
      rm->cert = xstrdup (json_get_string (j, "cert"));
      rm->key = xstrdup (json_get_string (j, "key"));
      rm->token_file = xstrdup (json_get_string (j, "token_file"));
      compression = json_get_string (j, "compression");
      rm->uncompressed = compression && strcmp (compression, "none") == 0;
    }
  if (env_reg && env_reg[0])
    {
      free (rm->registry);
      rm->registry = xstrdup (env_reg);
    }
  if (env_etcd && env_etcd[0])
    {
      free (rm->etcd);
      rm->etcd = xstrdup (env_etcd);
    }
  pthread_mutex_lock (&override_lock);
  apply_override (&rm->registry, override_registry);
  apply_override (&rm->etcd, override_etcd);
  pthread_mutex_unlock (&override_lock);
  if (rm->registry == NULL || rm->etcd == NULL)
    {
      esbx_remote_free (rm);
      return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                   "no remote: run `esbx remote set --registry URL --etcd URL`");
    }
  if (esbx_remote_check_url ("registry", rm->registry, err) < 0
      || esbx_remote_check_url ("etcd", rm->etcd, err) < 0)
    {
      esbx_remote_free (rm);
      return -1;
    }
  rm->etcd_auth.ca = rm->ca;
  rm->etcd_auth.cert = rm->cert;
  rm->etcd_auth.key = rm->key;
  read_credentials (rm);
  return 0;
}

json_t *
esbx_remote_show (esbx_store_t *store, esbx_error_t *err)
{
  struct esbx_remote rm;
  json_t *j;

  if (esbx_remote_load (store, &rm, err) < 0)
    return NULL;
  j = json_new (JSON_OBJECT);
  json_set_string (j, "registry", rm.registry);
  json_set_string (j, "etcd", rm.etcd);
  if (rm.ca)
    json_set_string (j, "ca", rm.ca);
  if (rm.cert)
    json_set_string (j, "cert", rm.cert);
  if (rm.key)
    json_set_string (j, "key", rm.key);
  if (rm.token_file)
    json_set_string (j, "token_file", rm.token_file);
  json_set_string (j, "compression", rm.uncompressed ? "none" : "gzip");
  esbx_remote_free (&rm);
  return j;
}

bool
esbx_project_is_shared (esbx_store_t *store, const char *project)
{
  _cleanup_free_ char *path = NULL;

  if (!esbx_name_valid (project))
    return false;
  path = esbx_project_file (project, "remote");
  return esbx_exists_at (store->rootfd, path);
}

int
esbx_remote_mark_shared (esbx_store_t *store, const char *project, esbx_error_t *err)
{
  _cleanup_free_ char *dir = esbx_project_rel (project);
  _cleanup_close_ int dfd = esbx_open_dir_at (store->rootfd, dir, err);

  if (dfd < 0)
    return -1;
  return esbx_write_file_atomic_at (dfd, "remote", "", 0, 0644, err);
}

char *
esbx_remote_head_key (const char *project)
{
  return xasprintf ("esbx/projects/%s/head", project);
}

char *
esbx_remote_snapshot_key (const char *project, const char *name)
{
  return xasprintf ("esbx/projects/%s/snapshots/%s", project, name);
}

char *
esbx_remote_last_snapshot_key (const char *project, const char *session)
{
  return xasprintf ("esbx/projects/%s/sessions/%s/snapshot", project, session);
}

char *
esbx_remote_snapshot_tag (const char *name)
{
  char hex[ESBX_SHA256_HEX_LEN + 1];

  /* A tag is at most 128 characters, and the prefix keeps snapshot names
     apart from layer ids and `head`.  */
  if (strlen (name) <= 128 - strlen (ESBX_SNAPSHOT_TAG_PREFIX))
    return xasprintf ("%s%s", ESBX_SNAPSHOT_TAG_PREFIX, name);
  esbx_sha256_buf (name, strlen (name), hex);
  return xasprintf ("%s%.64s", ESBX_SNAPSHOT_TAG_PREFIX, hex);
}

void
esbx_remote_head_free (struct esbx_remote_head *h)
{
  cleanup_strvp (&h->ids);
  free (h->manifest);
  memset (h, 0, sizeof *h);
}

int
esbx_remote_head_read (const struct esbx_remote *rm, const char *project,
                       struct esbx_remote_head *h, esbx_error_t *err)
{
  _cleanup_free_ char *key = esbx_remote_head_key (project);
  _cleanup_json_ json_t *j = NULL;
  struct esbx_etcd_kv kv;
  struct strv ids = { 0 };
  const json_t *layers, *v;
  const char *manifest;
  size_t i;

  memset (h, 0, sizeof *h);
  if (esbx_etcd_get (rm, key, &kv, err) < 0)
    return -1;
  h->mod_revision = kv.mod_revision;
  if (kv.value == NULL)
    return 0;
  j = json_parse (kv.value, kv.len, err);
  esbx_etcd_kv_free (&kv);
  if (j == NULL)
    return esbx_error_wrap (err, "etcd `%s`: key `%s`", rm->etcd, key);
  layers = json_get (j, "layers");
  manifest = json_get_string (j, "manifest");
  if (layers == NULL || layers->type != JSON_ARRAY || json_len (layers) == 0 || manifest == NULL)
    return esbx_make_error (err, 0, "etcd `%s`: key `%s`: not a head", rm->etcd, key);
  /* It goes into the manifest's URL: nothing but a digest (what every
     head esbx writes names).  */
  if (!esbx_registry_digest_valid (manifest))
    return esbx_make_error (err, 0, "etcd `%s`: key `%s`: its manifest is not a sha256 digest",
                            rm->etcd, key);
  json_array_foreach (layers, i, v)
    {
      if (v->type != JSON_STRING || !esbx_name_valid (v->text))
        {
          strv_free (&ids);
          return esbx_make_error (err, 0, "etcd `%s`: key `%s`: bad layer id", rm->etcd, key);
        }
      strv_push (&ids, xstrdup (v->text));
    }
  h->ids = ids.v;
  h->n = ids.n;
  h->manifest = xstrdup (manifest);
  h->exists = true;
  return 0;
}

char *
esbx_remote_head_value (char *const *ids, size_t n, const char *manifest)
{
  _cleanup_json_ json_t *j = json_new (JSON_OBJECT);
  json_t *arr = json_new (JSON_ARRAY);
  size_t i, len;

  for (i = 0; i < n; i++)
    json_append (arr, json_new_string (ids[i]));
  json_set (j, "layers", arr);
  json_set_string (j, "manifest", manifest);
  return json_serialize (j, false, &len);
}

/* ---- fetching layers ---------------------------------------------------- */

void
esbx_remote_descs_free (struct esbx_remote_desc *d, size_t n)
{
  size_t i;

  for (i = 0; i < n; i++)
    {
      free (d[i].id);
      free (d[i].digest);
      free (d[i].diff_id);
      free (d[i].record);
    }
  free (d);
}

int
esbx_remote_descs_parse (const json_t *manifest, struct esbx_remote_desc **out, size_t *n,
                         esbx_error_t *err)
{
  const json_t *layers = json_get (manifest, "layers"), *l;
  struct esbx_remote_desc *d;
  size_t i;

  if (layers == NULL || layers->type != JSON_ARRAY)
    return esbx_make_error (err, 0, "manifest without layers");
  d = xmalloc0 ((json_len (layers) + 1) * sizeof *d);
  json_array_foreach (layers, i, l)
    {
      const json_t *annot = json_get (l, "annotations");
      const char *id = json_get_string (annot, ESBX_ANNOT_LAYER);
      const char *in_config = json_get_string (annot, ESBX_ANNOT_RECORD_CONFIG);
      const char *own = json_get_string (annot, ESBX_ANNOT_RECORD);
      const char *record = in_config ? in_config : own;
      const char *digest = json_get_string (l, "digest");
      const char *media = json_get_string (l, "mediaType");
      const char *diff_id = json_get_string (annot, ESBX_ANNOT_DIFF_ID);

      /* The digests go into blob URLs, the id into paths of the store.  */
      if (!esbx_name_valid (id) || !json_get_int (l, "size", &d[i].size)
          || !esbx_registry_digest_valid (digest) || !esbx_registry_digest_valid (record)
          || (in_config && own) || (diff_id && !esbx_registry_digest_valid (diff_id)))
        {
          esbx_remote_descs_free (d, i);
          return esbx_make_error (err, 0, "manifest: layer %zu is not an esbx layer", i);
        }
      d[i].gzip = media && strcmp (media, ESBX_OCI_LAYER_GZ) == 0;
      if (media == NULL || (!d[i].gzip && strcmp (media, ESBX_OCI_LAYER) != 0)
          || (d[i].gzip && diff_id == NULL))
        {
          esbx_remote_descs_free (d, i);
          return esbx_make_error (err, 0, "manifest: layer %zu: media type `%s` is not %s or %s", i,
                                  media ? media : "", ESBX_OCI_LAYER, ESBX_OCI_LAYER_GZ);
        }
      d[i].id = xstrdup (id);
      d[i].digest = xstrdup (digest);
      d[i].diff_id = xstrdup (d[i].gzip ? diff_id : digest);
      d[i].record = xstrdup (record);
      d[i].record_in_config = in_config != NULL;
    }
  *out = d;
  *n = json_len (layers);
  return 0;
}

int
esbx_remote_snapshot_manifest (const struct esbx_remote *rm, const char *project, const char *name,
                               char **manifest, esbx_error_t *err)
{
  _cleanup_free_ char *key = esbx_remote_snapshot_key (project, name);
  _cleanup_json_ json_t *j = NULL;
  struct esbx_etcd_kv kv;
  const char *m;

  *manifest = NULL;
  if (esbx_etcd_get (rm, key, &kv, err) < 0)
    return -1;
  if (kv.value == NULL)
    return 0;
  j = json_parse (kv.value, kv.len, err);
  esbx_etcd_kv_free (&kv);
  if (j == NULL)
    return esbx_error_wrap (err, "etcd `%s`: key `%s`", rm->etcd, key);
  m = json_get_string (j, "manifest");
  if (!esbx_registry_digest_valid (m))
    return esbx_make_error (err, 0, "etcd `%s`: key `%s`: no manifest digest", rm->etcd, key);
  *manifest = xstrdup (m);
  return 0;
}
