/* esbx: several HTTP requests at once over libcurl's multi interface:
   each is the easy handle esbx_http_do would run (http_easy.h), so
   authentication, CA, client certificate and timeouts are the same, and
   the multi handle's connection cache lets them reuse connections.  */
#include "http_client.h"
#include "curl.h"
#include "http_easy.h"
#include "utils.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Wake up at least this often while transfers run: curl's own timers
   (timeouts) are checked by multi_perform.  */
#define POLL_MS 1000

static int
multi_error (CURLMcode mc, const char *what, esbx_error_t *err)
{
  return esbx_make_error (err, 0, "HTTP transfers: %s: %s", what, esbx_curl.multi_strerror (mc));
}

/* Remove every handle still running and finish it with RC.  */
static void
abort_running (CURLM *m, struct esbx_http_easy *e, esbx_error_t *errs, size_t n)
{
  size_t i;

  for (i = 0; i < n; i++)
    if (e[i].curl)
      {
        esbx_curl.multi_remove_handle (m, e[i].curl);
        esbx_http_easy_finish (&e[i], CURLE_ABORTED_BY_CALLBACK, &errs[i]);
      }
}

/* Collect the transfers that ended; how many did.  */
static size_t
reap (CURLM *m, struct esbx_http_easy *e, esbx_error_t *errs)
{
  struct esbx_http_easy *x;
  CURLMsg *msg;
  size_t done = 0;
  int left;

  while ((msg = esbx_curl.multi_info_read (m, &left)) != NULL)
    {
      CURLcode rc = msg->data.result;

      if (msg->msg != CURLMSG_DONE)
        continue;
      x = NULL;
      esbx_curl.easy_getinfo (msg->easy_handle, CURLINFO_PRIVATE, &x);
      esbx_curl.multi_remove_handle (m, msg->easy_handle);
      esbx_http_easy_finish (x, rc, &errs[x - e]);
      done++;
    }
  return done;
}

int
esbx_http_do_many (const struct esbx_http_request *rq, struct esbx_http_response *rs,
                   esbx_error_t *errs, size_t n, size_t parallel, esbx_error_t *err)
{
  _cleanup_free_ struct esbx_http_easy *e = NULL;
  size_t next = 0, running = 0, done, i;
  CURLMcode mc;
  CURLM *m;
  int still;

  for (i = 0; i < n; i++)
    {
      errs[i] = NULL;
      memset (&rs[i], 0, sizeof rs[i]);
    }
  if (esbx_curl_load ("remote stores", err) < 0)
    return -1;
  if (parallel == 0)
    parallel = 1;
  m = esbx_curl.multi_init ();
  if (m == NULL)
    return esbx_make_error (err, ENOMEM, "HTTP transfers: curl_multi_init");
  e = xmalloc0 ((n + 1) * sizeof *e);
  for (;;)
    {
      while (running < parallel && next < n)
        {
          i = next++;
          if (esbx_http_easy_setup (&e[i], &rq[i], &rs[i], &errs[i]) < 0)
            continue;
          mc = esbx_curl.multi_add_handle (m, e[i].curl);
          if (mc != CURLM_OK)
            {
              esbx_http_easy_finish (&e[i], CURLE_FAILED_INIT, &errs[i]);
              goto fail;
            }
          running++;
        }
      if (running == 0)
        break;
      mc = esbx_curl.multi_perform (m, &still);
      if (mc != CURLM_OK)
        goto fail;
      done = reap (m, e, errs);
      running -= done;
      if (done == 0 && still > 0)
        {
          mc = esbx_curl.multi_poll (m, NULL, 0, POLL_MS, NULL);
          if (mc != CURLM_OK)
            goto fail;
        }
    }
  esbx_curl.multi_cleanup (m);
  return 0;

fail:
  abort_running (m, e, errs, n);
  esbx_curl.multi_cleanup (m);
  for (i = 0; i < n; i++)
    {
      esbx_error_free (&errs[i]);
      esbx_http_response_free (&rs[i]);
    }
  return multi_error (mc, "run", err);
}
