/* liblayerstore: reading blobs from the registry, several at once over
 * libcurl's multi interface (esbx_http_do_many): a pull of a stack wants
 * a record and a layer blob per layer, and one after the other each paid
 * its round trips and its connection.  Every blob is verified against its
 * digest before the caller sees it.  */
#include "remote.h"
#include "fs.h"
#include "http.h"
#include "utils.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

/* Round ATTEMPT over the blobs not read yet (PENDING, K of them): the
   failed ones stay pending with their error in ERRS.  */
static int
read_round (struct esbx_registry *r, struct esbx_registry_blob *b, size_t *pending, size_t k,
            esbx_error_t *errs, esbx_error_t *err)
{
  _cleanup_free_ struct esbx_http_request *rq = xmalloc0 ((k + 1) * sizeof *rq);
  _cleanup_free_ struct esbx_http_response *rs = xmalloc0 ((k + 1) * sizeof *rs);
  _cleanup_free_ char **urls = xmalloc0 ((k + 1) * sizeof *urls);
  size_t j;
  int ret = 0;

  for (j = 0; j < k; j++)
    {
      struct esbx_registry_blob *x = &b[pending[j]];

      if (x->fd >= 0 && (ftruncate (x->fd, 0) < 0 || lseek (x->fd, 0, SEEK_SET) < 0))
        {
          ret = esbx_make_error (err, errno, "registry `%s`: blob %s: truncate", r->shown,
                                 x->digest);
          goto out;
        }
      urls[j] = xasprintf ("%s/v2/%s/blobs/%s", r->base, r->repo, x->digest);
      esbx_http_request_init (&rq[j], "GET", urls[j]);
      rq[j].out_fd = x->fd;
      rq[j].auth = &r->auth;
    }
  if (esbx_http_do_many (rq, rs, errs, k, ESBX_REGISTRY_PARALLEL, err) < 0)
    {
      ret = esbx_error_wrap (err, "registry `%s`", r->shown);
      goto out;
    }
  for (j = 0; j < k; j++)
    {
      struct esbx_registry_blob *x = &b[pending[j]];

      if (errs[j])
        esbx_error_wrap (&errs[j], "registry `%s`: blob %s", r->shown, x->digest);
      else
        esbx_registry_blob_answer (r, x->digest, &rs[j], x->fd, &x->buf, &x->len, &errs[j]);
      esbx_http_response_free (&rs[j]);
    }

out:
  for (j = 0; j < k; j++)
    free (urls[j]);
  return ret;
}

int
esbx_registry_get_blobs (struct esbx_registry *r, struct esbx_registry_blob *b, size_t n,
                         esbx_error_t *err)
{
  _cleanup_free_ size_t *pending = xmalloc0 ((n + 1) * sizeof *pending);
  _cleanup_free_ esbx_error_t *errs = xmalloc0 ((n + 1) * sizeof *errs);
  size_t k = n, j, left;
  int attempt;

  for (j = 0; j < n; j++)
    pending[j] = j;
  for (attempt = 1; k > 0; attempt++)
    {
      bool again = true;

      if (read_round (r, b, pending, k, errs, err) < 0)
        return -1;
      left = 0;
      for (j = 0; j < k; j++)
        if (errs[j])
          {
            if (again && !esbx_registry_read_again (errs[j], attempt))
              {
                again = false;
                *err = steal_pointer (&errs[j]);
              }
            else
              esbx_error_free (&errs[j]);
            pending[left++] = pending[j];
          }
      k = left;
      if (!again)
        return -1;
      if (k > 0)
        esbx_registry_read_pause (attempt);
    }
  return 0;
}

int
esbx_registry_get_blob (struct esbx_registry *r, const char *digest, int fd, esbx_error_t *err)
{
  struct esbx_registry_blob b = { .digest = digest, .fd = fd };

  return esbx_registry_get_blobs (r, &b, 1, err);
}

int
esbx_registry_get_blob_buf (struct esbx_registry *r, const char *digest, char **buf, size_t *len,
                            esbx_error_t *err)
{
  struct esbx_registry_blob b = { .digest = digest, .fd = -1 };

  if (esbx_registry_get_blobs (r, &b, 1, err) < 0)
    return -1;
  *buf = b.buf;
  *len = b.len;
  return 0;
}
