#include "http.h"
#include "listen.h"
#include "fs.h"
#include "json.h"
#include "log.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>

struct esbx_http_server
{
  struct MHD_Daemon *daemon;
  char *socket_path;
  char *content_type;
  esbx_http_handler handler;
  void *data;
};

/* Per-request state, from the first callback until MHD reports completion.  */
struct request
{
  struct timespec start;
  char *body;
  size_t len;
  bool too_big;
};

void
esbx_http_reply_error (struct esbx_http_reply *reply, unsigned status, const char *msg)
{
  _cleanup_json_ json_t *j = json_new (JSON_OBJECT);

  /* dockerd treats an empty Err as success.  */
  json_set_string (j, "Err", msg && *msg ? msg : "unknown error");
  free (reply->body);
  reply->body = json_serialize (j, false, NULL);
  free (reply->result);
  reply->result = xstrdup (msg && *msg ? msg : "unknown error");
  reply->status = status;
}

static double
elapsed_ms (const struct timespec *start)
{
  struct timespec now;

  clock_gettime (CLOCK_MONOTONIC, &now);
  return (double)(now.tv_sec - start->tv_sec) * 1e3 + (double)(now.tv_nsec - start->tv_nsec) / 1e6;
}

static enum MHD_Result
send_reply (struct esbx_http_server *srv, struct MHD_Connection *conn, const char *method,
            const char *url, struct request *req, struct esbx_http_reply *reply)
{
  struct MHD_Response *resp;
  enum MHD_Result ret;
  const char *body = reply->body ? reply->body : "{}";

  resp = MHD_create_response_from_buffer (strlen (body), (void *)body, MHD_RESPMEM_MUST_COPY);
  if (resp == NULL)
    return MHD_NO;
  MHD_add_response_header (resp, MHD_HTTP_HEADER_CONTENT_TYPE, srv->content_type);
  ret = MHD_queue_response (conn, reply->status ? reply->status : MHD_HTTP_OK, resp);
  MHD_destroy_response (resp);

  esbx_info ("%s %s volume=%s status=%u result=%s %.1fms", method, url,
             reply->subject ? reply->subject : "-", reply->status ? reply->status : 200,
             reply->result ? reply->result : "ok", elapsed_ms (&req->start));
  free (reply->body);
  free (reply->subject);
  free (reply->result);
  return ret;
}

static bool
declared_too_big (struct MHD_Connection *conn)
{
  const char *cl = MHD_lookup_connection_value (conn, MHD_HEADER_KIND, "Content-Length");
  unsigned long long n;
  char *end;

  if (cl == NULL)
    return false;
  errno = 0;
  n = strtoull (cl, &end, 10);
  return errno != 0 || *end != '\0' || n > ESBX_HTTP_MAX_BODY;
}

static enum MHD_Result
on_request (void *cls, struct MHD_Connection *conn, const char *url, const char *method,
            const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls)
{
  struct esbx_http_server *srv = cls;
  struct esbx_http_reply reply = { 0 };
  struct request *req = *con_cls;
  _cleanup_free_ char *msg = NULL;

  if (req == NULL)
    {
      req = xmalloc0 (sizeof *req);
      clock_gettime (CLOCK_MONOTONIC, &req->start);
      *con_cls = req;
      /* Answer before the body is sent: MHD then skips it (and curl's
         Expect: 100-continue never gets its 100).  */
      if (strcmp (method, MHD_HTTP_METHOD_POST) != 0)
        {
          msg = xasprintf ("method %s not allowed: the plugin protocol uses POST", method);
          esbx_http_reply_error (&reply, MHD_HTTP_METHOD_NOT_ALLOWED, msg);
          return send_reply (srv, conn, method, url, req, &reply);
        }
      if (declared_too_big (conn))
        {
          msg = xasprintf ("request body too large (limit %u bytes)", ESBX_HTTP_MAX_BODY);
          esbx_http_reply_error (&reply, MHD_HTTP_CONTENT_TOO_LARGE, msg);
          return send_reply (srv, conn, method, url, req, &reply);
        }
      return MHD_YES;
    }

  if (*upload_data_size > 0)
    {
      /* Chunked bodies have no Content-Length: count as they come and keep
         draining after the limit so that the answer can still be sent.  */
      if (!req->too_big && req->len + *upload_data_size <= ESBX_HTTP_MAX_BODY)
        {
          req->body = xrealloc (req->body, req->len + *upload_data_size + 1);
          memcpy (req->body + req->len, upload_data, *upload_data_size);
          req->len += *upload_data_size;
          req->body[req->len] = '\0';
        }
      else
        {
          req->too_big = true;
          free (req->body);
          req->body = NULL;
          req->len = 0;
        }
      *upload_data_size = 0;
      return MHD_YES;
    }

  if (req->too_big)
    {
      msg = xasprintf ("request body too large (limit %u bytes)", ESBX_HTTP_MAX_BODY);
      esbx_http_reply_error (&reply, MHD_HTTP_CONTENT_TOO_LARGE, msg);
      return send_reply (srv, conn, method, url, req, &reply);
    }
  srv->handler (srv->data, url, req->body ? req->body : "", req->len, &reply);
  return send_reply (srv, conn, method, url, req, &reply);
}

static void
on_completed (void *cls, struct MHD_Connection *conn, void **con_cls,
              enum MHD_RequestTerminationCode toe)
{
  struct request *req = *con_cls;

  if (req == NULL)
    return;
  free (req->body);
  free (req);
  *con_cls = NULL;
}

static void
on_mhd_error (void *cls, const char *fmt, va_list ap)
{
  char line[1024];

  vsnprintf (line, sizeof line, fmt, ap);
  line[strcspn (line, "\n")] = '\0';
  esbx_warn ("http: %s", line);
}

int
esbx_http_start (const char *socket_path, const char *content_type, esbx_http_handler handler,
                 void *data, struct esbx_http_server **out, esbx_error_t *err)
{
  struct esbx_http_server *srv;
  int fd;

  fd = esbx_listen_unix (socket_path, NULL, err);
  if (fd < 0)
    return -1;
  srv = xmalloc0 (sizeof *srv);
  srv->socket_path = xstrdup (socket_path);
  srv->content_type = xstrdup (content_type);
  srv->handler = handler;
  srv->data = data;
  srv->daemon = MHD_start_daemon (
      MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL,
      NULL, on_request, srv, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_error, srv,
      MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd, MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv,
      MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)300, MHD_OPTION_END);
  if (srv->daemon == NULL)
    {
      close (fd);
      unlink (socket_path);
      free (srv->socket_path);
      free (srv->content_type);
      free (srv);
      return esbx_make_error (err, 0, "start the HTTP server on `%s`", socket_path);
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
  unlink (srv->socket_path);
  free (srv->socket_path);
  free (srv->content_type);
  free (srv);
}
