/* liblayerstore: reading blobs from the registry, several at once over
 * libcurl's multi interface (esbx_http_do_many): a pull of a stack wants
 * a record and a layer blob per layer, and one after the other each paid
 * its round trips and its connection.  Every blob is verified against its
 * digest before the caller sees it.  */
#include "remote.h"
#include "fs.h"
#include "http_client.h"
#include "utils.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

/* The blobs B[IDX[0..K)] at once, with the credentials R has now.  An
   answer that asks for a token leaves its blob in *ASK (its index into
   IDX) with no error; the others are read or have their error in ERRS.  */
static int
parallel (struct esbx_registry *r, struct esbx_registry_blob *b, const size_t *idx, size_t k,
          esbx_error_t *errs, bool *ask, esbx_error_t *err)
{
  _cleanup_free_ struct esbx_http_request *rq = xmalloc0 ((k + 1) * sizeof *rq);
  _cleanup_free_ struct esbx_http_response *rs = xmalloc0 ((k + 1) * sizeof *rs);
  _cleanup_free_ char **urls = xmalloc0 ((k + 1) * sizeof *urls);
  struct esbx_http_auth auth;
  size_t j;
  int ret = 0;

  esbx_registry_auth_now (r, &auth);
  for (j = 0; j < k; j++)
    {
      struct esbx_registry_blob *x = &b[idx[j]];

      ask[j] = false;
      if (x->fd >= 0 && (ftruncate (x->fd, 0) < 0 || lseek (x->fd, 0, SEEK_SET) < 0))
        {
          ret = esbx_make_error (err, errno, "registry `%s`: blob %s: truncate", r->shown,
                                 x->digest);
          goto out;
        }
      urls[j] = xasprintf ("%s/v2/%s/blobs/%s", r->base, r->repo, x->digest);
      esbx_http_request_init (&rq[j], "GET", urls[j]);
      rq[j].out_fd = x->fd;
      rq[j].out_max = x->size;
      rq[j].auth = &auth;
    }
  if (esbx_http_do_many (rq, rs, errs, k, ESBX_REGISTRY_PARALLEL, err) < 0)
    {
      ret = esbx_error_wrap (err, "registry `%s`", r->shown);
      goto out;
    }
  for (j = 0; j < k; j++)
    {
      struct esbx_registry_blob *x = &b[idx[j]];

      if (errs[j])
        esbx_error_wrap (&errs[j], "registry `%s`: blob %s", r->shown, x->digest);
      else if (esbx_registry_challenged (&rs[j]))
        ask[j] = true;
      else
        esbx_registry_blob_answer (r, x->digest, &rs[j], x->fd, &x->buf, &x->len, &errs[j]);
      esbx_http_response_free (&rs[j]);
    }

out:
  for (j = 0; j < k; j++)
    free (urls[j]);
  return ret;
}

/* Blob X alone, through the path that answers a challenge with a token
   of the realm (kept in R for the next ones).  */
static void
one (struct esbx_registry *r, struct esbx_registry_blob *x, esbx_error_t *e)
{
  _cleanup_free_ char *url = xasprintf ("%s/v2/%s/blobs/%s", r->base, r->repo, x->digest);
  struct esbx_http_request rq;
  struct esbx_http_response rs;

  if (x->fd >= 0 && (ftruncate (x->fd, 0) < 0 || lseek (x->fd, 0, SEEK_SET) < 0))
    {
      esbx_make_error (e, errno, "registry `%s`: blob %s: truncate", r->shown, x->digest);
      return;
    }
  esbx_http_request_init (&rq, "GET", url);
  rq.out_fd = x->fd;
  rq.out_max = x->size;
  if (esbx_registry_send (r, &rq, &rs, e) < 0)
    {
      esbx_error_wrap (e, "registry `%s`: blob %s", r->shown, x->digest);
      return;
    }
  esbx_registry_blob_answer (r, x->digest, &rs, x->fd, &x->buf, &x->len, e);
  esbx_http_response_free (&rs);
}

/* Round over the blobs not read yet (PENDING, K of them): the failed ones
   stay pending with their error in ERRS.  Those a registry with token
   authentication refused: the first alone (it gets the token), then the
   others at once with it.  */
static int
read_round (struct esbx_registry *r, struct esbx_registry_blob *b, size_t *pending, size_t k,
            esbx_error_t *errs, esbx_error_t *err)
{
  _cleanup_free_ bool *ask = xmalloc0 ((k + 1) * sizeof *ask);
  _cleanup_free_ size_t *idx = xmalloc0 ((k + 1) * sizeof *idx);
  _cleanup_free_ size_t *at = xmalloc0 ((k + 1) * sizeof *at);
  _cleanup_free_ esbx_error_t *e2 = xmalloc0 ((k + 1) * sizeof *e2);
  size_t j, m = 0;

  if (parallel (r, b, pending, k, errs, ask, err) < 0)
    return -1;
  for (j = 0; j < k; j++)
    if (ask[j])
      at[m++] = j;
  if (m == 0)
    return 0;
  one (r, &b[pending[at[0]]], &errs[at[0]]);
  if (m == 1)
    return 0;
  if (errs[at[0]])
    {
      /* Not even with a token of the realm: the others wait for the next
         round (or share the refusal).  */
      for (j = 1; j < m; j++)
        esbx_make_error_kind (&errs[at[j]], errs[at[0]]->kind, 0,
                              "registry `%s`: blob %s: not read, blob %s was not", r->shown,
                              b[pending[at[j]]].digest, b[pending[at[0]]].digest);
      return 0;
    }
  for (j = 1; j < m; j++)
    idx[j - 1] = pending[at[j]];
  if (parallel (r, b, idx, m - 1, e2, ask, err) < 0)
    return -1;
  for (j = 1; j < m; j++)
    {
      errs[at[j]] = steal_pointer (&e2[j - 1]);
      if (ask[j - 1] && errs[at[j]] == NULL)
        esbx_make_error_kind (&errs[at[j]], ESBX_ERR_FORBIDDEN, 0,
                              "registry `%s`: blob %s: HTTP 401: the realm's token was refused",
                              r->shown, b[pending[at[j]]].digest);
    }
  return 0;
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
