/* esbx: HTTP over libcurl loaded at first use (http.h says why).  */
#include "http_client.h"
#include "curl.h"
#include "http_easy.h"
#include "fs.h"
#include "text.h"
#include "utils.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* A service that accepts a connection and then says nothing for this long
   has failed: the caller's state stays as it was.  */
#define CONNECT_TIMEOUT_S 10L
#define STALL_TIMEOUT_S   60L

void
esbx_http_request_init (struct esbx_http_request *rq, const char *method, const char *url)
{
  memset (rq, 0, sizeof *rq);
  rq->method = method;
  rq->url = url;
  rq->body_fd = -1;
  rq->out_fd = -1;
}

void
esbx_http_response_free (struct esbx_http_response *rs)
{
  free (rs->body);
  free (rs->location);
  free (rs->www_authenticate);
  memset (rs, 0, sizeof *rs);
}

char *
esbx_http_origin (const char *url)
{
  const char *scheme = strstr (url, "://");
  const char *host = scheme ? scheme + 3 : url;
  const char *at, *end = host + strcspn (host, "/?#");

  at = memchr (host, '@', (size_t)(end - host));
  if (at)
    host = at + 1;
  return xasprintf ("%.*s%.*s", scheme ? (int)(scheme + 3 - url) : 0, url, (int)(end - host), host);
}

static size_t
on_read (char *buf, size_t size, size_t nmemb, void *userdata)
{
  struct esbx_http_transfer *t = userdata;
  size_t want = size * nmemb, n;
  ssize_t r;

  if (t->rq->body_fd >= 0)
    {
      r = TEMP_FAILURE_RETRY (read (t->rq->body_fd, buf, want));
      return r < 0 ? CURL_READFUNC_ABORT : (size_t)r;
    }
  n = t->rq->body_len - t->sent;
  if (n > want)
    n = want;
  memcpy (buf, (const char *)t->rq->body + t->sent, n);
  t->sent += n;
  return n;
}

static size_t
on_write (char *data, size_t size, size_t nmemb, void *userdata)
{
  struct esbx_http_transfer *t = userdata;
  size_t n = size * nmemb;

  if (t->rq->on_data)
    return t->rq->on_data (data, n, t->rq->arg) ? n : 0;
  if (t->rq->out_fd >= 0)
    {
      if (t->rq->out_max && n > t->rq->out_max - t->written)
        {
          t->too_large = true;
          return 0;
        }
      t->written += n;
      if (esbx_write_all (t->rq->out_fd, data, n) < 0)
        {
          t->write_errno = errno;
          return 0;
        }
      return n;
    }
  if (n > ESBX_HTTP_BODY_MAX - t->rs->len)
    {
      t->too_large = true;
      return 0;
    }
  t->rs->body = xrealloc (t->rs->body, t->rs->len + n + 1);
  memcpy (t->rs->body + t->rs->len, data, n);
  t->rs->len += n;
  t->rs->body[t->rs->len] = '\0';
  return n;
}

/* The value of header NAME ("name:") in DATA/N, trimmed; NULL when DATA
   is another header.  */
static char *
header_value (const char *data, size_t n, const char *name)
{
  size_t k = strlen (name), len;
  const char *v;

  if (n <= k || strncasecmp (data, name, k) != 0)
    return NULL;
  v = data + k;
  while (v < data + n && (*v == ' ' || *v == '\t'))
    v++;
  len = (size_t)(data + n - v);
  while (len > 0 && (v[len - 1] == '\r' || v[len - 1] == '\n' || v[len - 1] == ' '))
    len--;
  return xstrndup (v, len);
}

static size_t
on_header (char *data, size_t size, size_t nmemb, void *userdata)
{
  struct esbx_http_transfer *t = userdata;
  size_t n = size * nmemb;
  char *v;

  if ((v = header_value (data, n, "location:")) != NULL)
    {
      free (t->rs->location);
      t->rs->location = v;
    }
  else if ((v = header_value (data, n, "www-authenticate:")) != NULL)
    {
      if (t->rs->www_authenticate == NULL && strncasecmp (v, "Bearer ", 7) == 0)
        t->rs->www_authenticate = v;
      else
        free (v);
    }
  return n;
}

