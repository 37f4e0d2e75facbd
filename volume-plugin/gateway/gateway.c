#include "gateway.h"
#include "auth.h"
#include "fs.h"
#include "http.h"
#include "listen.h"
#include "log.h"
#include "routes.h"
#include "routes_ui.h"
#include "routes_mcp.h"
#include "text.h"
#include "utils.h"

#include <fcntl.h>
#include <string.h>

/* File writes travel in request bodies; anything larger is refused with 413
   before it is read.  */
#define GATEWAY_MAX_BODY (4u * 1024 * 1024)
#define MAX_SEGMENTS     8
/* Seconds a connection may stay idle once its request head is in (an
   upload, an answer the client does not read).  */
#define GATEWAY_TIMEOUT 600

struct esbx_gateway
{
  esbx_store_t *store;
  struct esbx_metrics *metrics;
  struct esbx_audit *audit;
  struct esbx_http_server *unix_server;
  struct esbx_http_server *tcp_server;
  struct esbx_gateway_mcp *mcp;
  char *socket_path;
  char *tls_cert, *tls_key; /* PEM, read at start */
  struct esbx_gateway_config cfg;
};

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

static const struct esbx_gateway_route *
find_route (const char *method, const char *url, char *arg, size_t argsz, bool *path_known)
{
  size_t i;

  *path_known = false;
  for (i = 0; i < esbx_gateway_n_routes; i++)
    if (match (esbx_gateway_routes[i].pattern, url, arg, argsz))
      {
        *path_known = true;
        if (strcmp (esbx_gateway_routes[i].method, method) == 0)
          return &esbx_gateway_routes[i];
      }
  return NULL;
}

/* The method as a metrics label: a client without a token chooses the
   method, and each new label value would be a new series kept forever.  */
static const char *
method_label (const char *method)
{
  static const char *const known[] = { "GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS" };
  size_t i;

  for (i = 0; i < ARRAY_SIZE (known); i++)
    if (strcmp (method, known[i]) == 0)
      return known[i];
  return "other";
}

/* Every request, allowed or refused, is audited and counted; refusals are
   logged too.  */
static void
record (struct esbx_gateway *gw, const struct esbx_http_request *req, struct esbx_gateway_ctx *ctx,
        unsigned status, const char *endpoint)
{
  const char *token = ctx->token ? ctx->token->id : NULL;

  esbx_audit_record (gw->audit, token, ctx->method, req->url, status < 400, status,
                     status < 400 ? NULL : ctx->reason);
  esbx_metrics_request (gw->metrics, endpoint, method_label (ctx->method), status,
                        esbx_http_elapsed (req));
  if (status >= 400)
    esbx_info ("gateway %s %s token=%s status=%u: %s", ctx->method, req->url, token ? token : "-",
               status, ctx->reason ? ctx->reason : "");
}

/* Unknown fields are refused so that a typo never silently does less than
   the caller asked for; handlers check the types of the fields they use.  */
static json_t *
parse_body (struct esbx_gateway_ctx *ctx)
{
  esbx_error_t err = NULL;
  json_t *j;

  if (ctx->len == 0)
    return json_new (JSON_OBJECT);
  j = json_parse (ctx->body, ctx->len, &err);
  if (j == NULL)
    {
      esbx_gateway_reply_fail (ctx, ESBX_ERR_USAGE, 0, "invalid JSON body: %s", err->msg);
      esbx_error_free (&err);
      return NULL;
    }
  if (j->type != JSON_OBJECT)
    {
      esbx_gateway_reply_fail (ctx, ESBX_ERR_USAGE, 0, "the body must be a JSON object");
      json_free (j);
      return NULL;
    }
  return j;
}

/* The token is checked on the request head, before the layer reads a
   byte of the body: a client without a valid token never gets to send one
   (nor to hold a connection busy while it trickles in).  */
static unsigned
admit (void *data, struct MHD_Connection *conn, const char *method, const char *url,
       void **admission, char **why)
{
  struct esbx_gateway *gw = data;
  const char *auth = MHD_lookup_connection_value (conn, MHD_HEADER_KIND, "Authorization");
  struct esbx_token *token = NULL;

  /* The dashboard's page and scripts hold no data: they come without a
     token, and ask for everything with the one the operator types.  */
  if (esbx_gateway_ui_path (method, url))
    {
      *admission = NULL;
      return 0;
    }

  if (esbx_auth_authenticate (gw->store, auth, &token, why) < 0)
    return MHD_HTTP_UNAUTHORIZED;
  *admission = token;
  return 0;
}

static void
free_admission (void *admission)
{
  esbx_token_free (admission);
}

/* A browser sends Origin with every request that changes something: one
   from another origin than the gateway's own (a page elsewhere that the
   operator visits) is refused before anything runs, whatever it carries.
   The token never travels in a cookie, so such a page has none to send
   anyway; this holds even if it had.  Clients that are not browsers send
   no Origin.  */
