/* The MCP server at /mcp (routes_mcp.h).  Each MCP session is one
   esbx_mcp_server whose host (mcp.h) is the token that made it: its
   scopes, its project or session limit, and callbacks that ask auth.c and
   grants.c as the route of the same act would (a run is decided as
   POST /v1/sessions/S/exec is, a session_create as POST /v1/sessions).
   A call that asked for progress is answered with an SSE stream, fed by a
   thread of its own while MHD's connection thread waits for its frames; a
   client that goes away does not cancel it (the transport's rule: only
   notifications/cancelled or DELETE does): its frames are dropped, and the
   connection's thread waits for the call's end before it goes.  */
#include "routes_mcp.h"
#include "auth.h"
#include "grants.h"
#include "mcp.h"
#include "routes.h"
#include "text.h"
#include "thread.h"
#include "utils.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

/* An SSE stream with nothing to say says this often that it is alive:
   MHD notices a client that went away when it writes.  */
#define KEEPALIVE_SECONDS 15
#define ENDED_CODE        -32800

struct mcp_session
{
  struct mcp_session *next;
  char *id;
  struct esbx_gateway_mcp *owner;
  struct esbx_token *token; /* a copy of the token that made it */
  struct esbx_mcp_server *srv;
  unsigned refs; /* the list's, and one per request using it */
  time_t used;
};

struct esbx_gateway_mcp
{
  esbx_store_t *store;
  struct esbx_audit *audit;
  uint64_t exec_log_limit;
  pthread_mutex_t lock; /* all below, and every session's REFS and USED */
  struct mcp_session *head;
  size_t n;
};

/* ---- the host: what the token may do ------------------------------------ */

static const struct esbx_gateway_route *
route_named (const char *name)
{
  size_t i;

  for (i = 0; i < esbx_gateway_n_routes; i++)
    if (strcmp (esbx_gateway_routes[i].name, name) == 0)
      return &esbx_gateway_routes[i];
  return NULL;
}

/* The tool's act decided as a request to its route would be.  */
static bool
authorize (void *data, const struct esbx_mcp_act *act, char **reason)
{
  struct mcp_session *ms = data;
  const struct esbx_gateway_route *route = route_named (act->route);
  struct esbx_gateway_route plain;
  struct esbx_gateway_ctx sub = { .store = ms->owner->store, .token = ms->token };
  bool ok;

  if (route == NULL)
    {
      *reason = xasprintf ("no gateway route `%s`", act->route);
      return false;
    }
  /* The content flag is the act's, not a query's.  */
  plain = *route;
  plain.content_flag = NULL;
  sub.method = route->method;
  sub.json = json_new (JSON_OBJECT);
  if (act->project)
    json_set_string (sub.json, "project", act->project);
  sub.arg = act->session ? act->session : "";
  esbx_auth_resolve_target (&sub, &plain);
  sub.content = act->content;
  ok = esbx_auth_authorize (&sub, route, reason);
  free (sub.project);
  free (sub.session);
  free (sub.session_id);
  json_free (sub.json);
  return ok;
}

static bool
grant (void *data, const char *project, struct esbx_session_opts *o, int *lock, char **reason)
{
  struct mcp_session *ms = data;
  struct esbx_gateway_ctx sub = { .store = ms->owner->store, .token = ms->token };

  *lock = -1;
  if (!esbx_grant_network (&sub, project, o->network, reason)
      || !esbx_grant_secrets (&sub, project, o->secrets, reason)
      || !esbx_grant_room (&sub, project, o->network, lock, reason))
    return false;
  o->token = ms->token->id;
  return true;
}

static bool
sees (void *data, const struct esbx_session *s)
{
  struct mcp_session *ms = data;

  return esbx_auth_sees_session (ms->owner->store, ms->token, s);
}

/* Every tool call is audited with the token, as every request is.  */
static void
called (void *data, const struct esbx_mcp_act *act, const char *error, bool refused)
{
  struct mcp_session *ms = data;
  const char *on = act->target;
  _cleanup_free_ char *path = xasprintf ("/mcp/%s%s%s", act->tool, on ? "/" : "", on ? on : "");

  esbx_audit_record (ms->owner->audit, ms->token->id, "MCP", path, !refused,
                     refused ? 403
                     : error ? 400
                             : 200,
                     error);
}

