/* liblayerstore: a client of the OCI distribution API (blob HEAD, monolithic
 * upload: POST then PUT with the digest, manifest PUT and GET), enough to
 * keep a project's layers in a registry (docs/SCALE-OUT.md).  Everything
 * read back is checked against its digest before use.  */
#include "remote.h"
#include "fs.h"
#include "hash.h"
#include "http_client.h"
#include "text.h"
#include "utils.h"

#include <ctype.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

/* The remote's credentials (read when it was loaded): "user:password" or
   a bearer token.  */
static int
read_credentials (const struct esbx_remote *rm, struct esbx_registry *r, esbx_error_t *err)
{
  if (rm->credentials_error)
    return esbx_make_error (err, 0, "registry `%s`: %s", rm->registry, rm->credentials_error);
  if (rm->credentials == NULL)
    return 0;
  r->credentials = xstrdup (rm->credentials);
  if (strchr (r->credentials, ':'))
    r->auth.userpwd = r->credentials;
  else
    r->auth.bearer = r->credentials;
  return 0;
}

int
esbx_registry_open (const struct esbx_remote *rm, const char *project, struct esbx_registry *r,
                    esbx_error_t *err)
{
  const char *url = rm->registry, *host, *path;
  size_t i;

  memset (r, 0, sizeof *r);
  if (!esbx_has_prefix (url, "http://") && !esbx_has_prefix (url, "https://"))
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "registry `%s`: expected http://HOST[:PORT][/PREFIX]", url);
  host = strstr (url, "://") + 3;
  path = host + strcspn (host, "/");
  r->base = xstrndup (url, (size_t)(path - url));
  while (*path == '/')
    path++;
  r->repo = path[0] ? xasprintf ("%s/%s", path, project) : xstrdup (project);
  i = strlen (r->repo);
  while (i > 0 && r->repo[i - 1] == '/')
    r->repo[--i] = '\0';
  r->shown = xstrdup (url);
  r->auth.ca = rm->ca;
  r->auth.cert = rm->cert;
  r->auth.key = rm->key;
  r->gzip = !rm->uncompressed;
  if (read_credentials (rm, r, err) < 0)
    {
      esbx_registry_close (r);
      return -1;
    }
  /* Repository names of the distribution spec are lower case.  */
  for (i = 0; r->repo[i]; i++)
    if (isupper ((unsigned char)r->repo[i]))
      {
        esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                              "registry `%s`: repository `%s` must be lower case", url, r->repo);
        esbx_registry_close (r);
        return -1;
      }
  return 0;
}

void
esbx_registry_close (struct esbx_registry *r)
{
  free (r->base);
  free (r->repo);
  free (r->shown);
  if (r->credentials)
    explicit_bzero (r->credentials, strlen (r->credentials));
  free (r->credentials);
  free (r->upload);
  esbx_registry_forget_token (r);
  memset (r, 0, sizeof *r);
}

/* An answer other than WANT: the registry's first error message if it
   sent one (OCI error body), else the status.  */
static int
status_error (struct esbx_registry *r, const char *what, const struct esbx_http_response *rs,
              esbx_error_t *err)
{
  _cleanup_json_ json_t *j = NULL;
  _cleanup_free_ char *why = NULL;
  esbx_error_t ignored = NULL;
  const json_t *first;

  if (rs->body && (j = json_parse (rs->body, rs->len, &ignored)) != NULL
      && (first = json_at (json_get (j, "errors"), 0)) != NULL)
    why = esbx_escape_line (json_get_string (first, "message") ? json_get_string (first, "message")
                                                               : "error");
  esbx_error_free (&ignored);
  if (why)
    return esbx_make_error (err, 0, "registry `%s`: %s: HTTP %ld: %s", r->shown, what, rs->status,
                            why);
  return esbx_make_error (err, 0, "registry `%s`: %s: HTTP %ld", r->shown, what, rs->status);
}

/* RQ answered with status WANT (0: any, the caller looks), else an error
   naming WHAT; RS is filled only on success.  */
static int
request (struct esbx_registry *r, struct esbx_http_request *rq, struct esbx_http_response *rs,
         long want, const char *what, esbx_error_t *err)
{
  if (esbx_registry_send (r, rq, rs, err) < 0)
    return esbx_error_wrap (err, "registry `%s`: %s", r->shown, what);
  if (want && rs->status != want)
    {
      status_error (r, what, rs, err);
      esbx_http_response_free (rs);
      return -1;
    }
  return 0;
}

static int
has_blob (struct esbx_registry *r, const char *digest, bool *has, esbx_error_t *err)
{
  _cleanup_free_ char *url = xasprintf ("%s/v2/%s/blobs/%s", r->base, r->repo, digest);
  struct esbx_http_request rq;
  struct esbx_http_response rs;

  esbx_http_request_init (&rq, "HEAD", url);
  if (request (r, &rq, &rs, 0, "blob HEAD", err) < 0)
    return -1;
  *has = rs.status == 200;
  if (rs.status != 200 && rs.status != 404)
    {
      status_error (r, "blob HEAD", &rs, err);
      esbx_http_response_free (&rs);
      return -1;
    }
  esbx_http_response_free (&rs);
  return 0;
}