static int
on_progress (void *userdata, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
             curl_off_t ulnow)
{
  const struct esbx_http_request *rq = userdata;

  (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
  return rq->abort (rq->arg) ? 1 : 0;
}

/* A stream has no stall timeout: a watch says nothing while nothing
   changes.  TCP keepalive notices a peer that went away silently.  */
static void
set_stream (CURL *curl, const struct esbx_http_request *rq)
{
  esbx_curl.easy_setopt (curl, CURLOPT_LOW_SPEED_TIME, 0L);
  esbx_curl.easy_setopt (curl, CURLOPT_TCP_KEEPALIVE, 1L);
  esbx_curl.easy_setopt (curl, CURLOPT_TCP_KEEPIDLE, 30L);
  esbx_curl.easy_setopt (curl, CURLOPT_TCP_KEEPINTVL, 10L);
  if (rq->abort)
    {
      esbx_curl.easy_setopt (curl, CURLOPT_NOPROGRESS, 0L);
      esbx_curl.easy_setopt (curl, CURLOPT_XFERINFOFUNCTION, on_progress);
      esbx_curl.easy_setopt (curl, CURLOPT_XFERINFODATA, rq);
    }
}

static struct curl_slist *
add_header (struct curl_slist *h, const char *name, const char *value)
{
  _cleanup_free_ char *line = xasprintf ("%s: %s", name, value);
  return esbx_curl.slist_append (h, line);
}

static void
set_auth (CURL *curl, const struct esbx_http_auth *a, struct curl_slist **headers)
{
  if (a->ca)
    esbx_curl.easy_setopt (curl, CURLOPT_CAINFO, a->ca);
  if (a->cert)
    esbx_curl.easy_setopt (curl, CURLOPT_SSLCERT, a->cert);
  if (a->key)
    esbx_curl.easy_setopt (curl, CURLOPT_SSLKEY, a->key);
  if (a->userpwd)
    {
      esbx_curl.easy_setopt (curl, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
      esbx_curl.easy_setopt (curl, CURLOPT_USERPWD, a->userpwd);
    }
  else if (a->bearer)
    {
      _cleanup_free_ char *value = xasprintf ("Bearer %s", a->bearer);
      *headers = add_header (*headers, "Authorization", value);
    }
}

int
esbx_http_easy_setup (struct esbx_http_easy *e, const struct esbx_http_request *rq,
                      struct esbx_http_response *rs, esbx_error_t *err)
{
  bool upload = rq->body || rq->body_fd >= 0;
  curl_off_t size = 0;
  CURL *curl;

  memset (e, 0, sizeof *e);
  memset (rs, 0, sizeof *rs);
  e->t.rq = rq;
  e->t.rs = rs;
  e->origin = esbx_http_origin (rq->url);
  if (esbx_curl_load ("remote stores", err) < 0)
    goto fail;
  if (upload && rq->body_fd >= 0)
    {
      off_t end = lseek (rq->body_fd, 0, SEEK_END);
      if (end < 0 || lseek (rq->body_fd, 0, SEEK_SET) < 0)
        {
          esbx_make_error (err, errno, "%s: seek the body", e->origin);
          goto fail;
        }
      size = (curl_off_t)end;
    }
  else if (upload)
    size = (curl_off_t)rq->body_len;
  curl = e->curl = esbx_curl.easy_init ();
  if (curl == NULL)
    {
      esbx_make_error (err, ENOMEM, "%s: curl_easy_init", e->origin);
      goto fail;
    }
  /* Expect: 100-continue would cost a round trip per blob.  */
  e->headers = esbx_curl.slist_append (e->headers, "Expect:");
  if (rq->content_type)
    e->headers = add_header (e->headers, "Content-Type", rq->content_type);
  if (rq->accept)
    e->headers = add_header (e->headers, "Accept", rq->accept);
  if (rq->auth)
    set_auth (curl, rq->auth, &e->headers);
  esbx_curl.easy_setopt (curl, CURLOPT_URL, rq->url);
  esbx_curl.easy_setopt (curl, CURLOPT_ERRORBUFFER, e->errbuf);
  esbx_curl.easy_setopt (curl, CURLOPT_PRIVATE, e);
  esbx_curl.easy_setopt (curl, CURLOPT_NOSIGNAL, 1L);
  esbx_curl.easy_setopt (curl, CURLOPT_CONNECTTIMEOUT, CONNECT_TIMEOUT_S);
  esbx_curl.easy_setopt (curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  esbx_curl.easy_setopt (curl, CURLOPT_LOW_SPEED_TIME, STALL_TIMEOUT_S);
  esbx_curl.easy_setopt (curl, CURLOPT_HTTPHEADER, e->headers);
  esbx_curl.easy_setopt (curl, CURLOPT_WRITEFUNCTION, on_write);
  esbx_curl.easy_setopt (curl, CURLOPT_WRITEDATA, &e->t);
  esbx_curl.easy_setopt (curl, CURLOPT_HEADERFUNCTION, on_header);
  esbx_curl.easy_setopt (curl, CURLOPT_HEADERDATA, &e->t);
  if (rq->on_data || rq->abort)
    set_stream (curl, rq);
  if (strcmp (rq->method, "HEAD") == 0)
    esbx_curl.easy_setopt (curl, CURLOPT_NOBODY, 1L);
  else if (upload)
    {
      esbx_curl.easy_setopt (curl, CURLOPT_UPLOAD, 1L);
      esbx_curl.easy_setopt (curl, CURLOPT_READFUNCTION, on_read);
      esbx_curl.easy_setopt (curl, CURLOPT_READDATA, &e->t);
      esbx_curl.easy_setopt (curl, CURLOPT_INFILESIZE_LARGE, size);
      esbx_curl.easy_setopt (curl, CURLOPT_CUSTOMREQUEST, rq->method);
    }
  else if (strcmp (rq->method, "GET") != 0)
    {
      /* A POST without a body still says Content-Length: 0.  */
      esbx_curl.easy_setopt (curl, CURLOPT_POSTFIELDS, "");
      esbx_curl.easy_setopt (curl, CURLOPT_CUSTOMREQUEST, rq->method);
    }
  return 0;

fail:
  free (e->origin);
  e->origin = NULL;
  return -1;
}

int
esbx_http_easy_finish (struct esbx_http_easy *e, CURLcode rc, esbx_error_t *err)
{
  int ret = 0;

  if (rc == CURLE_OK)
    esbx_curl.easy_getinfo (e->curl, CURLINFO_RESPONSE_CODE, &e->t.rs->status);
  esbx_curl.easy_cleanup (e->curl);
  esbx_curl.slist_free_all (e->headers);
  if (rc != CURLE_OK)
    {
      _cleanup_free_ char *why
          = esbx_escape_line (e->errbuf[0] ? e->errbuf : esbx_curl.easy_strerror (rc));
      esbx_http_response_free (e->t.rs);
      if (e->t.write_errno)
        ret = esbx_make_error (err, e->t.write_errno, "%s: write the answer", e->origin);
      else if (e->t.too_large && e->t.rq->out_fd >= 0)
        ret = esbx_make_error (err, 0, "%s: an answer larger than the %" PRIu64 " bytes expected",
                               e->origin, e->t.rq->out_max);
      else if (e->t.too_large)
        ret = esbx_make_error (err, 0, "%s: an answer larger than %u MiB", e->origin,
                               ESBX_HTTP_BODY_MAX >> 20);
      else
        ret = esbx_make_error (err, 0, "%s: %s", e->origin, why);
    }
  free (e->origin);
  memset (e, 0, sizeof *e);
  return ret;
}

int
esbx_http_do (const struct esbx_http_request *rq, struct esbx_http_response *rs, esbx_error_t *err)
{
  struct esbx_http_easy e;

  if (esbx_http_easy_setup (&e, rq, rs, err) < 0)
    return -1;
  return esbx_http_easy_finish (&e, esbx_curl.easy_perform (e.curl), err);
}
