/* liblayerstore: the last head manifest of a shared project this store
 * saw (one it pushed or read), kept in projects/P/remote-manifest, so
 * that the next publish or sync from this host reads it here instead of
 * from the registry (docs/SCALE-OUT.md, "publish").  It is a cache: its
 * bytes are used only when their sha256 is the digest etcd names, so a
 * lost, torn or stale file costs one registry read, never a wrong head.  */
#include "remote.h"
#include "fs.h"
#include "hash.h"
#include "text.h"
#include "utils.h"

#include <fcntl.h>
#include <string.h>

#define CACHE_FILE "remote-manifest"

static int
project_dir (esbx_store_t *store, const char *project)
{
  _cleanup_free_ char *dir = esbx_project_rel (project);

  return esbx_open_dir_at (store->rootfd, dir, NULL);
}

void
esbx_remote_manifest_keep (esbx_store_t *store, const char *project, const char *body, size_t len)
{
  _cleanup_close_ int dfd = project_dir (store, project);
  esbx_error_t ignored = NULL;

  if (dfd >= 0 && esbx_replace_file_at (dfd, CACHE_FILE, body, len, 0644, &ignored) < 0)
    esbx_error_free (&ignored);
}

/* The kept manifest when it is DIGEST's, parsed; NULL otherwise.  */
static json_t *
cached (esbx_store_t *store, const char *project, const char *digest)
{
  _cleanup_close_ int dfd = project_dir (store, project);
  _cleanup_free_ char *body = NULL;
  char hex[ESBX_SHA256_HEX_LEN + 1];
  esbx_error_t ignored = NULL;
  json_t *j = NULL;
  size_t len;

  if (dfd < 0 || !esbx_has_prefix (digest, "sha256:"))
    return NULL;
  if (esbx_read_file_at (dfd, CACHE_FILE, ESBX_HTTP_BODY_MAX, &body, &len, &ignored) == 0)
    {
      esbx_sha256_buf (body, len, hex);
      if (strcmp (digest + 7, hex) == 0)
        j = json_parse (body, len, &ignored);
    }
  esbx_error_free (&ignored);
  return j;
}

int
esbx_remote_get_manifest (esbx_store_t *store, struct esbx_registry *reg, const char *project,
                          const char *digest, json_t **out, esbx_error_t *err)
{
  _cleanup_free_ char *body = NULL;
  size_t len;

  *out = cached (store, project, digest);
  if (*out)
    return 0;
  if (esbx_registry_get_manifest_body (reg, digest, out, &body, &len, err) < 0)
    return -1;
  esbx_remote_manifest_keep (store, project, body, len);
  return 0;
}