/* The upload location a POST to blobs/uploads/ gives, absolute.  */
static int
start_upload (struct esbx_registry *r, char **location, esbx_error_t *err)
{
  _cleanup_free_ char *url = xasprintf ("%s/v2/%s/blobs/uploads/", r->base, r->repo);
  struct esbx_http_request rq;
  struct esbx_http_response rs;

  esbx_http_request_init (&rq, "POST", url);
  if (request (r, &rq, &rs, 202, "start an upload", err) < 0)
    return -1;
  if (rs.location == NULL)
    {
      status_error (r, "start an upload", &rs, err);
      esbx_http_response_free (&rs);
      return -1;
    }
  *location
      = rs.location[0] == '/' ? xasprintf ("%s%s", r->base, rs.location) : xstrdup (rs.location);
  esbx_http_response_free (&rs);
  return 0;
}

int
esbx_registry_start_upload (struct esbx_registry *r, esbx_error_t *err)
{
  if (r->upload)
    return 0;
  return start_upload (r, &r->upload, err);
}

static int
push_blob (struct esbx_registry *r, const char *digest, int fd, const void *buf, size_t len,
           unsigned flags, esbx_error_t *err)
{
  _cleanup_free_ char *location = NULL, *url = NULL, *what = NULL;
  struct esbx_http_request rq;
  struct esbx_http_response rs;
  bool has = false;

  what = xasprintf ("push blob %s", digest);
  if (!(flags & ESBX_PUSH_NEW) && has_blob (r, digest, &has, err) < 0)
    return -1;
  if (has)
    return 0;
  /* An upload started ahead is used once (a failed PUT leaves no use of
     its location: the next push starts its own).  */
  location = steal_pointer (&r->upload);
  if (location == NULL && start_upload (r, &location, err) < 0)
    return -1;
  url = xasprintf ("%s%cdigest=%s", location, strchr (location, '?') ? '&' : '?', digest);
  esbx_http_request_init (&rq, "PUT", url);
  rq.content_type = "application/octet-stream";
  rq.body_fd = fd;
  rq.body = fd >= 0 ? NULL : (buf ? buf : "");
  rq.body_len = len;
  if (request (r, &rq, &rs, 201, what, err) < 0)
    return -1;
  esbx_http_response_free (&rs);
  return 0;
}

int
esbx_registry_push_blob_fd (struct esbx_registry *r, const char *digest, int fd, unsigned flags,
                            esbx_error_t *err)
{
  return push_blob (r, digest, fd, NULL, 0, flags, err);
}

int
esbx_registry_push_blob (struct esbx_registry *r, const char *digest, const void *buf, size_t len,
                         unsigned flags, esbx_error_t *err)
{
  return push_blob (r, digest, -1, buf, len, flags, err);
}

bool
esbx_registry_digest_valid (const char *digest)
{
  return digest && esbx_has_prefix (digest, "sha256:") && strlen (digest) == 7 + ESBX_SHA256_HEX_LEN
         && strspn (digest + 7, "0123456789abcdef") == ESBX_SHA256_HEX_LEN;
}

static int
check_digest (struct esbx_registry *r, const char *what, const char *digest, const char *hex,
              esbx_error_t *err)
{
  if (!esbx_has_prefix (digest, "sha256:") || strcmp (digest + 7, hex) != 0)
    return esbx_make_error (err, 0, "registry `%s`: %s: digest mismatch (got sha256:%s)", r->shown,
                            what, hex);
  return 0;
}

bool
esbx_registry_read_again (const esbx_error_t e, int attempt)
{
  return attempt < ESBX_REGISTRY_READ_ATTEMPTS && (e == NULL || e->kind != ESBX_ERR_FORBIDDEN);
}

void
esbx_registry_read_pause (int attempt)
{
  usleep (50000u << attempt);
}

int
esbx_registry_blob_answer (struct esbx_registry *r, const char *digest,
                           struct esbx_http_response *rs, int fd, char **buf, size_t *len,
                           esbx_error_t *err)
{
  _cleanup_free_ char *what = xasprintf ("blob %s", digest);
  char hex[ESBX_SHA256_HEX_LEN + 1];
  off_t size;

  if (rs->status != 200)
    return status_error (r, what, rs, err);
  if (fd >= 0)
    {
      if (lseek (fd, 0, SEEK_SET) < 0 || esbx_sha256_fd (fd, hex, &size, err) < 0)
        return esbx_error_wrap (err, "registry `%s`: %s", r->shown, what);
      if (check_digest (r, what, digest, hex, err) < 0)
        return -1;
      if (lseek (fd, 0, SEEK_SET) < 0)
        return esbx_make_error (err, errno, "registry `%s`: %s: seek", r->shown, what);
      return 0;
    }
  esbx_sha256_buf (rs->body ? rs->body : "", rs->len, hex);
  if (check_digest (r, what, digest, hex, err) < 0)
    return -1;
  *buf = rs->body ? steal_pointer (&rs->body) : xstrdup ("");
  *len = rs->len;
  return 0;
}

