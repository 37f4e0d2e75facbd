#include "plugin.h"
#include "driver.h"
#include "http.h"
#include "listen.h"
#include "log.h"
#include "utils.h"

#include <string.h>
#include <unistd.h>

#define CONTENT_TYPE "application/vnd.docker.plugins.v1.2+json"

struct esbx_plugin
{
  struct esbx_http_server *http;
  char *socket_path;
};

static void
serve (void *data, const struct esbx_http_request *req, struct esbx_http_answer *answer)
{
  struct esbx_driver *driver = data;
  struct esbx_driver_reply reply = { 0 };
  _cleanup_free_ char *msg = NULL;

  if (req->refused == MHD_HTTP_METHOD_NOT_ALLOWED)
    {
      msg = xasprintf ("%s: the plugin protocol uses POST", req->why);
      esbx_driver_reply_error (&reply, req->refused, msg);
    }
  else if (req->refused)
    esbx_driver_reply_error (&reply, req->refused, req->why);
  else
    esbx_driver_serve (driver, req->url, req->body, req->len, &reply);

  answer->status = reply.status ? reply.status : MHD_HTTP_OK;
  answer->content_type = CONTENT_TYPE;
  answer->body = reply.body ? steal_pointer (&reply.body) : xstrdup ("{}");
  answer->len = strlen (answer->body);
  esbx_info ("%s %s volume=%s status=%u result=%s %.1fms", req->method, req->url,
             reply.subject ? reply.subject : "-", answer->status,
             reply.result ? reply.result : "ok", esbx_http_elapsed (req) * 1e3);
  free (reply.subject);
  free (reply.result);
}

int
esbx_plugin_start (const char *socket_path, struct esbx_driver *driver, struct esbx_plugin **out,
                   esbx_error_t *err)
{
  /* Only dockerd talks here (root, mode 0660), in bursts of one connection
     per volume operation: no per-client limit, and kept-alive connections
     may idle as long as a request.  Its own listener, threads and
     connection budget keep it answering whatever floods the gateway.  */
  struct esbx_http_config cfg = {
    .name = "http",
    .post_only = true,
    .max_body = ESBX_PLUGIN_MAX_BODY,
    .timeout = 300,
    .max_connections = ESBX_PLUGIN_MAX_CONNECTIONS,
    .handler = serve,
    .data = driver,
  };
  struct esbx_plugin *p;
  int fd;

  fd = esbx_listen_unix (socket_path, NULL, err);
  if (fd < 0)
    return -1;
  p = xmalloc0 (sizeof *p);
  if (esbx_http_start (fd, &cfg, &p->http, err) < 0)
    {
      esbx_listen_unlink (socket_path);
      free (p);
      return esbx_error_wrap (err, "start the HTTP server on `%s`", socket_path);
    }
  p->socket_path = xstrdup (socket_path);
  *out = p;
  return 0;
}

void
esbx_plugin_stop (struct esbx_plugin *p)
{
  if (p == NULL)
    return;
  esbx_http_stop (p->http);
  esbx_listen_unlink (p->socket_path);
  free (p->socket_path);
  free (p);
}
