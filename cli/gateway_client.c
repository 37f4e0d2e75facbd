/* Gateway mode: `esbx --host unix:///run/esbx/gateway.sock VERB ...` (or
   $ESBX_HOST, with the bearer token in $ESBX_TOKEN).  Each verb parses its
   arguments as in embedded mode (cmd_*.c) and then becomes one gateway
   request through these functions; the gateway answers with the JSON view
   that `--json` prints, and print.c turns it into the same bytes embedded
   mode prints.  An error comes back with the kind it was made with
   ("kind"), so a remote command exits as an embedded one would.  */
#include "cli.h"
#include "curl.h"
#include "fs.h"
#include "text.h"
#include "utils.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

struct response
{
  long status;
  char *body;
  size_t len;
};

static void
response_free (struct response *r)
{
  free (r->body);
  r->body = NULL;
  r->len = 0;
}

static size_t
on_body (char *data, size_t size, size_t nmemb, void *userdata)
{
  struct response *r = userdata;
  size_t n = size * nmemb;

  r->body = xrealloc (r->body, r->len + n + 1);
  memcpy (r->body + r->len, data, n);
  r->len += n;
  r->body[r->len] = '\0';
  return n;
}

/* FMT with each %s replaced by its argument, percent-encoded.  */
static char *
url_of (const char *fmt, va_list ap)
{
  char *url = xstrdup (""), *next;
  const char *p = fmt, *spec;

  while ((spec = strstr (p, "%s")))
    {
      _cleanup_free_ char *e = esbx_url_escape (va_arg (ap, const char *));

      next = xasprintf ("%s%.*s%s", url, (int)(spec - p), p, e);
      free (url);
      url = next;
      p = spec + 2;
    }
  next = xasprintf ("%s%s", url, p);
  free (url);
  return next;
}

/* unix:///PATH talks to a socket; https://H:P to the gateway's TCP
   listener with TLS, tcp://H:P and http://H:P to one in clear
   (--gateway-tcp-insecure).  */
static int
host_target (const char *host, char **socket_path, char **base, esbx_error_t *err)
{
  if (esbx_has_prefix (host, "unix://"))
    {
      if (host[7] != '/')
        return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                     "--host `%s`: expected unix:///ABSOLUTE/PATH", host);
      *socket_path = xstrdup (host + 7);
      *base = xstrdup ("http://esbx");
      return 0;
    }
  if (esbx_has_prefix (host, "tcp://"))
    {
      *socket_path = NULL;
      *base = xasprintf ("http://%s", host + 6);
      return 0;
    }
  if (esbx_has_prefix (host, "http://") || esbx_has_prefix (host, "https://"))
    {
      *socket_path = NULL;
      *base = xstrdup (host);
      return 0;
    }
  return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                               "--host `%s`: expected unix:///PATH, https://HOST:PORT or "
                               "tcp://HOST:PORT",
                               host);
}

/* Where an answer's body goes: SINK (curl's write callback) with DATA.
 *CURLP, when not NULL, receives the handle for the sink's getinfo.  */
struct sink
{
  size_t (*fn) (char *data, size_t size, size_t nmemb, void *userdata);
  void *data;
  CURL **curlp;
};

