/* JSON-RPC 2.0 and the MCP lifecycle: initialize (version negotiation),
   ping, tools/list, tools/call, logging/setLevel, and the notifications
   initialized and cancelled.  A request is checked whole before anything
   runs: a malformed one gets its JSON-RPC error and changes nothing.
   Calls may run on several threads at once; each holds an eventfd that a
   cancellation (or the transport giving up) makes readable.  */
#include "mcp_internal.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* What initialize may settle on, newest first.  */
static const char *const negotiated[] = { "2025-11-25", "2025-06-18" };
/* What an MCP-Protocol-Version header may name: the revisions whose wire
   this server speaks (it answers them all alike).  */
static const char *const known[] = { "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05" };
static const char *const levels[]
    = { "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency" };

#define INSTRUCTIONS                                                                               \
  "esbx sessions are private copy-on-write copies of a project. Work in one: run commands "        \
  "(run), read and change files (file_read, file_write, file_edit, file_list, file_delete), "      \
  "look at what changed (diff), then publish. A publish refused for conflicts names the paths: "   \
  "rebase, fix what it could not merge, resolve, publish again. Nothing leaves the session "       \
  "until it is published."

struct mcp_inflight
{
  struct mcp_inflight *next;
  char *key; /* the request id, serialized */
  int efd;
  bool cancelled;
  bool by_client; /* notifications/cancelled: no answer is due */
};

bool
esbx_mcp_version_supported (const char *v)
{
  size_t i;

  for (i = 0; v && i < ARRAY_SIZE (known); i++)
    if (strcmp (v, known[i]) == 0)
      return true;
  return false;
}

int
esbx_mcp_server_new (const struct esbx_mcp_host *host, struct esbx_mcp_server **out,
                     esbx_error_t *err)
{
  struct esbx_mcp_server *s;
  struct esbx_session *rec = NULL;

  if (host->session)
    {
      if (esbx_session_load (host->store, host->session, &rec, err) < 0)
        return esbx_error_wrap (err, "mcp");
      if (host->session_id && strcmp (host->session_id, rec->id) != 0)
        {
          int r = esbx_make_error_kind (err, ESBX_ERR_FORBIDDEN, 0,
                                        "mcp: session `%s` (id %s) is another session now (id %s)",
                                        host->session, host->session_id, rec->id);
          esbx_session_free (rec);
          return r;
        }
    }
  s = xmalloc0 (sizeof *s);
  s->host = *host;
  s->session_id = rec ? xstrdup (rec->id) : NULL;
  esbx_session_free (rec);
  pthread_mutex_init (&s->lock, NULL);
  s->log_level = 1;
  mcp_tools_load (s);
  *out = s;
  return 0;
}

void
esbx_mcp_server_free (struct esbx_mcp_server *s)
{
  if (s == NULL)
    return;
  mcp_tools_free (s);
  pthread_mutex_destroy (&s->lock);
  free (s->session_id);
  free (s->protocol);
  free (s);
}

json_t *
esbx_mcp_error (const json_t *id, int code, const char *fmt, ...)
{
  json_t *o = json_new (JSON_OBJECT), *e = json_new (JSON_OBJECT);
  _cleanup_free_ char *msg = NULL;
  va_list ap;

  va_start (ap, fmt);
  msg = xvasprintf (fmt, ap);
  va_end (ap);
  json_set_string (o, "jsonrpc", "2.0");
  json_set (o, "id", id ? json_copy (id) : json_new (JSON_NULL));
  json_set_int (e, "code", code);
  json_set_string (e, "message", msg);
  json_set (o, "error", e);
  return o;
}

static json_t *
answer (const json_t *id, json_t *result)
{
  json_t *o = json_new (JSON_OBJECT);

  json_set_string (o, "jsonrpc", "2.0");
  json_set (o, "id", json_copy (id));
  json_set (o, "result", result);
  return o;
}

void
esbx_mcp_cancel_all (struct esbx_mcp_server *s)
{
  struct mcp_inflight *c;

  pthread_mutex_lock (&s->lock);
  s->ending = true;
  for (c = s->calls; c; c = c->next)
    {
      c->cancelled = true;
      eventfd_write (c->efd, 1);
    }
  pthread_mutex_unlock (&s->lock);
}

size_t
esbx_mcp_calls (struct esbx_mcp_server *s)
{
  size_t n;

  pthread_mutex_lock (&s->lock);
  n = s->n_calls;
  pthread_mutex_unlock (&s->lock);
  return n;
}

static void
cancel (struct esbx_mcp_server *s, const json_t *params)
{
  const json_t *id = json_get (params, "requestId");
  _cleanup_free_ char *key = NULL;
  struct mcp_inflight *c;

  if (id == NULL || (id->type != JSON_STRING && id->type != JSON_NUMBER))
    return;
  key = json_serialize (id, false, NULL);
  pthread_mutex_lock (&s->lock);
  for (c = s->calls; c; c = c->next)
    if (strcmp (c->key, key) == 0)
      {
        c->cancelled = c->by_client = true;
        eventfd_write (c->efd, 1);
      }
  pthread_mutex_unlock (&s->lock);
}