static bool
cross_site (struct esbx_gateway_ctx *ctx)
{
  const char *origin = MHD_lookup_connection_value (ctx->conn, MHD_HEADER_KIND, "Origin");
  const char *host = MHD_lookup_connection_value (ctx->conn, MHD_HEADER_KIND, "Host");
  const char *site = MHD_lookup_connection_value (ctx->conn, MHD_HEADER_KIND, "Sec-Fetch-Site");
  const char *rest;

  if (strcmp (ctx->method, "GET") == 0 || strcmp (ctx->method, "HEAD") == 0)
    {
      if (site == NULL || strcmp (site, "cross-site") != 0)
        return false;
    }
  else if (origin == NULL && (site == NULL || strcmp (site, "cross-site") != 0))
    return false;
  rest = origin == NULL                         ? NULL
         : strncmp (origin, "http://", 7) == 0  ? origin + 7
         : strncmp (origin, "https://", 8) == 0 ? origin + 8
                                                : NULL;
  if (rest && host && strcmp (rest, host) == 0
      && (site == NULL || strcmp (site, "cross-site") != 0))
    return false;
  esbx_gateway_reply_fail (ctx, ESBX_ERR_FORBIDDEN, 0,
                           "forbidden: a cross-site request (Origin `%s`) is refused",
                           origin ? origin : "-");
  return true;
}

static void
handle (struct esbx_gateway *gw, struct esbx_gateway_ctx *ctx, const char *url,
        const char **endpoint)
{
  const struct esbx_gateway_route *route;
  char arg[256];
  bool path_known;
  char *reason = NULL;

  route = find_route (ctx->method, url, arg, sizeof arg, &path_known);
  if (route == NULL)
    {
      _cleanup_free_ char *msg = path_known
                                     ? xasprintf ("method %s not allowed on `%s`", ctx->method, url)
                                     : xasprintf ("no such endpoint `%s`", url);

      esbx_gateway_reply_refused (
          ctx, path_known ? MHD_HTTP_METHOD_NOT_ALLOWED : MHD_HTTP_NOT_FOUND, ESBX_ERR_USAGE, msg);
      *endpoint = "unknown";
      return;
    }
  *endpoint = route->name;
  ctx->arg = arg;
  /* /mcp checks Origin and Host itself (routes_mcp.c: DNS rebinding).  */
  if (strncmp (route->name, "mcp", 3) != 0 && cross_site (ctx))
    return;
  if (arg[0] && !esbx_name_valid (arg))
    {
      esbx_gateway_reply_fail (ctx, ESBX_ERR_USAGE, 0, "invalid name `%s`: names must match %s",
                               arg, ESBX_NAME_RULE);
      return;
    }
  if (route->json_body && (ctx->json = parse_body (ctx)) == NULL)
    return;
  esbx_auth_resolve_target (ctx, route);
  if (!esbx_auth_authorize (ctx, route, &reason))
    return esbx_gateway_reply_forbidden (ctx, reason);
  route->fn (ctx);
  esbx_auth_bind (ctx);
}

static void
serve (void *data, const struct esbx_http_request *req, struct esbx_http_answer *answer)
{
  struct esbx_gateway *gw = data;
  struct esbx_gateway_ctx ctx = {
    .store = gw->store,
    .metrics = gw->metrics,
    .conn = req->conn,
    .method = req->method,
    .body = req->body,
    .len = req->len,
    .token = req->admission,
    .exec_log_limit = gw->cfg.exec_log_limit,
    .samples = gw->cfg.samples,
    .mcp = gw->mcp,
  };
  const char *endpoint = "unknown";

  /* The gateway takes every method (routing answers 405), so the layer
     refuses only a request without a valid token or with a body over the
     limit, on its head.  */
  if (req->refused == MHD_HTTP_UNAUTHORIZED)
    {
      esbx_metrics_auth_failure (gw->metrics);
      _cleanup_free_ char *msg = xasprintf ("unauthorized: %s", req->why);
      esbx_gateway_reply_refused (&ctx, req->refused, ESBX_ERR_FORBIDDEN, msg);
      endpoint = "unauthenticated";
    }
  else if (req->refused)
    {
      esbx_gateway_reply_refused (&ctx, req->refused, ESBX_ERR_USAGE, req->why);
      endpoint = "too_large";
    }
  else if (esbx_gateway_ui_path (ctx.method, req->url))
    {
      esbx_gateway_ui_asset (&ctx, req->url);
      endpoint = "ui";
    }
  else
    handle (gw, &ctx, req->url, &endpoint);

  answer->status = ctx.status ? ctx.status : MHD_HTTP_OK;
  answer->content_type = ctx.content_type ? ctx.content_type : "application/json";
  answer->body = steal_pointer (&ctx.out);
  answer->len = ctx.out_len;
  answer->stream = steal_pointer (&ctx.stream);
  record (gw, req, &ctx, answer->status, endpoint);
  free (ctx.reason);
  free (ctx.project);
  free (ctx.session);
  free (ctx.session_id);
  json_free (ctx.json);
}

/* Serve the gateway on the listening socket FD (ADDR names it in errors),
   with TLS when TLS.  */
