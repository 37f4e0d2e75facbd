#include "gateway.h"
#include "auth.h"
#include "gateway_routes.h"
#include "listen.h"
#include "log.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <string.h>
#include <time.h>

/* File writes travel in request bodies; anything larger is refused with 413
   before it is read.  */
#define GATEWAY_MAX_BODY (4u * 1024 * 1024)
#define MAX_SEGMENTS     8

struct esbx_gateway
{
  esbx_store_t *store;
  struct esbx_metrics *metrics;
  struct esbx_audit *audit;
  struct MHD_Daemon *unix_daemon;
  struct MHD_Daemon *tcp_daemon;
  char *socket_path;
};

struct request
{
  struct timespec start;
  char *body;
  size_t len;
  bool too_big;
};

void
esbx_gw_reply_json (struct esbx_gw_ctx *ctx, unsigned status, json_t *doc)
{
  free (ctx->out);
  ctx->out = json_serialize (doc, false, &ctx->out_len);
  ctx->status = status;
  ctx->content_type = "application/json";
  json_free (doc);
}

void
esbx_gw_reply_error (struct esbx_gw_ctx *ctx, unsigned status, int code, const char *fmt, ...)
{
  json_t *o = json_new (JSON_OBJECT);
  _cleanup_free_ char *msg = NULL;
  va_list ap;

  va_start (ap, fmt);
  if (vasprintf (&msg, fmt, ap) < 0)
    abort ();
  va_end (ap);
  json_set_string (o, "error", msg);
  json_set_int (o, "code", code);
  free (ctx->reason);
  ctx->reason = xstrdup (msg);
  esbx_gw_reply_json (ctx, status, o);
}

static double
elapsed (const struct timespec *start)
{
  struct timespec now;

  clock_gettime (CLOCK_MONOTONIC, &now);
  return (double)(now.tv_sec - start->tv_sec) + (double)(now.tv_nsec - start->tv_nsec) / 1e9;
}

/* Match URL against PATTERN segment by segment; '*' captures a name.  */
static bool
match (const char *pattern, const char *url, char *arg, size_t argsz)
{
  const char *p = pattern, *u = url;

  arg[0] = '\0';
  while (*p && *u)
    {
      size_t pl = strcspn (p, "/"), ul = strcspn (u, "/");

      if (pl == 1 && *p == '*')
        {
          if (ul == 0 || ul >= argsz)
            return false;
          memcpy (arg, u, ul);
          arg[ul] = '\0';
        }
      else if (pl != ul || strncmp (p, u, pl) != 0)
        return false;
      p += pl;
      u += ul;
      if (*p != *u)
        return false;
      if (*p == '/')
        p++, u++;
    }
  return *p == '\0' && *u == '\0';
}

static const struct esbx_gw_route *
find_route (const char *method, const char *url, char *arg, size_t argsz, bool *path_known)
{
  size_t i;

  *path_known = false;
  for (i = 0; i < esbx_gw_n_routes; i++)
    if (match (esbx_gw_routes[i].pattern, url, arg, argsz))
      {
        *path_known = true;
        if (strcmp (esbx_gw_routes[i].method, method) == 0)
          return &esbx_gw_routes[i];
      }
  return NULL;
}

static enum MHD_Result
send_answer (struct esbx_gateway *gw, struct MHD_Connection *conn, struct esbx_gw_ctx *ctx,
             const char *endpoint, const char *url, struct request *req)
{
  struct MHD_Response *resp = ctx->stream;
  unsigned status = ctx->status ? ctx->status : MHD_HTTP_OK;
  enum MHD_Result ret;

  if (resp == NULL)
    {
      resp = MHD_create_response_from_buffer (ctx->out_len, ctx->out ? ctx->out : (char *)"",
                                              MHD_RESPMEM_MUST_COPY);
      if (resp == NULL)
        return MHD_NO;
      MHD_add_response_header (resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                               ctx->content_type ? ctx->content_type : "application/json");
    }
  ret = MHD_queue_response (conn, status, resp);
  MHD_destroy_response (resp);
  ctx->stream = NULL;

  esbx_audit_record (gw->audit, ctx->token ? ctx->token->id : NULL, ctx->method, url, status < 400,
                     status, status < 400 ? NULL : ctx->reason);
  esbx_metrics_request (gw->metrics, endpoint, ctx->method, status, elapsed (&req->start));
  if (status >= 400)
    esbx_info ("gateway %s %s token=%s status=%u: %s", ctx->method, url,
               ctx->token ? ctx->token->id : "-", status, ctx->reason ? ctx->reason : "");
  return ret;
}