static int
call_into (struct esbx_cli *cli, const char *method, const char *path, const char *body, size_t len,
           const char *content_type, const struct sink *sink, long *status, esbx_error_t *err)
{
  _cleanup_free_ char *sock = NULL, *base = NULL, *url = NULL, *auth = NULL, *ctype = NULL;
  const char *token = getenv ("ESBX_TOKEN");
  struct curl_slist *headers = NULL;
  char errbuf[CURL_ERROR_SIZE] = "";
  CURL *curl;
  CURLcode rc;

  if (host_target (cli->host, &sock, &base, err) < 0)
    return -1;
  if (token == NULL || token[0] == '\0')
    return esbx_make_error (
        err, 0, "gateway `%s`: set ESBX_TOKEN to a token from `esbx token create`", cli->host);
  if (esbx_curl_load ("gateway mode", err) < 0)
    return -1;
  url = xasprintf ("%s%s", base, path);
  auth = xasprintf ("Authorization: Bearer %s", token);
  curl = esbx_curl.easy_init ();
  if (curl == NULL)
    return esbx_make_error (err, 0, "gateway: cannot initialise libcurl");
  headers = esbx_curl.slist_append (headers, auth);
  headers = esbx_curl.slist_append (headers, "Expect:");
  if (content_type)
    {
      ctype = xasprintf ("Content-Type: %s", content_type);
      headers = esbx_curl.slist_append (headers, ctype);
    }
  if (sock)
    esbx_curl.easy_setopt (curl, CURLOPT_UNIX_SOCKET_PATH, sock);
  esbx_curl.easy_setopt (curl, CURLOPT_URL, url);
  esbx_curl.easy_setopt (curl, CURLOPT_CUSTOMREQUEST, method);
  esbx_curl.easy_setopt (curl, CURLOPT_HTTPHEADER, headers);
  esbx_curl.easy_setopt (curl, CURLOPT_WRITEFUNCTION, sink->fn);
  esbx_curl.easy_setopt (curl, CURLOPT_WRITEDATA, sink->data);
  if (sink->curlp)
    *sink->curlp = curl;
  esbx_curl.easy_setopt (curl, CURLOPT_ERRORBUFFER, errbuf);
  esbx_curl.easy_setopt (curl, CURLOPT_NOSIGNAL, 1L);
  /* The scheme of --host, and only that: an https gateway is never
     spoken to in clear.  */
  if (esbx_has_prefix (base, "https://"))
    {
      esbx_curl.easy_setopt (curl, CURLOPT_PROTOCOLS_STR, "https");
      if (cli->ca)
        esbx_curl.easy_setopt (curl, CURLOPT_CAINFO, cli->ca);
    }
  else
    esbx_curl.easy_setopt (curl, CURLOPT_PROTOCOLS_STR, "http");
  if (body)
    {
      esbx_curl.easy_setopt (curl, CURLOPT_POSTFIELDS, body);
      esbx_curl.easy_setopt (curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    }
  rc = esbx_curl.easy_perform (curl);
  if (rc == CURLE_OK || rc == CURLE_WRITE_ERROR)
    esbx_curl.easy_getinfo (curl, CURLINFO_RESPONSE_CODE, status);
  esbx_curl.slist_free_all (headers);
  esbx_curl.easy_cleanup (curl);
  if (rc == CURLE_WRITE_ERROR)
    return 1; /* the sink stopped the transfer and says why */
  if (rc != CURLE_OK)
    return esbx_make_error (err, 0, "gateway `%s`: %s", cli->host,
                            errbuf[0] ? errbuf : esbx_curl.easy_strerror (rc));
  return 0;
}

static int
call (struct esbx_cli *cli, const char *method, const char *path, const char *body, size_t len,
      const char *content_type, struct response *r, esbx_error_t *err)
{
  struct sink sink = { .fn = on_body, .data = r };

  return call_into (cli, method, path, body, len, content_type, &sink, &r->status, err);
}

/* An error answer: {"error": MSG, "code": N[, "conflicts": [...]][,
   "unmerged": [...]]}, or a refused rebase's whole view with them.  */
static int
answer_error (struct esbx_cli *cli, const struct response *r, esbx_error_t *err)
{
  esbx_error_t perr = NULL;
  _cleanup_json_ json_t *j = json_parse (r->body ? r->body : "", r->len, &perr);
  if (j == NULL)
    {
      esbx_error_free (&perr);
      return esbx_make_error (err, 0, "gateway: HTTP %ld", r->status);
    }
  if (json_len (json_get (j, "conflicts")) || json_len (json_get (j, "unmerged"))
      || json_get (j, "base"))
    cli_print_refused (cli, j);
  /* The kind the error was made with: a remote command exits as a local
     one would.  */
  return json_get_error (j, "the gateway refused the request", err);
}

static int
request_json (struct esbx_cli *cli, const char *method, const json_t *body, json_t **out,
              esbx_error_t *err, const char *fmt, va_list ap)
{
  _cleanup_free_ char *path = url_of (fmt, ap), *doc = NULL;
  struct response r = { 0 };
  size_t len = 0;
  int ret;

  if (body)
    doc = json_serialize (body, false, &len);
  if (call (cli, method, path, doc, len, body ? "application/json" : NULL, &r, err) < 0)
    return -1;
  if (r.status >= 400)
    ret = answer_error (cli, &r, err);
  else
    {
      *out = json_parse (r.body ? r.body : "", r.len, err);
      ret = *out ? 0 : esbx_error_wrap (err, "gateway answer");
    }
  response_free (&r);
  return ret;
}

int
cli_gateway_json (struct esbx_cli *cli, const char *method, const json_t *body, json_t **out,
                  esbx_error_t *err, const char *fmt, ...)
{
  va_list ap;
  int ret;

  va_start (ap, fmt);
  ret = request_json (cli, method, body, out, err, fmt, ap);
  va_end (ap);
  return ret;
}

int
cli_gateway_print (struct esbx_cli *cli, const char *method, const json_t *body,
                   void (*print) (struct esbx_cli *, const json_t *), const char *key,
                   esbx_error_t *err, const char *fmt, ...)
{
  _cleanup_json_ json_t *j = NULL;
  va_list ap;
  int ret;

  va_start (ap, fmt);
  ret = request_json (cli, method, body, &j, err, fmt, ap);
  va_end (ap);
  if (ret < 0)
    return -1;
  if (print)
    print (cli, j);
  if (key)
    printf ("%s\n", json_get_string (j, key) ? json_get_string (j, key) : "");
  return 0;
}

int
cli_gateway_raw (struct esbx_cli *cli, char **data, size_t *len, esbx_error_t *err, const char *fmt,
                 ...)
{
  _cleanup_free_ char *path = NULL;
  struct response r = { 0 };
  va_list ap;

  va_start (ap, fmt);
  path = url_of (fmt, ap);
  va_end (ap);
  if (call (cli, "GET", path, NULL, 0, NULL, &r, err) < 0)
    return -1;
  if (r.status >= 400)
    {
      int ret = answer_error (cli, &r, err);
      response_free (&r);
      return ret;
    }
  *data = r.body ? r.body : xstrdup ("");
  *len = r.len;
  return 0;
}

/* ---- exec: the output stream (volume-plugin/gateway/routes_exec.c) ------ */

/* A frame is one piece of output: 64 KiB as hex and JSON at most; more is
   not a frame of this gateway.  */
#define MAX_FRAME (1u << 20)

struct relay
{
  CURL *curl;
  struct response error; /* the body of an error answer */
  char *line;            /* a frame not yet complete */
  size_t len;
  bool ended;
  int64_t status;
  char *msg;          /* why the stream is unreadable */
  json_t *ended_with; /* the end frame {"error", "kind", "code"} when it failed */
};

static void
write_hex (const char *h, FILE *stream)
{
  size_t i;

  for (i = 0; h[i] && h[i + 1]; i += 2)
    {
      char byte[3] = { h[i], h[i + 1], 0 };
      fputc ((int)strtoul (byte, NULL, 16), stream);
    }
}

/* One line of the stream: output goes out as it comes, in order.  */
static int
relay_frame (struct relay *r, const char *line, size_t len)
{
  static const struct
  {
    const char *key, *hexkey;
  } streams[2] = { { "stdout", "stdout_hex" }, { "stderr", "stderr_hex" } };
  esbx_error_t perr = NULL;
  _cleanup_json_ json_t *j = json_parse (line, len, &perr);
  const char *s;
  size_t i;

  if (j == NULL || j->type != JSON_OBJECT || r->ended)
    {
      r->msg = xstrdup (j ? "the exec stream goes on after its end" : perr->msg);
      esbx_error_free (&perr);
      return -1;
    }
  for (i = 0; i < 2; i++)
    {
      FILE *stream = i ? stderr : stdout;

      if ((s = json_get_string (j, streams[i].key)))
        fputs (s, stream);
      if ((s = json_get_string (j, streams[i].hexkey)))
        write_hex (s, stream);
      fflush (stream);
    }
  if (json_get_string (j, "error"))
    {
      r->ended = true;
      json_free (r->ended_with);
      r->ended_with = json_copy (j);
    }
  else if (json_get_int (j, "status", &r->status))
    r->ended = true;
  return 0;
}

static size_t
on_exec_data (char *data, size_t size, size_t nmemb, void *userdata)
{
  struct relay *r = userdata;
  size_t n = size * nmemb, start = 0, i;
  long status = 0;

  esbx_curl.easy_getinfo (r->curl, CURLINFO_RESPONSE_CODE, &status);
  if (status >= 400)
    return r->error.len + n > MAX_FRAME ? 0 : on_body (data, size, nmemb, &r->error);
  r->line = xrealloc (r->line, r->len + n + 1);
  memcpy (r->line + r->len, data, n);
  r->len += n;
  for (i = 0; i < r->len; i++)
    if (r->line[i] == '\n')
      {
        if (relay_frame (r, r->line + start, i - start) < 0)
          return 0;
        start = i + 1;
      }
  memmove (r->line, r->line + start, r->len - start);
  r->len -= start;
  if (r->len > MAX_FRAME)
    {
      r->msg = xasprintf ("an exec stream frame is longer than %u bytes", MAX_FRAME);
      return 0;
    }
  return n;
}

int
cli_gateway_exec (struct esbx_cli *cli, const char *session, json_t *body, esbx_error_t *err)
{
  _cleanup_free_ char *e = esbx_url_escape (session), *path = NULL, *doc = NULL;
  struct relay r = { .status = -1 };
  struct sink sink = { .fn = on_exec_data, .data = &r, .curlp = &r.curl };
  long status = 0;
  size_t len;
  int ret;

  json_set (body, "stream", json_new_bool (true));
  doc = json_serialize (body, false, &len);
  path = xasprintf ("/v1/sessions/%s/exec", e);
  fflush (stdout);
  ret = call_into (cli, "POST", path, doc, len, "application/json", &sink, &status, err);
  if (ret >= 0 && status >= 400)
    {
      r.error.status = status;
      ret = answer_error (cli, &r.error, err);
    }
  else if (ret >= 0 && r.ended_with)
    ret = json_get_error (r.ended_with, "", err);
  else if (ret >= 0 && r.msg)
    ret = esbx_make_error (err, 0, "gateway `%s`: %s", cli->host, r.msg);
  else if (ret >= 0 && !r.ended)
    ret = esbx_make_error (err, 0, "gateway `%s`: the exec stream ended before the command did",
                           cli->host);
  else if (ret >= 0)
    ret = (int)r.status;
  response_free (&r.error);
  free (r.line);
  free (r.msg);
  json_free (r.ended_with);
  return ret;
}

/* ---- progress streams (volume-plugin/gateway/progress_stream.h) --------- */

struct progress_relay
{
  CURL *curl;
  struct response error; /* the body of an error answer */
  char *line;            /* a line not yet complete */
  size_t len;
  const char *file;   /* where the payload goes: "-" stdout, NULL none */
  int fd;             /* FILE, open once the result has come */
  json_t *end;        /* the last line: {"result": ...} or {"error": ...} */
  char *phase, *unit; /* of the phase being drawn; NULL: none begun */
  struct esbx_progress *p;
  char *msg; /* why the stream is unreadable */
  int write_errno;
  bool want_nothing; /* the result has come and nothing may follow */
};

/* A report of the gateway, drawn as a local one would be (progress_draw.c),
   at the pace of the local sink.  */
static void
relay_report (struct progress_relay *r, const json_t *j)
{
  const char *phase = json_get_string (j, "phase"), *unit = json_get_string (j, "unit");
  int64_t v;

  if (esbx_progress_get () == NULL || phase == NULL)
    return;
  if (r->phase == NULL || strcmp (r->phase, phase) != 0)
    {
      free (r->phase);
      free (r->unit);
      r->phase = xstrdup (phase);
      r->unit = xstrdup (unit ? unit : "");
      r->p = esbx_progress_begin (r->phase, r->unit, 0);
    }
  if (json_get_int (j, "done", &v))
    r->p->done = (uint64_t)v;
  if (json_get_int (j, "total", &v))
    r->p->total = (uint64_t)v;
  if (json_get_int (j, "bytes", &v))
    r->p->bytes = (uint64_t)v;
  if (json_get_int (j, "in", &v))
    r->p->in = (uint64_t)v;
  if (json_get_int (j, "in_total", &v))
    r->p->in_total = (uint64_t)v;
  if (!json_get_bool (j, "final", false))
    return esbx_progress_tick (r->p);
  esbx_progress_end (r->p);
  free (r->phase);
  r->phase = NULL;
}

static int
payload (struct progress_relay *r, const char *data, size_t n)
{
  if (r->want_nothing)
    {
      r->msg = xstrdup ("the progress stream goes on after its result");
      return -1;
    }
  if (r->fd < 0 || esbx_write_all (r->fd, data, n) < 0)
    {
      r->write_errno = r->fd < 0 ? EINVAL : errno;
      return -1;
    }
  return 0;
}

/* One line before the end.  */
static int
relay_line (struct progress_relay *r, const char *line, size_t len)
{
  esbx_error_t perr = NULL;
  json_t *j = json_parse (line, len, &perr);

  if (j == NULL || j->type != JSON_OBJECT)
    {
      r->msg = xstrdup (j ? "a progress line is not an object" : perr->msg);
      esbx_error_free (&perr);
      json_free (j);
      return -1;
    }
  if (json_get (j, "result") == NULL && json_get (j, "error") == NULL)
    {
      relay_report (r, j);
      json_free (j);
      return 0;
    }
  r->end = j;
  if (json_get (j, "result") && r->file == NULL)
    r->want_nothing = true;
  else if (json_get (j, "result"))
    {
      r->fd = strcmp (r->file, "-") == 0
                  ? STDOUT_FILENO
                  : open (r->file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (r->fd < 0)
        r->write_errno = errno;
    }
  return r->fd < 0 && r->write_errno ? -1 : 0;
}

static size_t
on_progress_data (char *data, size_t size, size_t nmemb, void *userdata)
{
  struct progress_relay *r = userdata;
  size_t n = size * nmemb, start = 0, i;
  long status = 0;

  esbx_curl.easy_getinfo (r->curl, CURLINFO_RESPONSE_CODE, &status);
  if (status >= 400)
    return r->error.len + n > MAX_FRAME ? 0 : on_body (data, size, nmemb, &r->error);
  if (r->end)
    return payload (r, data, n) < 0 ? 0 : n;
  r->line = xrealloc (r->line, r->len + n + 1);
  memcpy (r->line + r->len, data, n);
  r->len += n;
  for (i = 0; i < r->len && r->end == NULL; i++)
    if (r->line[i] == '\n')
      {
        if (relay_line (r, r->line + start, i - start) < 0)
          return 0;
        start = i + 1;
      }
  if (r->end)
    {
      /* The payload begins right after the last line.  */
      if (start < r->len && payload (r, r->line + start, r->len - start) < 0)
        return 0;
      r->len = 0;
      return n;
    }
  memmove (r->line, r->line + start, r->len - start);
  r->len -= start;
  if (r->len > MAX_FRAME)
    {
      r->msg = xasprintf ("a progress line is longer than %u bytes", MAX_FRAME);
      return 0;
    }
  return n;
}

/* How the stream ended: the result, the gateway's error, or why it could
   not be read.  */
static int
progress_end (struct esbx_cli *cli, struct progress_relay *r, long status, json_t **result,
              esbx_error_t *err)
{
  if (status >= 400)
    {
      r->error.status = status;
      return answer_error (cli, &r->error, err);
    }
  if (json_get_string (r->end, "error"))
    return json_get_error (r->end, "", err);
  if (r->write_errno)
    return esbx_make_error (err, r->write_errno, "write `%s`", r->file);
  if (r->msg)
    return esbx_make_error (err, 0, "gateway `%s`: %s", cli->host, r->msg);
  if (r->end == NULL)
    return esbx_make_error (err, 0, "gateway `%s`: the progress stream ended before its result",
                            cli->host);
  for (size_t i = 0; i < json_len (r->end); i++)
    if (strcmp (json_key_at (r->end, i), "result") == 0)
      *result = json_take_at (r->end, i);
  return 0;
}

int
cli_gateway_progress (struct esbx_cli *cli, const char *method, const char *file, json_t **result,
                      esbx_error_t *err, const char *fmt, ...)
{
  _cleanup_free_ char *path = NULL;
  struct progress_relay r = { .file = file, .fd = -1 };
  struct sink sink = { .fn = on_progress_data, .data = &r, .curlp = &r.curl };
  long status = 0;
  va_list ap;
  int ret;

  va_start (ap, fmt);
  path = url_of (fmt, ap);
  va_end (ap);
  fflush (stdout);
  ret = call_into (cli, method, path, NULL, 0, NULL, &sink, &status, err);
  if (ret >= 0)
    ret = progress_end (cli, &r, status, result, err);
  if (r.fd >= 0 && r.fd != STDOUT_FILENO && close (r.fd) < 0 && ret >= 0)
    ret = esbx_make_error (err, errno, "write `%s`", file);
  /* An archive cut short is no archive.  */
  if (ret < 0 && r.fd >= 0 && r.fd != STDOUT_FILENO)
    unlink (file);
  response_free (&r.error);
  json_free (r.end);
  free (r.line);
  free (r.phase);
  free (r.unit);
  free (r.msg);
  return ret;
}