static int
serve_on (struct esbx_gateway *gw, int fd, const char *addr, bool tls,
          struct esbx_http_server **out, esbx_error_t *err)
{
  struct esbx_http_config cfg = {
    .name = "gateway",
    .max_body = GATEWAY_MAX_BODY,
    .timeout = GATEWAY_TIMEOUT,
    .head_timeout = gw->cfg.head_timeout,
    .max_connections = gw->cfg.max_connections,
    .max_waiting_per_client = gw->cfg.max_waiting_per_client,
    .admit = admit,
    .admission_free = free_admission,
    .handler = serve,
    .data = gw,
    .tls_cert = tls ? gw->tls_cert : NULL,
    .tls_key = tls ? gw->tls_key : NULL,
  };

  if (esbx_http_start (fd, &cfg, out, err) < 0)
    return esbx_error_wrap (err, "start the gateway on `%s`", addr);
  return 0;
}

/* The PEM file PATH of option OPT, whole.  */
static char *
read_pem (const char *opt, const char *path, esbx_error_t *err)
{
  _cleanup_free_ char *buf = NULL;
  size_t len;

  if (esbx_read_file_at (AT_FDCWD, path, 1024 * 1024, &buf, &len, err) < 0)
    {
      esbx_error_t e = *err;
      *err = NULL;
      esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "%s: %s", opt, e->msg);
      esbx_error_free (&e);
      return NULL;
    }
  return steal_pointer (&buf);
}

int
esbx_gateway_check_tcp (const struct esbx_gateway_config *cfg, esbx_error_t *err)
{
  if ((cfg->tls_cert == NULL) != (cfg->tls_key == NULL))
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "%s without %s: TLS needs the certificate and its key",
                                 cfg->tls_cert ? "--gateway-tls-cert" : "--gateway-tls-key",
                                 cfg->tls_cert ? "--gateway-tls-key" : "--gateway-tls-cert");
  if (cfg->tcp && cfg->tls_cert)
    {
      _cleanup_free_ char *cert = read_pem ("--gateway-tls-cert", cfg->tls_cert, err);
      _cleanup_free_ char *key = cert ? read_pem ("--gateway-tls-key", cfg->tls_key, err) : NULL;

      if (key)
        explicit_bzero (key, strlen (key));
      return key ? 0 : -1;
    }
  if (cfg->tcp == NULL || cfg->tcp_insecure)
    return 0;
  return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                               "--gateway-tcp `%s`: tokens would cross loopback in clear: give "
                               "--gateway-tls-cert FILE and --gateway-tls-key FILE (or "
                               "gateway-tls-cert and gateway-tls-key in esbxd.conf), or "
                               "--gateway-tcp-insecure",
                               cfg->tcp);
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
  gw->cfg = *cfg;
  if (gw->cfg.max_connections == 0)
    gw->cfg.max_connections = ESBX_GATEWAY_DEFAULT_CONNECTIONS;
  if (gw->cfg.max_waiting_per_client == 0)
    gw->cfg.max_waiting_per_client = ESBX_GATEWAY_DEFAULT_WAITING;
  if (gw->cfg.head_timeout == 0)
    gw->cfg.head_timeout = ESBX_GATEWAY_DEFAULT_HEAD_TIMEOUT;
  gw->mcp = esbx_gateway_mcp_new (store, audit, cfg->exec_log_limit);
  if (esbx_gateway_check_tcp (cfg, err) < 0)
    goto fail;
  if (cfg->tcp && cfg->tls_cert
      && ((gw->tls_cert = read_pem ("--gateway-tls-cert", cfg->tls_cert, err)) == NULL
          || (gw->tls_key = read_pem ("--gateway-tls-key", cfg->tls_key, err)) == NULL))
    goto fail;
  if (cfg->socket_path)
    {
      fd = esbx_listen_unix (cfg->socket_path, cfg->group, err);
      if (fd < 0)
        goto fail;
      gw->socket_path = xstrdup (cfg->socket_path);
      if (serve_on (gw, fd, cfg->socket_path, false, &gw->unix_server, err) < 0)
        goto fail;
    }
  if (cfg->tcp)
    {
      fd = esbx_listen_loopback ("--gateway-tcp", cfg->tcp, err);
      if (fd < 0 || serve_on (gw, fd, cfg->tcp, gw->tls_cert != NULL, &gw->tcp_server, err) < 0)
        goto fail;
      if (gw->tls_cert == NULL)
        esbx_warn ("gateway on `%s` without TLS (--gateway-tcp-insecure): whoever reads loopback "
                   "traffic reads the tokens sent there",
                   cfg->tcp);
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
  esbx_gateway_mcp_cancel (gw->mcp);
  esbx_http_stop (gw->unix_server);
  esbx_http_stop (gw->tcp_server);
  esbx_gateway_mcp_free (gw->mcp);
  if (gw->socket_path)
    esbx_listen_unlink (gw->socket_path);
  free (gw->socket_path);
  if (gw->tls_key)
    explicit_bzero (gw->tls_key, strlen (gw->tls_key));
  free (gw->tls_key);
  free (gw->tls_cert);
  free (gw);
}