/* Unknown fields are refused so that a typo never silently does less than
   the caller asked for; handlers check the types of the fields they use.  */
static json_t *
parse_body (struct esbx_gw_ctx *ctx)
{
  esbx_error_t err = NULL;
  json_t *j;

  if (ctx->len == 0)
    return json_new (JSON_OBJECT);
  j = json_parse (ctx->body, ctx->len, &err);
  if (j == NULL)
    {
      esbx_gw_reply_error (ctx, MHD_HTTP_BAD_REQUEST, ESBX_EXIT_USAGE, "invalid JSON body: %s",
                           err->msg);
      esbx_error_free (&err);
      return NULL;
    }
  if (j->type != JSON_OBJECT)
    {
      esbx_gw_reply_error (ctx, MHD_HTTP_BAD_REQUEST, ESBX_EXIT_USAGE,
                           "the body must be a JSON object");
      json_free (j);
      return NULL;
    }
  return j;
}

static void
handle (struct esbx_gateway *gw, struct esbx_gw_ctx *ctx, const char *url, const char **endpoint)
{
  const char *auth = MHD_lookup_connection_value (ctx->conn, MHD_HEADER_KIND, "Authorization");
  const struct esbx_gw_route *route;
  struct esbx_token *token = NULL;
  char arg[256];
  bool path_known;
  char *reason = NULL;

  if (esbx_auth_authenticate (gw->store, auth, &token, &reason) < 0)
    {
      esbx_metrics_auth_failure (gw->metrics);
      esbx_gw_reply_error (ctx, MHD_HTTP_UNAUTHORIZED, ESBX_EXIT_ERROR, "unauthorized: %s", reason);
      free (reason);
      *endpoint = "unauthenticated";
      return;
    }
  ctx->token = token;
  route = find_route (ctx->method, url, arg, sizeof arg, &path_known);
  if (route == NULL)
    {
      if (path_known)
        esbx_gw_reply_error (ctx, MHD_HTTP_METHOD_NOT_ALLOWED, ESBX_EXIT_USAGE,
                             "method %s not allowed on `%s`", ctx->method, url);
      else
        esbx_gw_reply_error (ctx, MHD_HTTP_NOT_FOUND, ESBX_EXIT_USAGE, "no such endpoint `%s`",
                             url);
      *endpoint = "unknown";
      return;
    }
  *endpoint = route->name;
  ctx->arg = arg;
  if (arg[0] && !esbx_name_valid (arg))
    {
      esbx_gw_reply_error (ctx, MHD_HTTP_BAD_REQUEST, ESBX_EXIT_USAGE,
                           "invalid name `%s`: names must match %s", arg, ESBX_NAME_RULE);
      return;
    }
  if (route->json_body && (ctx->json = parse_body (ctx)) == NULL)
    return;
  esbx_auth_resolve_target (ctx, route);
  if (!esbx_auth_authorize (ctx, route, &reason))
    {
      esbx_gw_reply_error (ctx, MHD_HTTP_FORBIDDEN, ESBX_EXIT_ERROR, "forbidden: %s", reason);
      free (reason);
      return;
    }
  route->fn (ctx);
}