static json_t *
initialize (struct esbx_mcp_server *s, const json_t *id, const json_t *params)
{
  const char *asked = json_get_string (params, "protocolVersion");
  const char *version = negotiated[0];
  json_t *res, *caps, *tools, *info;
  size_t i;

  if (asked == NULL)
    return esbx_mcp_error (id, ESBX_MCP_INVALID_PARAMS,
                           "initialize: params.protocolVersion is required");
  for (i = 0; i < ARRAY_SIZE (negotiated); i++)
    if (strcmp (asked, negotiated[i]) == 0)
      version = negotiated[i];
  pthread_mutex_lock (&s->lock);
  if (s->initialized)
    {
      pthread_mutex_unlock (&s->lock);
      return esbx_mcp_error (id, ESBX_MCP_INVALID_REQUEST, "initialize: already initialized");
    }
  s->initialized = true;
  s->protocol = xstrdup (version);
  pthread_mutex_unlock (&s->lock);

  res = json_new (JSON_OBJECT);
  caps = json_new (JSON_OBJECT);
  tools = json_new (JSON_OBJECT);
  info = json_new (JSON_OBJECT);
  json_set_string (res, "protocolVersion", version);
  json_set (tools, "listChanged", json_new_bool (false));
  json_set (caps, "tools", tools);
  json_set (caps, "logging", json_new (JSON_OBJECT));
  json_set (res, "capabilities", caps);
  json_set_string (info, "name", "esbx");
  json_set_string (info, "title", "esbx sessions");
  json_set_string (info, "version", "0.1.0");
  json_set (res, "serverInfo", info);
  json_set_string (res, "instructions", INSTRUCTIONS);
  return answer (id, res);
}

static json_t *
set_level (struct esbx_mcp_server *s, const json_t *id, const json_t *params)
{
  const char *level = json_get_string (params, "level");
  size_t i;

  for (i = 0; level && i < ARRAY_SIZE (levels); i++)
    if (strcmp (level, levels[i]) == 0)
      {
        pthread_mutex_lock (&s->lock);
        s->log_level = (int)i;
        pthread_mutex_unlock (&s->lock);
        return answer (id, json_new (JSON_OBJECT));
      }
  return esbx_mcp_error (id, ESBX_MCP_INVALID_PARAMS,
                         "logging/setLevel: params.level must be one of debug, info, notice, "
                         "warning, error, critical, alert, emergency");
}

/* Register the call ID; NULL with *REFUSAL set when it cannot run.  */
static struct mcp_inflight *
enter (struct esbx_mcp_server *s, const json_t *id, json_t **refusal)
{
  _cleanup_free_ char *key = json_serialize (id, false, NULL);
  struct mcp_inflight *c;

  pthread_mutex_lock (&s->lock);
  for (c = s->calls; c; c = c->next)
    if (strcmp (c->key, key) == 0)
      {
        pthread_mutex_unlock (&s->lock);
        *refusal = esbx_mcp_error (id, ESBX_MCP_INVALID_REQUEST,
                                   "request id %s is in use by a call still running", key);
        return NULL;
      }
  if (s->n_calls >= ESBX_MCP_MAX_CALLS)
    {
      pthread_mutex_unlock (&s->lock);
      *refusal = esbx_mcp_error (id, ESBX_MCP_BUSY, "busy: %u calls are running; try again later",
                                 ESBX_MCP_MAX_CALLS);
      return NULL;
    }
  c = xmalloc0 (sizeof *c);
  c->efd = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (c->efd < 0)
    {
      pthread_mutex_unlock (&s->lock);
      free (c);
      *refusal = esbx_mcp_error (id, ESBX_MCP_INTERNAL_ERROR, "eventfd: %s", strerror (errno));
      return NULL;
    }
  c->key = steal_pointer (&key);
  /* The client is gone: what still starts ends at once.  */
  if (s->ending)
    {
      c->cancelled = true;
      eventfd_write (c->efd, 1);
    }
  c->next = s->calls;
  s->calls = c;
  s->n_calls++;
  pthread_mutex_unlock (&s->lock);
  return c;
}

/* Unregister C; whether the client cancelled it.  */
static bool
leave (struct esbx_mcp_server *s, struct mcp_inflight *c)
{
  struct mcp_inflight **p;
  bool cancelled;

  pthread_mutex_lock (&s->lock);
  for (p = &s->calls; *p; p = &(*p)->next)
    if (*p == c)
      {
        *p = c->next;
        break;
      }
  s->n_calls--;
  cancelled = c->by_client;
  pthread_mutex_unlock (&s->lock);
  close (c->efd);
  free (c->key);
  free (c);
  return cancelled;
}