/* ---- MCP sessions ------------------------------------------------------- */

static struct esbx_token *
token_copy (const struct esbx_token *t)
{
  struct esbx_token *c = xmalloc0 (sizeof *c);

  *c = *t;
  c->id = xstrdup (t->id);
  c->project = t->project ? xstrdup (t->project) : NULL;
  c->project_id = t->project_id ? xstrdup (t->project_id) : NULL;
  c->session = t->session ? xstrdup (t->session) : NULL;
  c->session_id = t->session_id ? xstrdup (t->session_id) : NULL;
  c->created = t->created ? xstrdup (t->created) : NULL;
  return c;
}

static void
session_free (struct mcp_session *ms)
{
  esbx_mcp_server_free (ms->srv);
  esbx_token_free (ms->token);
  free (ms->id);
  free (ms);
}

/* Under the owner's lock.  */
static void
unref (struct mcp_session *ms)
{
  if (--ms->refs == 0)
    session_free (ms);
}

static void
session_put (struct mcp_session *ms)
{
  struct esbx_gateway_mcp *m = ms->owner;

  pthread_mutex_lock (&m->lock);
  unref (ms);
  pthread_mutex_unlock (&m->lock);
}

/* Take MS off the list (under the lock): its calls are cancelled, and it
   goes once the requests using it are done.  */
static void
unlist (struct esbx_gateway_mcp *m, struct mcp_session *ms)
{
  struct mcp_session **p;

  for (p = &m->head; *p; p = &(*p)->next)
    if (*p == ms)
      {
        *p = ms->next;
        m->n--;
        esbx_mcp_cancel_all (ms->srv);
        unref (ms);
        return;
      }
}

/* Room for one more session of TOKEN (under the lock): idle sessions past
   their time go, then, at a cap, the one idle longest.  */
static bool
make_room (struct esbx_gateway_mcp *m, const char *token)
{
  struct mcp_session *ms, *next, *oldest = NULL, *oldest_mine = NULL;
  time_t now = time (NULL);
  size_t mine = 0;

  for (ms = m->head; ms; ms = next)
    {
      next = ms->next;
      if (ms->refs == 1 && now - ms->used > ESBX_GATEWAY_MCP_IDLE_SECONDS)
        {
          unlist (m, ms);
          continue;
        }
      if (strcmp (ms->token->id, token) == 0)
        {
          mine++;
          if (ms->refs == 1 && (oldest_mine == NULL || ms->used < oldest_mine->used))
            oldest_mine = ms;
        }
      if (ms->refs == 1 && (oldest == NULL || ms->used < oldest->used))
        oldest = ms;
    }
  if (mine >= ESBX_GATEWAY_MCP_TOKEN_SESSIONS)
    {
      if (oldest_mine == NULL)
        return false;
      unlist (m, oldest_mine);
    }
  else if (m->n >= ESBX_GATEWAY_MCP_SESSIONS)
    {
      if (oldest == NULL)
        return false;
      unlist (m, oldest);
    }
  return true;
}

static struct mcp_session *
session_new (struct esbx_gateway_ctx *ctx, esbx_error_t *err)
{
  struct esbx_gateway_mcp *m = ctx->mcp;
  struct mcp_session *ms = xmalloc0 (sizeof *ms);
  struct esbx_mcp_host host = { 0 };

  ms->owner = m;
  ms->token = token_copy (ctx->token);
  host.store = m->store;
  host.transport = "http";
  host.scopes = ms->token->scopes;
  host.session = ms->token->session;
  host.session_id = ms->token->session_id;
  host.project = ms->token->project;
  host.token = ms->token->id;
  host.exec_log_limit = m->exec_log_limit;
  host.authorize = authorize;
  host.grant_session = grant;
  host.sees = sees;
  host.called = called;
  host.data = ms;
  if (esbx_mcp_server_new (&host, &ms->srv, err) < 0)
    {
      session_free (ms);
      return NULL;
    }
  ms->id = esbx_random_hex (16);
  ms->used = time (NULL);
  ms->refs = 2; /* the list's and the caller's */
  pthread_mutex_lock (&m->lock);
  if (!make_room (m, ms->token->id))
    {
      pthread_mutex_unlock (&m->lock);
      session_free (ms);
      esbx_make_error_kind (err, ESBX_ERR_BUSY, 0,
                            "too many MCP sessions in use: end one (DELETE /mcp) first");
      return NULL;
    }
  ms->next = m->head;
  m->head = ms;
  m->n++;
  pthread_mutex_unlock (&m->lock);
  return ms;
}