static enum MHD_Result
on_request (void *cls, struct MHD_Connection *conn, const char *url, const char *method,
            const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls)
{
  struct esbx_gateway *gw = cls;
  struct request *req = *con_cls;
  struct esbx_gw_ctx ctx = { 0 };
  const char *endpoint = "unknown";
  const char *cl;
  enum MHD_Result ret;

  ctx.store = gw->store;
  ctx.metrics = gw->metrics;
  ctx.conn = conn;
  ctx.method = method;
  if (req == NULL)
    {
      req = xmalloc0 (sizeof *req);
      clock_gettime (CLOCK_MONOTONIC, &req->start);
      *con_cls = req;
      cl = MHD_lookup_connection_value (conn, MHD_HEADER_KIND, "Content-Length");
      if (cl && strtoull (cl, NULL, 10) > GATEWAY_MAX_BODY)
        {
          esbx_gw_reply_error (&ctx, MHD_HTTP_CONTENT_TOO_LARGE, ESBX_EXIT_USAGE,
                               "request body too large (limit %u bytes)", GATEWAY_MAX_BODY);
          ret = send_answer (gw, conn, &ctx, "too_large", url, req);
          free (ctx.out);
          free (ctx.reason);
          return ret;
        }
      return MHD_YES;
    }
  if (*upload_data_size > 0)
    {
      if (!req->too_big && req->len + *upload_data_size <= GATEWAY_MAX_BODY)
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
      esbx_gw_reply_error (&ctx, MHD_HTTP_CONTENT_TOO_LARGE, ESBX_EXIT_USAGE,
                           "request body too large (limit %u bytes)", GATEWAY_MAX_BODY);
      endpoint = "too_large";
    }
  else
    {
      ctx.body = req->body ? req->body : "";
      ctx.len = req->len;
      handle (gw, &ctx, url, &endpoint);
    }
  ret = send_answer (gw, conn, &ctx, endpoint, url, req);
  free (ctx.out);
  free (ctx.reason);
  free (ctx.project);
  free (ctx.session);
  json_free (ctx.json);
  esbx_token_free ((struct esbx_token *)ctx.token);
  return ret;
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
  esbx_warn ("gateway: %s", line);
}

static struct MHD_Daemon *
start_daemon (struct esbx_gateway *gw, int fd)
{
  return MHD_start_daemon (
      MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL,
      NULL, on_request, gw, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_error, gw, MHD_OPTION_LISTEN_SOCKET,
      (MHD_socket)fd, MHD_OPTION_NOTIFY_COMPLETED, on_completed, gw, MHD_OPTION_CONNECTION_TIMEOUT,
      (unsigned int)600, MHD_OPTION_END);
}

int
esbx_gateway_start (esbx_store_t *store, struct esbx_metrics *metrics, struct esbx_audit *audit,
                    const struct esbx_gateway_config *cfg, struct esbx_gateway **out,
                    esbx_error_t *err)
{
  struct esbx_gateway *gw = xmalloc0 (sizeof *gw);
  int fd;

  gw->store = store;
  gw->metrics = metrics;
  gw->audit = audit;
  if (cfg->socket_path)
    {
      fd = esbx_listen_unix (cfg->socket_path, cfg->group, err);
      if (fd < 0)
        goto fail;
      gw->socket_path = xstrdup (cfg->socket_path);
      gw->unix_daemon = start_daemon (gw, fd);
      if (gw->unix_daemon == NULL)
        {
          close (fd);
          esbx_make_error (err, 0, "start the gateway on `%s`", cfg->socket_path);
          goto fail;
        }
    }
  if (cfg->tcp)
    {
      fd = esbx_listen_loopback ("--gateway-tcp", cfg->tcp, err);
      if (fd < 0)
        goto fail;
      gw->tcp_daemon = start_daemon (gw, fd);
      if (gw->tcp_daemon == NULL)
        {
          close (fd);
          esbx_make_error (err, 0, "start the gateway on `%s`", cfg->tcp);
          goto fail;
        }
    }
  *out = gw;
  return 0;
fail:
  esbx_gateway_stop (gw);
  return -1;
}

void
esbx_gateway_stop (struct esbx_gateway *gw)
{
  if (gw == NULL)
    return;
  if (gw->unix_daemon)
    MHD_stop_daemon (gw->unix_daemon);
  if (gw->tcp_daemon)
    MHD_stop_daemon (gw->tcp_daemon);
  if (gw->socket_path)
    unlink (gw->socket_path);
  free (gw->socket_path);
  free (gw);
}
