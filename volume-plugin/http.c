#include "http.h"
#include "log.h"
#include "utils.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct esbx_http_server
{
  struct MHD_Daemon *daemon;
  struct esbx_http_config cfg;
};

/* Per-request state, from the first callback until MHD reports completion.  */
struct request
{
  struct timespec start;
  char *body;
  size_t len;
  bool too_big;
};

double
esbx_http_elapsed (const struct esbx_http_request *req)
{
  struct timespec now;

  clock_gettime (CLOCK_MONOTONIC, &now);
  return (double)(now.tv_sec - req->start.tv_sec)
         + (double)(now.tv_nsec - req->start.tv_nsec) / 1e9;
}

/* MHD refuses a Content-Length that is not a number before this runs; the
   strict parse only keeps anything it lets through from passing as small.  */
static bool
declared_too_big (const struct esbx_http_config *cfg, struct MHD_Connection *conn)
{
  const char *cl = MHD_lookup_connection_value (conn, MHD_HEADER_KIND, "Content-Length");
  unsigned long long n;
  char *end;

  if (cl == NULL)
    return false;
  errno = 0;
  n = strtoull (cl, &end, 10);
  return errno != 0 || *end != '\0' || n > cfg->max_body;
}

/* Hand the request to the server's handler and queue what it answers.  */
static enum MHD_Result
answer (struct esbx_http_server *srv, struct MHD_Connection *conn, const char *method,
        const char *url, const struct request *st, unsigned refused)
{
  struct esbx_http_request req = {
    .conn = conn,
    .method = method,
    .url = url,
    .body = st->body ? st->body : "",
    .len = st->len,
    .start = st->start,
    .refused = refused,
  };
  struct esbx_http_answer ans = { 0 };
  _cleanup_free_ char *why = NULL;
  struct MHD_Response *resp;
  enum MHD_Result ret;

  if (refused == MHD_HTTP_METHOD_NOT_ALLOWED)
    why = xasprintf ("method %s not allowed", method);
  else if (refused == MHD_HTTP_CONTENT_TOO_LARGE)
    why = xasprintf ("request body too large (limit %zu bytes)", srv->cfg.max_body);
  req.why = why;
  srv->cfg.handler (srv->cfg.data, &req, &ans);

  resp = ans.stream;
  if (resp == NULL)
    {
      resp = MHD_create_response_from_buffer (ans.len, ans.body ? ans.body : (char *)"",
                                              MHD_RESPMEM_MUST_COPY);
      if (resp && ans.content_type)
        MHD_add_response_header (resp, MHD_HTTP_HEADER_CONTENT_TYPE, ans.content_type);
    }
  free (ans.body);
  if (resp == NULL)
    return MHD_NO;
  ret = MHD_queue_response (conn, ans.status ? ans.status : MHD_HTTP_OK, resp);
  MHD_destroy_response (resp);
  return ret;
}

static enum MHD_Result
on_request (void *cls, struct MHD_Connection *conn, const char *url, const char *method,
            const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls)
{
  struct esbx_http_server *srv = cls;
  struct request *st = *con_cls;

  if (st == NULL)
    {
      st = xmalloc0 (sizeof *st);
      clock_gettime (CLOCK_MONOTONIC, &st->start);
      *con_cls = st;
      /* Answer before the body is sent: MHD then skips it (and curl's
         Expect: 100-continue never gets its 100).  */
      if (srv->cfg.post_only && strcmp (method, MHD_HTTP_METHOD_POST) != 0)
        return answer (srv, conn, method, url, st, MHD_HTTP_METHOD_NOT_ALLOWED);
      if (declared_too_big (&srv->cfg, conn))
        return answer (srv, conn, method, url, st, MHD_HTTP_CONTENT_TOO_LARGE);
      return MHD_YES;
    }

  if (*upload_data_size > 0)
    {
      /* Chunked bodies have no Content-Length: count as they come and keep
         draining after the limit so that the answer can still be sent.  */
      if (!st->too_big && st->len + *upload_data_size <= srv->cfg.max_body)
        {
          st->body = xrealloc (st->body, st->len + *upload_data_size + 1);
          memcpy (st->body + st->len, upload_data, *upload_data_size);
          st->len += *upload_data_size;
          st->body[st->len] = '\0';
        }
      else
        {
          st->too_big = true;
          free (st->body);
          st->body = NULL;
          st->len = 0;
        }
      *upload_data_size = 0;
      return MHD_YES;
    }

  return answer (srv, conn, method, url, st, st->too_big ? MHD_HTTP_CONTENT_TOO_LARGE : 0);
}

static void
on_completed (void *cls, struct MHD_Connection *conn, void **con_cls,
              enum MHD_RequestTerminationCode toe)
{
  struct request *st = *con_cls;

  if (st == NULL)
    return;
  free (st->body);
  free (st);
  *con_cls = NULL;
}

/* Marked printf-like for -Wformat-nonliteral: FMT is libmicrohttpd's, never a
   request's.  */
static void __attribute__ ((format (printf, 2, 0)))
on_mhd_error (void *cls, const char *fmt, va_list ap)
{
  struct esbx_http_server *srv = cls;
  char line[1024];

  vsnprintf (line, sizeof line, fmt, ap);
  line[strcspn (line, "\n")] = '\0';
  esbx_warn ("%s: %s", srv->cfg.name, line);
}

int
esbx_http_start (int fd, const struct esbx_http_config *cfg, struct esbx_http_server **out,
                 esbx_error_t *err)
{
  struct esbx_http_server *srv = xmalloc0 (sizeof *srv);

  srv->cfg = *cfg;
  srv->daemon = MHD_start_daemon (
      MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL,
      NULL, on_request, srv, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_error, srv,
      MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd, MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv,
      MHD_OPTION_CONNECTION_TIMEOUT, cfg->timeout, MHD_OPTION_END);
  if (srv->daemon == NULL)
    {
      close (fd);
      free (srv);
      return esbx_make_error (err, 0, "libmicrohttpd did not start");
    }
  *out = srv;
  return 0;
}

void
esbx_http_stop (struct esbx_http_server *srv)
{
  if (srv == NULL)
    return;
  /* Closes the listening socket too: MHD owns what it was given.  */
  MHD_stop_daemon (srv->daemon);
  free (srv);
}
