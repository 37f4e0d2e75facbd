/* esbx: HTTP over libcurl loaded at first use (http.h says why).  */
#include "http.h"
#include "fs.h"
#include "text.h"
#include "utils.h"

#include <curl/curl.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define LIBCURL "libcurl.so.4"
/* A service that accepts a connection and then says nothing for this long
   has failed: the caller's state stays as it was.  */
#define CONNECT_TIMEOUT_S 10L
#define STALL_TIMEOUT_S   60L

static struct
{
  void *handle;
  CURL *(*easy_init) (void);
  CURLcode (*easy_setopt) (CURL *, CURLoption, ...);
  CURLcode (*easy_perform) (CURL *);
  CURLcode (*easy_getinfo) (CURL *, CURLINFO, ...);
  void (*easy_cleanup) (CURL *);
  const char *(*easy_strerror) (CURLcode);
  struct curl_slist *(*slist_append) (struct curl_slist *, const char *);
  void (*slist_free_all) (struct curl_slist *);
} api;

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;

static int
load_symbol (void *handle, void *fn, const char *name, esbx_error_t *err)
{
  void *sym = dlsym (handle, name);

  if (sym == NULL)
    return esbx_make_error (err, 0, "%s has no `%s`", LIBCURL, name);
  memcpy (fn, &sym, sizeof sym);
  return 0;
}

static int
load_curl_locked (esbx_error_t *err)
{
  void *h;

  if (api.handle)
    return 0;
  h = dlopen (LIBCURL, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL)
    return esbx_make_error (err, 0, "remote stores need %s (apt-get install libcurl4): %s", LIBCURL,
                            dlerror ());
  if (load_symbol (h, &api.easy_init, "curl_easy_init", err) < 0
      || load_symbol (h, &api.easy_setopt, "curl_easy_setopt", err) < 0
      || load_symbol (h, &api.easy_perform, "curl_easy_perform", err) < 0
      || load_symbol (h, &api.easy_getinfo, "curl_easy_getinfo", err) < 0
      || load_symbol (h, &api.easy_cleanup, "curl_easy_cleanup", err) < 0
      || load_symbol (h, &api.easy_strerror, "curl_easy_strerror", err) < 0
      || load_symbol (h, &api.slist_append, "curl_slist_append", err) < 0
      || load_symbol (h, &api.slist_free_all, "curl_slist_free_all", err) < 0)
    {
      dlclose (h);
      return -1;
    }
  api.handle = h;
  return 0;
}

static int
load_curl (esbx_error_t *err)
{
  int r;

  pthread_mutex_lock (&load_lock);
  r = load_curl_locked (err);
  pthread_mutex_unlock (&load_lock);
  return r;
}

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

struct transfer
{
  const struct esbx_http_request *rq;
  struct esbx_http_response *rs;
  size_t sent;
  int write_errno;
};

static size_t
on_read (char *buf, size_t size, size_t nmemb, void *userdata)
{
  struct transfer *t = userdata;
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
  struct transfer *t = userdata;
  size_t n = size * nmemb;

  if (t->rq->out_fd >= 0)
    {
      if (esbx_write_all (t->rq->out_fd, data, n) < 0)
        {
          t->write_errno = errno;
          return 0;
        }
      return n;
    }
  t->rs->body = xrealloc (t->rs->body, t->rs->len + n + 1);
  memcpy (t->rs->body + t->rs->len, data, n);
  t->rs->len += n;
  t->rs->body[t->rs->len] = '\0';
  return n;
}

static size_t
on_header (char *data, size_t size, size_t nmemb, void *userdata)
{
  struct transfer *t = userdata;
  size_t n = size * nmemb, len = n;

  if (n > 9 && strncasecmp (data, "location:", 9) == 0)
    {
      const char *v = data + 9;
      while (*v == ' ' && v < data + n)
        v++;
      len = (size_t)(data + n - v);
      while (len > 0 && (v[len - 1] == '\r' || v[len - 1] == '\n' || v[len - 1] == ' '))
        len--;
      free (t->rs->location);
      t->rs->location = xstrndup (v, len);
    }
  return n;
}

static struct curl_slist *
add_header (struct curl_slist *h, const char *name, const char *value)
{
  _cleanup_free_ char *line = xasprintf ("%s: %s", name, value);
  return api.slist_append (h, line);
}