/* Session ID, if it is TOKEN's: another token's is as unknown as none.  */
static struct mcp_session *
session_get (struct esbx_gateway_mcp *m, const char *id, const char *token)
{
  struct mcp_session *ms;

  pthread_mutex_lock (&m->lock);
  for (ms = m->head; ms; ms = ms->next)
    if (strcmp (ms->id, id) == 0 && strcmp (ms->token->id, token) == 0)
      {
        ms->refs++;
        ms->used = time (NULL);
        break;
      }
  pthread_mutex_unlock (&m->lock);
  return ms;
}

struct esbx_gateway_mcp *
esbx_gateway_mcp_new (esbx_store_t *store, struct esbx_audit *audit, uint64_t exec_log_limit)
{
  struct esbx_gateway_mcp *m = xmalloc0 (sizeof *m);

  m->store = store;
  m->audit = audit;
  m->exec_log_limit = exec_log_limit;
  pthread_mutex_init (&m->lock, NULL);
  return m;
}

void
esbx_gateway_mcp_cancel (struct esbx_gateway_mcp *m)
{
  struct mcp_session *ms;

  if (m == NULL)
    return;
  pthread_mutex_lock (&m->lock);
  for (ms = m->head; ms; ms = ms->next)
    esbx_mcp_cancel_all (ms->srv);
  pthread_mutex_unlock (&m->lock);
}

void
esbx_gateway_mcp_free (struct esbx_gateway_mcp *m)
{
  if (m == NULL)
    return;
  pthread_mutex_lock (&m->lock);
  while (m->head)
    unlist (m, m->head);
  pthread_mutex_unlock (&m->lock);
  pthread_mutex_destroy (&m->lock);
  free (m);
}

/* ---- answers ------------------------------------------------------------ */

static const char *
header (struct esbx_gateway_ctx *ctx, const char *name)
{
  return MHD_lookup_connection_value (ctx->conn, MHD_HEADER_KIND, name);
}