int
esbx_registry_put_manifest (struct esbx_registry *r, const char *tag, const char *body, size_t len,
                            esbx_error_t *err)
{
  _cleanup_free_ char *url = xasprintf ("%s/v2/%s/manifests/%s", r->base, r->repo, tag);
  _cleanup_free_ char *what = xasprintf ("put manifest `%s`", tag);
  struct esbx_http_request rq;
  struct esbx_http_response rs;

  esbx_http_request_init (&rq, "PUT", url);
  rq.content_type = ESBX_OCI_MANIFEST;
  rq.body = body;
  rq.body_len = len;
  if (request (r, &rq, &rs, 201, what, err) < 0)
    return -1;
  esbx_http_response_free (&rs);
  return 0;
}

int
esbx_registry_delete_manifest (struct esbx_registry *r, const char *digest, esbx_error_t *err)
{
  _cleanup_free_ char *url = xasprintf ("%s/v2/%s/manifests/%s", r->base, r->repo, digest);
  _cleanup_free_ char *what = xasprintf ("delete manifest %s", digest);
  struct esbx_http_request rq;
  struct esbx_http_response rs;
  int ret = 0;

  esbx_http_request_init (&rq, "DELETE", url);
  if (request (r, &rq, &rs, 0, what, err) < 0)
    return -1;
  if (rs.status == 405)
    ret = esbx_make_error_kind (err, ESBX_ERR_FORBIDDEN, 0,
                                "registry `%s`: %s: HTTP 405: the registry does not delete "
                                "(docker-registry: storage.delete.enabled)",
                                r->shown, what);
  else if (rs.status != 202 && rs.status != 200 && rs.status != 404)
    ret = status_error (r, what, &rs, err);
  esbx_http_response_free (&rs);
  return ret;
}

static int
registry_get_manifest_once (struct esbx_registry *r, const char *ref, json_t **out, char **body,
                            size_t *len, esbx_error_t *err)
{
  _cleanup_free_ char *url = xasprintf ("%s/v2/%s/manifests/%s", r->base, r->repo, ref);
  _cleanup_free_ char *what = xasprintf ("manifest `%s`", ref);
  struct esbx_http_request rq;
  struct esbx_http_response rs;
  char hex[ESBX_SHA256_HEX_LEN + 1];

  esbx_http_request_init (&rq, "GET", url);
  rq.accept = ESBX_OCI_MANIFEST;
  if (request (r, &rq, &rs, 200, what, err) < 0)
    return -1;
  if (rs.body == NULL)
    {
      status_error (r, what, &rs, err);
      esbx_http_response_free (&rs);
      return -1;
    }
  esbx_sha256_buf (rs.body, rs.len, hex);
  if (esbx_has_prefix (ref, "sha256:") && check_digest (r, what, ref, hex, err) < 0)
    {
      esbx_http_response_free (&rs);
      return -1;
    }
  *out = json_parse (rs.body, rs.len, err);
  if (*out && body)
    {
      *body = steal_pointer (&rs.body);
      *len = rs.len;
    }
  esbx_http_response_free (&rs);
  if (*out == NULL)
    return esbx_error_wrap (err, "registry `%s`: %s", r->shown, what);
  return 0;
}

/* One read of the registry (registry_get_*_once) and what it needs,
   tried ESBX_REGISTRY_READ_ATTEMPTS times.  */
struct read
{
  const char *ref; /* digest or tag */
  json_t **manifest;
  char **body; /* NULL, or the manifest's bytes too */
  size_t *len;
};
typedef int (*read_once_fn) (struct esbx_registry *r, const struct read *a, esbx_error_t *err);

static int
with_retries (struct esbx_registry *r, read_once_fn once, const struct read *a, esbx_error_t *err)
{
  int i;

  for (i = 1;; i++)
    {
      if (once (r, a, err) == 0)
        return 0;
      if (!esbx_registry_read_again (*err, i))
        return -1;
      esbx_error_free (err);
      esbx_registry_read_pause (i);
    }
}

static int
manifest_once (struct esbx_registry *r, const struct read *a, esbx_error_t *err)
{
  return registry_get_manifest_once (r, a->ref, a->manifest, a->body, a->len, err);
}

int
esbx_registry_get_manifest (struct esbx_registry *r, const char *ref, json_t **out,
                            esbx_error_t *err)
{
  const struct read a = { .ref = ref, .manifest = out };

  return with_retries (r, manifest_once, &a, err);
}

int
esbx_registry_get_manifest_body (struct esbx_registry *r, const char *ref, json_t **out,
                                 char **body, size_t *len, esbx_error_t *err)
{
  const struct read a = { .ref = ref, .manifest = out, .body = body, .len = len };

  return with_retries (r, manifest_once, &a, err);
}