static void
set_auth (CURL *curl, const struct esbx_http_auth *a, struct curl_slist **headers)
{
  if (a->ca)
    api.easy_setopt (curl, CURLOPT_CAINFO, a->ca);
  if (a->cert)
    api.easy_setopt (curl, CURLOPT_SSLCERT, a->cert);
  if (a->key)
    api.easy_setopt (curl, CURLOPT_SSLKEY, a->key);
  if (a->userpwd)
    {
      api.easy_setopt (curl, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
      api.easy_setopt (curl, CURLOPT_USERPWD, a->userpwd);
    }
  else if (a->bearer)
    {
      _cleanup_free_ char *value = xasprintf ("Bearer %s", a->bearer);
      *headers = add_header (*headers, "Authorization", value);
    }
}

int
esbx_http_do (const struct esbx_http_request *rq, struct esbx_http_response *rs, esbx_error_t *err)
{
  _cleanup_free_ char *origin = esbx_http_origin (rq->url);
  struct transfer t = { .rq = rq, .rs = rs };
  struct curl_slist *headers = NULL;
  char errbuf[CURL_ERROR_SIZE] = "";
  bool upload = rq->body || rq->body_fd >= 0;
  curl_off_t size = 0;
  CURL *curl;
  CURLcode rc;

  memset (rs, 0, sizeof *rs);
  if (load_curl (err) < 0)
    return -1;
  if (upload && rq->body_fd >= 0)
    {
      off_t end = lseek (rq->body_fd, 0, SEEK_END);
      if (end < 0 || lseek (rq->body_fd, 0, SEEK_SET) < 0)
        return esbx_make_error (err, errno, "%s: seek the body", origin);
      size = (curl_off_t)end;
    }
  else if (upload)
    size = (curl_off_t)rq->body_len;
  curl = api.easy_init ();
  if (curl == NULL)
    return esbx_make_error (err, ENOMEM, "%s: curl_easy_init", origin);
  /* Expect: 100-continue would cost a round trip per blob.  */
  headers = api.slist_append (headers, "Expect:");
  if (rq->content_type)
    headers = add_header (headers, "Content-Type", rq->content_type);
  if (rq->accept)
    headers = add_header (headers, "Accept", rq->accept);
  if (rq->auth)
    set_auth (curl, rq->auth, &headers);
  api.easy_setopt (curl, CURLOPT_URL, rq->url);
  api.easy_setopt (curl, CURLOPT_ERRORBUFFER, errbuf);
  api.easy_setopt (curl, CURLOPT_NOSIGNAL, 1L);
  api.easy_setopt (curl, CURLOPT_CONNECTTIMEOUT, CONNECT_TIMEOUT_S);
  api.easy_setopt (curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  api.easy_setopt (curl, CURLOPT_LOW_SPEED_TIME, STALL_TIMEOUT_S);
  api.easy_setopt (curl, CURLOPT_HTTPHEADER, headers);
  api.easy_setopt (curl, CURLOPT_WRITEFUNCTION, on_write);
  api.easy_setopt (curl, CURLOPT_WRITEDATA, &t);
  api.easy_setopt (curl, CURLOPT_HEADERFUNCTION, on_header);
  api.easy_setopt (curl, CURLOPT_HEADERDATA, &t);
  if (strcmp (rq->method, "HEAD") == 0)
    api.easy_setopt (curl, CURLOPT_NOBODY, 1L);
  else if (upload)
    {
      api.easy_setopt (curl, CURLOPT_UPLOAD, 1L);
      api.easy_setopt (curl, CURLOPT_READFUNCTION, on_read);
      api.easy_setopt (curl, CURLOPT_READDATA, &t);
      api.easy_setopt (curl, CURLOPT_INFILESIZE_LARGE, size);
      api.easy_setopt (curl, CURLOPT_CUSTOMREQUEST, rq->method);
    }
  else if (strcmp (rq->method, "GET") != 0)
    {
      /* A POST without a body still says Content-Length: 0.  */
      api.easy_setopt (curl, CURLOPT_POSTFIELDS, "");
      api.easy_setopt (curl, CURLOPT_CUSTOMREQUEST, rq->method);
    }
  rc = api.easy_perform (curl);
  if (rc == CURLE_OK)
    api.easy_getinfo (curl, CURLINFO_RESPONSE_CODE, &rs->status);
  api.easy_cleanup (curl);
  api.slist_free_all (headers);
  if (rc != CURLE_OK)
    {
      _cleanup_free_ char *why = esbx_escape_line (errbuf[0] ? errbuf : api.easy_strerror (rc));
      esbx_http_response_free (rs);
      if (t.write_errno)
        return esbx_make_error (err, t.write_errno, "%s: write the answer", origin);
      return esbx_make_error (err, 0, "%s: %s", origin, why);
    }
  return 0;
}