/* MSG (owned) as the JSON answer, with the session's id when SID.  */
static void
reply_message (struct esbx_gateway_ctx *ctx, unsigned status, json_t *msg, const char *sid)
{
  size_t len;
  char *body = json_serialize (msg, false, &len);

  json_free (msg);
  ctx->stream = MHD_create_response_from_buffer (len, body, MHD_RESPMEM_MUST_FREE);
  if (ctx->stream == NULL)
    {
      free (body);
      return esbx_gateway_reply_fail (ctx, ESBX_ERR_FAILED, ENOMEM, "mcp: cannot make the answer");
    }
  MHD_add_response_header (ctx->stream, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
  if (sid)
    MHD_add_response_header (ctx->stream, "Mcp-Session-Id", sid);
  ctx->status = status;
}

/* A refusal at the transport: HTTP STATUS with a JSON-RPC error.  */
static void __attribute__ ((format (printf, 4, 5)))
refuse (struct esbx_gateway_ctx *ctx, unsigned status, int code, const char *fmt, ...)
{
  _cleanup_free_ char *msg = NULL;
  va_list ap;

  va_start (ap, fmt);
  msg = xvasprintf (fmt, ap);
  va_end (ap);
  free (ctx->reason);
  ctx->reason = xstrdup (msg);
  reply_message (ctx, status, esbx_mcp_error (NULL, code, "%s", msg), NULL);
}

static void
reply_accepted (struct esbx_gateway_ctx *ctx)
{
  ctx->stream = MHD_create_response_from_buffer (0, (void *)"", MHD_RESPMEM_PERSISTENT);
  ctx->status = MHD_HTTP_ACCEPTED;
}

/* ---- where a request may come from -------------------------------------- */

/* HOST is a loopback name, with or without a port.  */
static bool
loopback_host (const char *host, size_t len)
{
  static const char *const names[] = { "localhost", "127.0.0.1", "[::1]" };
  size_t n = host[0] == '[' ? strcspn (host, "]") + 1 : strcspn (host, ":/");
  size_t i;

  if (n > len)
    n = len;
  for (i = 0; i < ARRAY_SIZE (names); i++)
    if (strlen (names[i]) == n && strncasecmp (host, names[i], n) == 0)
      return host[n] == '\0' || host[n] == ':' || host[n] == '/' || n == len;
  return false;
}

/* A web page's script must not reach the gateway through DNS rebinding:
   an Origin header that is not of this host, or a Host header on TCP that
   is not a loopback name, is refused (the TCP listener is on loopback
   only; no browser reaches the unix socket).  */
static bool
from_here (struct esbx_gateway_ctx *ctx, char **why)
{
  const char *origin = header (ctx, "Origin"), *host = header (ctx, "Host");
  const union MHD_ConnectionInfo *ci
      = MHD_get_connection_info (ctx->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  bool unix_socket = ci && ci->client_addr && ci->client_addr->sa_family == AF_UNIX;

  if (origin)
    {
      const char *rest = strncasecmp (origin, "http://", 7) == 0    ? origin + 7
                         : strncasecmp (origin, "https://", 8) == 0 ? origin + 8
                                                                    : NULL;

      if (rest == NULL || !loopback_host (rest, strlen (rest)))
        {
          *why = xasprintf ("Origin `%s` is not this host's: refused (DNS rebinding)", origin);
          return false;
        }
    }
  if (!unix_socket && host && !loopback_host (host, strlen (host)))
    {
      *why = xasprintf ("Host `%s` is not a loopback name: refused (DNS rebinding)", host);
      return false;
    }
  return true;
}

/* ---- SSE: a call that reports progress ---------------------------------- */

struct sse
{
  pthread_mutex_t lock;
  pthread_cond_t cond;
  char *buf;
  size_t len, pos;
  bool done; /* the call has ended: BUF holds its last frame */
  bool gone; /* MHD is done with the stream */
  json_t *msg;
  struct mcp_session *ms;
  struct esbx_thread thread; /* the call's */
};

static void
sse_free (struct sse *x)
{
  pthread_mutex_destroy (&x->lock);
  pthread_cond_destroy (&x->cond);
  json_free (x->msg);
  free (x->buf);
  free (x);
}

/* Under the lock.  */
static void
sse_push (struct sse *x, const json_t *msg)
{
  _cleanup_free_ char *data = NULL, *frame = NULL;
  size_t n, len;

  if (x->gone)
    return;
  data = json_serialize (msg, false, &n);
  frame = xasprintf ("event: message\ndata: %s\n\n", data);
  len = strlen (frame);
  x->buf = xrealloc (x->buf, x->len + len + 1);
  memcpy (x->buf + x->len, frame, len);
  x->len += len;
  pthread_cond_signal (&x->cond);
}

static void
sse_notify (void *data, json_t *msg)
{
  struct sse *x = data;

  pthread_mutex_lock (&x->lock);
  sse_push (x, msg);
  pthread_mutex_unlock (&x->lock);
  json_free (msg);
}

static void *
sse_run (void *data)
{
  struct sse *x = data;
  struct esbx_mcp_io io = { .notify = sse_notify, .data = x };
  json_t *res = esbx_mcp_handle (x->ms->srv, x->msg, &io);

  /* A cancelled call gets no answer: the stream just ends.  */
  pthread_mutex_lock (&x->lock);
  if (res)
    sse_push (x, res);
  x->done = true;
  pthread_cond_signal (&x->cond);
  pthread_mutex_unlock (&x->lock);
  json_free (res);
  session_put (x->ms);
  x->ms = NULL;
  return NULL;
}

static ssize_t
sse_read (void *cls, uint64_t pos, char *buf, size_t max)
{
  static const char keepalive[] = ": keepalive\n\n";
  struct sse *x = cls;
  size_t n;

  (void)pos;
  pthread_mutex_lock (&x->lock);
  while (x->pos == x->len && !x->done)
    {
      struct timespec ts;

      clock_gettime (CLOCK_REALTIME, &ts);
      ts.tv_sec += KEEPALIVE_SECONDS;
      if (pthread_cond_timedwait (&x->cond, &x->lock, &ts) == ETIMEDOUT && x->pos == x->len
          && max >= sizeof keepalive - 1)
        {
          pthread_mutex_unlock (&x->lock);
          memcpy (buf, keepalive, sizeof keepalive - 1);
          return (ssize_t)(sizeof keepalive - 1);
        }
    }
  if (x->pos == x->len)
    {
      pthread_mutex_unlock (&x->lock);
      return MHD_CONTENT_READER_END_OF_STREAM;
    }
  n = x->len - x->pos < max ? x->len - x->pos : max;
  memcpy (buf, x->buf + x->pos, n);
  x->pos += n;
  if (x->pos == x->len)
    x->pos = x->len = 0;
  pthread_mutex_unlock (&x->lock);
  return (ssize_t)n;
}

/* MHD is done with the stream (its end sent, or the client gone): once
   the call has ended too, all of it goes.  */
static void
sse_end (void *cls)
{
  struct sse *x = cls;

  pthread_mutex_lock (&x->lock);
  x->gone = true;
  pthread_mutex_unlock (&x->lock);
  esbx_thread_join (&x->thread);
  sse_free (x);
}

/* Answer MSG (owned) with an SSE stream; false when none could start
   (MSG is still the caller's).  MS's reference passes to the stream.  */
static bool
reply_stream (struct esbx_gateway_ctx *ctx, struct mcp_session *ms, json_t *msg)
{
  struct sse *x = xmalloc0 (sizeof *x);
  esbx_error_t err = NULL;

  pthread_mutex_init (&x->lock, NULL);
  pthread_cond_init (&x->cond, NULL);
  ctx->stream
      = MHD_create_response_from_callback (MHD_SIZE_UNKNOWN, 16 * 1024, sse_read, x, sse_end);
  if (ctx->stream == NULL)
    {
      sse_free (x);
      return false;
    }
  x->ms = ms;
  x->msg = msg;
  if (esbx_thread_start (&x->thread, sse_run, x, "mcp call", &err) < 0)
    {
      /* Nothing runs: the caller answers with JSON instead.  */
      esbx_error_free (&err);
      x->ms = NULL;
      x->msg = NULL;
      x->done = true;
      MHD_destroy_response (ctx->stream);
      ctx->stream = NULL;
      return false;
    }
  MHD_add_response_header (ctx->stream, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
  MHD_add_response_header (ctx->stream, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
  ctx->status = MHD_HTTP_OK;
  return true;
}

/* ---- the routes --------------------------------------------------------- */

static bool
wants_stream (struct esbx_gateway_ctx *ctx, const json_t *msg)
{
  const char *accept = header (ctx, "Accept");
  const char *method = json_get_string (msg, "method");

  return method && strcmp (method, "tools/call") == 0
         && json_get (json_get (json_get (msg, "params"), "_meta"), "progressToken") && accept
         && strstr (accept, "text/event-stream");
}

static void
initialize (struct esbx_gateway_ctx *ctx, json_t *msg)
{
  static const struct esbx_mcp_io none = { 0 };
  struct mcp_session *ms;
  esbx_error_t err = NULL;
  json_t *res;

  ms = session_new (ctx, &err);
  if (ms == NULL)
    {
      refuse (ctx, err->kind == ESBX_ERR_BUSY ? MHD_HTTP_SERVICE_UNAVAILABLE : MHD_HTTP_FORBIDDEN,
              ESBX_MCP_INVALID_REQUEST, "%s", err->msg);
      esbx_error_free (&err);
      return json_free (msg);
    }
  res = esbx_mcp_handle (ms->srv, msg, &none);
  json_free (msg);
  if (json_get (res, "error"))
    {
      pthread_mutex_lock (&ctx->mcp->lock);
      unlist (ctx->mcp, ms);
      pthread_mutex_unlock (&ctx->mcp->lock);
      reply_message (ctx, MHD_HTTP_OK, res, NULL);
    }
  else
    reply_message (ctx, MHD_HTTP_OK, res, ms->id);
  session_put (ms);
}

void
esbx_gateway_mcp_post (struct esbx_gateway_ctx *ctx)
{
  static const struct esbx_mcp_io none = { 0 };
  const char *sid = header (ctx, "Mcp-Session-Id"), *version = header (ctx, "MCP-Protocol-Version");
  const char *method;
  struct mcp_session *ms;
  esbx_error_t err = NULL;
  char *why = NULL;
  json_t *msg, *res;

  if (!from_here (ctx, &why))
    {
      refuse (ctx, MHD_HTTP_FORBIDDEN, ESBX_MCP_INVALID_REQUEST, "forbidden: %s", why);
      return free (why);
    }
  if (ctx->len == 0)
    return refuse (ctx, MHD_HTTP_BAD_REQUEST, ESBX_MCP_PARSE_ERROR,
                   "the body must be one JSON-RPC message");
  msg = json_parse (ctx->body, ctx->len, &err);
  if (msg == NULL)
    {
      refuse (ctx, MHD_HTTP_BAD_REQUEST, ESBX_MCP_PARSE_ERROR, "parse error: %s", err->msg);
      return esbx_error_free (&err);
    }
  if (msg->type != JSON_OBJECT)
    {
      json_free (msg);
      return refuse (ctx, MHD_HTTP_BAD_REQUEST, ESBX_MCP_INVALID_REQUEST,
                     "the body must be one JSON-RPC message (an object; batches are not taken)");
    }
  method = json_get_string (msg, "method");
  if (method && strcmp (method, "initialize") == 0 && json_get (msg, "id"))
    return initialize (ctx, msg);
  if (sid == NULL)
    {
      json_free (msg);
      return refuse (ctx, MHD_HTTP_BAD_REQUEST, ESBX_MCP_INVALID_REQUEST,
                     "header Mcp-Session-Id is required: initialize first");
    }
  if (version && !esbx_mcp_version_supported (version))
    {
      json_free (msg);
      return refuse (ctx, MHD_HTTP_BAD_REQUEST, ESBX_MCP_INVALID_REQUEST,
                     "MCP-Protocol-Version `%s` is not one this server speaks", version);
    }
  ms = session_get (ctx->mcp, sid, ctx->token->id);
  if (ms == NULL)
    {
      json_free (msg);
      return refuse (ctx, MHD_HTTP_NOT_FOUND, ESBX_MCP_INVALID_REQUEST,
                     "no MCP session `%.64s` of token `%s`: initialize again", sid, ctx->token->id);
    }
  if (method == NULL || json_get (msg, "id") == NULL)
    {
      json_free (esbx_mcp_handle (ms->srv, msg, &none));
      json_free (msg);
      session_put (ms);
      return reply_accepted (ctx);
    }
  if (wants_stream (ctx, msg) && reply_stream (ctx, ms, msg))
    return;
  res = esbx_mcp_handle (ms->srv, msg, &none);
  if (res == NULL)
    res = esbx_mcp_error (json_get (msg, "id"), ENDED_CODE, "the request was cancelled");
  json_free (msg);
  session_put (ms);
  reply_message (ctx, MHD_HTTP_OK, res, NULL);
}

void
esbx_gateway_mcp_delete (struct esbx_gateway_ctx *ctx)
{
  const char *sid = header (ctx, "Mcp-Session-Id");
  struct mcp_session *ms;

  if (sid == NULL)
    return refuse (ctx, MHD_HTTP_BAD_REQUEST, ESBX_MCP_INVALID_REQUEST,
                   "header Mcp-Session-Id is required");
  ms = session_get (ctx->mcp, sid, ctx->token->id);
  if (ms == NULL)
    return refuse (ctx, MHD_HTTP_NOT_FOUND, ESBX_MCP_INVALID_REQUEST, "no MCP session `%.64s`",
                   sid);
  pthread_mutex_lock (&ctx->mcp->lock);
  unlist (ctx->mcp, ms);
  unref (ms);
  pthread_mutex_unlock (&ctx->mcp->lock);
  ctx->stream = MHD_create_response_from_buffer (0, (void *)"", MHD_RESPMEM_PERSISTENT);
  ctx->status = MHD_HTTP_NO_CONTENT;
}