static json_t *
call_tool (struct esbx_mcp_server *s, const json_t *id, const json_t *params,
           const struct esbx_mcp_io *io)
{
  const char *name = json_get_string (params, "name");
  const json_t *args = json_get (params, "arguments");
  const json_t *token = json_get (json_get (params, "_meta"), "progressToken");
  _cleanup_free_ char *msg = NULL;
  struct mcp_inflight *c;
  json_t *res, *refusal = NULL;
  int code = 0;

  if (name == NULL)
    return esbx_mcp_error (id, ESBX_MCP_INVALID_PARAMS, "tools/call: params.name is required");
  if (args && args->type != JSON_OBJECT && args->type != JSON_NULL)
    return esbx_mcp_error (id, ESBX_MCP_INVALID_PARAMS,
                           "tools/call: params.arguments must be an object");
  if (args && args->type == JSON_NULL)
    args = NULL;
  if (token && token->type != JSON_STRING && token->type != JSON_NUMBER)
    return esbx_mcp_error (id, ESBX_MCP_INVALID_PARAMS,
                           "tools/call: params._meta.progressToken must be a string or a number");
  c = enter (s, id, &refusal);
  if (c == NULL)
    return refusal;
  res = mcp_tools_call (s, name, args, token, c->efd, io, &code, &msg);
  if (leave (s, c))
    {
      /* The client gave up on it: no answer is due.  */
      json_free (res);
      return NULL;
    }
  if (res == NULL)
    return esbx_mcp_error (id, code, "%s", msg);
  return answer (id, res);
}

static bool
valid_id (const json_t *id)
{
  int64_t v;

  return id->type == JSON_STRING || (id->type == JSON_NUMBER && json_int_value (id, &v));
}

json_t *
esbx_mcp_handle (struct esbx_mcp_server *s, const json_t *msg, const struct esbx_mcp_io *io)
{
  const json_t *id = json_get (msg, "id"), *params;
  const char *method = json_get_string (msg, "method"), *v;
  bool ready;

  if (msg == NULL || msg->type != JSON_OBJECT)
    return esbx_mcp_error (NULL, ESBX_MCP_INVALID_REQUEST,
                           msg && msg->type == JSON_ARRAY
                               ? "batches are not taken: send one message at a time"
                               : "a message must be a JSON-RPC 2.0 object");
  v = json_get_string (msg, "jsonrpc");
  if (v == NULL || strcmp (v, "2.0") != 0)
    return esbx_mcp_error (id && valid_id (id) ? id : NULL, ESBX_MCP_INVALID_REQUEST,
                           "`jsonrpc` must be \"2.0\"");
  if (method == NULL)
    {
      /* A response: this server sends no requests, so none is awaited.  */
      if (id && (json_get (msg, "result") || json_get (msg, "error")))
        return NULL;
      return esbx_mcp_error (id && valid_id (id) ? id : NULL, ESBX_MCP_INVALID_REQUEST,
                             "a request needs a `method` string");
    }
  params = json_get (msg, "params");
  if (params && params->type != JSON_OBJECT)
    return id ? esbx_mcp_error (valid_id (id) ? id : NULL, ESBX_MCP_INVALID_PARAMS,
                                "%s: params must be an object", method)
              : NULL;
  if (id == NULL)
    {
      if (strcmp (method, "notifications/cancelled") == 0)
        cancel (s, params);
      return NULL;
    }
  if (!valid_id (id))
    return esbx_mcp_error (NULL, ESBX_MCP_INVALID_REQUEST,
                           "a request id must be a string or an integer");
  if (strcmp (method, "initialize") == 0)
    return initialize (s, id, params);
  if (strcmp (method, "ping") == 0)
    return answer (id, json_new (JSON_OBJECT));
  pthread_mutex_lock (&s->lock);
  ready = s->initialized;
  pthread_mutex_unlock (&s->lock);
  if (!ready)
    return esbx_mcp_error (id, ESBX_MCP_INVALID_REQUEST,
                           "%s: not initialized: send initialize first", method);
  if (strcmp (method, "tools/list") == 0)
    return answer (id, mcp_tools_list (s));
  if (strcmp (method, "tools/call") == 0)
    return call_tool (s, id, params, io);
  if (strcmp (method, "logging/setLevel") == 0)
    return set_level (s, id, params);
  return esbx_mcp_error (id, ESBX_MCP_METHOD_NOT_FOUND, "method `%s` not found", method);
}

json_t *
esbx_mcp_handle_text (struct esbx_mcp_server *s, const char *buf, size_t len,
                      const struct esbx_mcp_io *io)
{
  _cleanup_json_ json_t *msg = NULL;
  esbx_error_t err = NULL;
  json_t *res;

  if (len > ESBX_MCP_MAX_MESSAGE)
    return esbx_mcp_error (NULL, ESBX_MCP_INVALID_REQUEST,
                           "message of %zu bytes refused: the limit is %u", len,
                           ESBX_MCP_MAX_MESSAGE);
  msg = json_parse (buf, len, &err);
  if (msg == NULL)
    {
      res = esbx_mcp_error (NULL, ESBX_MCP_PARSE_ERROR, "parse error: %s", err->msg);
      esbx_error_free (&err);
      return res;
    }
  return esbx_mcp_handle (s, msg, io);
}
