/* The gateway's session routes: listing, lifecycle (create, publish,
   rebase, discard) and what `observe` may see of a session (inspect, diff,
   events, ps), as the CLI verbs print them.  */
#include "routes_sessions.h"
#include "auth.h"
#include "egress.h"
#include "events.h"
#include "grants.h"
#include "http.h"
#include "metrics.h"
#include "ps.h"
#include "routes_snapshots.h"
#include "sandbox.h"
#include "secret_redact.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define FOLLOW_INTERVAL_MS 200

static bool
token_sees_session (const struct esbx_session *s, const void *data)
{
  const struct esbx_gateway_ctx *ctx = data;

  return esbx_auth_sees_session (ctx->store, ctx->token, s);
}

void
esbx_gateway_session_list (struct esbx_gateway_ctx *ctx)
{
  const char *project = esbx_gateway_query (ctx, "project");
  esbx_error_t err = NULL;

  if (project && esbx_check_name ("project", project, &err) < 0)
    return esbx_gateway_reply_err (ctx, &err);
  esbx_gateway_reply_view (
      ctx, esbx_sandbox_list (ctx->store, project, token_sees_session, ctx, &err), &err);
}

/* The body's "env" object (checked: all strings) as "K=V" strings; each
   key is checked first, or {"A=B": "c"} would pass as A.  */
static int
session_env (const json_t *obj, char ***out, esbx_error_t *err)
{
  size_t i, n = json_len (obj);
  char **env = xmalloc0 ((n + 1) * sizeof *env);
  const json_t *v;
  const char *key;

  *out = env;
  json_object_foreach (obj, i, key, v)
    {
      if (esbx_session_env_check (key, v->text, err) < 0)
        return -1;
      env[i] = xasprintf ("%s=%s", key, v->text);
    }
  return 0;
}

void
esbx_gateway_session_create (struct esbx_gateway_ctx *ctx)
{
  static const char *const fields[]
      = { "project", "name",  "base",       "labels",   "network",  "workspace", "memory",
          "pids",    "cpus",  "env",        "ttl",      "idle_ttl", "snapshot",  "on_expiry",
          "secrets", "allow", "tmpfs_size", "shm_size", "disk",     NULL };
  struct esbx_session_opts o = { 0 };
  _cleanup_free_ char **labels = NULL, **secrets = NULL, **allow = NULL;
  _cleanup_strv_ char **env = NULL;
  _cleanup_free_ char *name = NULL;
  _cleanup_close_ int lock = -1;
  const char *project, *s;
  esbx_error_t err = NULL;
  char *reason = NULL;

  if (esbx_gateway_check_body (ctx, fields, "sssasssssossssaasss") < 0)
    return;
  if (session_env (json_get (ctx->json, "env"), &env, &err) < 0)
    return esbx_gateway_reply_err (ctx, &err);
  o.env = env;
  project = json_get_string (ctx->json, "project");
  if (project == NULL)
    return esbx_gateway_reply_fail (ctx, ESBX_ERR_USAGE, 0, "field `project` is required");
  o.name = json_get_string (ctx->json, "name");
  o.base = json_get_string (ctx->json, "base");
  o.network = json_get_string (ctx->json, "network");
  if (!esbx_grant_network (ctx, project, o.network, &reason))
    return esbx_gateway_reply_forbidden (ctx, reason);
  o.workspace = json_get_string (ctx->json, "workspace");
  o.cpus = json_get_string (ctx->json, "cpus");
  labels = esbx_gateway_strings (json_get (ctx->json, "labels"));
  o.labels = labels;
  secrets = esbx_gateway_strings (json_get (ctx->json, "secrets"));
  o.secrets = secrets;
  if (!esbx_grant_secrets (ctx, project, secrets, &reason))
    return esbx_gateway_reply_forbidden (ctx, reason);
  /* Checked by the store as the CLI's --allow: a bad entry is a 400.  */
  allow = esbx_gateway_strings (json_get (ctx->json, "allow"));
  o.allow = allow;
  if ((s = json_get_string (ctx->json, "memory")) && esbx_parse_size (s, &o.memory, &err) < 0)
    return esbx_gateway_reply_err (ctx, &err);
  if ((s = json_get_string (ctx->json, "pids")) && esbx_parse_size (s, &o.pids, &err) < 0)
    return esbx_gateway_reply_err (ctx, &err);
  if ((s = json_get_string (ctx->json, "tmpfs_size"))
      && esbx_parse_tmpfs_size ("tmpfs_size", s, &o.tmpfs_size, &err) < 0)
    return esbx_gateway_reply_err (ctx, &err);
  if ((s = json_get_string (ctx->json, "shm_size"))
      && esbx_parse_tmpfs_size ("shm_size", s, &o.shm_size, &err) < 0)
    return esbx_gateway_reply_err (ctx, &err);
  if (esbx_gateway_lifetime_opts (ctx, &o, &err) < 0)
    return esbx_gateway_reply_err (ctx, &err);
  if ((s = json_get_string (ctx->json, "disk")) && esbx_disk_size_parse (s, &o.disk, &err) < 0)
    return esbx_gateway_reply_err (ctx, &err);
  if (!esbx_grant_disk (ctx, project, o.disk, &reason))
    return esbx_gateway_reply_forbidden (ctx, reason);
  /* Counted and made under the token's lock: the last place is taken
     once.  */
  if (!esbx_grant_room (ctx, project, o.network, &lock, &reason))
    return esbx_gateway_reply_forbidden (ctx, reason);
  o.token = ctx->token->id;
  if (esbx_sandbox_create (ctx->store, project, &o, &name, &err) < 0)
    return esbx_gateway_reply_err (ctx, &err);
  esbx_gateway_reply_string (ctx, MHD_HTTP_CREATED, "name", name);
}

void
esbx_gateway_session_inspect (struct esbx_gateway_ctx *ctx)
{
  esbx_error_t err = NULL;

  esbx_gateway_reply_view (ctx, esbx_sandbox_inspect (ctx->store, ctx->arg, &err), &err);
}

void
esbx_gateway_session_path (struct esbx_gateway_ctx *ctx)
{
  _cleanup_free_ char *merged = NULL;
  esbx_error_t err = NULL;

  if (esbx_sandbox_view_acquire (ctx->store, ctx->arg, &merged, &err) < 0)
    return esbx_gateway_reply_err (ctx, &err);
  esbx_gateway_reply_string (ctx, MHD_HTTP_OK, "path", merged);
}

void
esbx_gateway_session_discard (struct esbx_gateway_ctx *ctx)
{
  bool force = esbx_gateway_query_flag (ctx->conn, "force");
  esbx_error_t err = NULL;

  if (esbx_sandbox_discard (ctx->store, ctx->arg, force ? ESBX_DISCARD_FORCE : 0, &err) < 0)
    return esbx_gateway_reply_err (ctx, &err);
  esbx_gateway_reply_json (ctx, MHD_HTTP_OK, json_new (JSON_OBJECT));
}

void
esbx_gateway_session_diff (struct esbx_gateway_ctx *ctx)
{
  struct esbx_changeset cs = { 0 }, ignored = { 0 };
  bool want_ignored;
  esbx_error_t err = NULL;
  json_t *arr;

  if (ctx->content)
    {
      _cleanup_close_ int fd = memfd_create ("esbx-patch", MFD_CLOEXEC);
      _cleanup_file_ FILE *f = NULL;

      if (fd < 0 || (f = fdopen (fcntl (fd, F_DUPFD_CLOEXEC, 3), "w")) == NULL)
        return esbx_gateway_reply_fail (ctx, ESBX_ERR_FAILED, errno, "memfd: %s", strerror (errno));
      if (esbx_session_patch (ctx->store, ctx->arg, f, &err) < 0)
        return esbx_gateway_reply_err (ctx, &err);
      fflush (f);
      return esbx_gateway_reply_file (ctx, fd, "text/x-diff; charset=utf-8");
    }
  want_ignored = esbx_gateway_query_flag (ctx->conn, "ignored");
  if (esbx_session_diff (
          ctx->store, ctx->arg,
          esbx_gateway_query_flag (ctx->conn, "include_ignored") ? ESBX_CHANGES_INCLUDE_IGNORED : 0,
          &cs, want_ignored ? &ignored : NULL, &err)
          < 0
      || esbx_redact_changes (ctx->store, ctx->arg, want_ignored ? &ignored : &cs, &err) < 0)
    {
      esbx_changeset_free (&cs);
      esbx_changeset_free (&ignored);
      return esbx_gateway_reply_err (ctx, &err);
    }
  arr = esbx_changeset_json (want_ignored ? &ignored : &cs);
  esbx_changeset_free (&cs);
  esbx_changeset_free (&ignored);
  esbx_gateway_reply_json (ctx, MHD_HTTP_OK, arr);
}

static int
collect_event (const json_t *ev, void *data)
{
  json_t *arr = data;
  _cleanup_free_ char *s = json_serialize (ev, false, NULL);
  esbx_error_t err = NULL;
  json_t *copy = json_parse (s, strlen (s), &err);

  esbx_error_free (&err);
  if (copy)
    json_append (arr, copy);
  return 0;
}

/* The follow stream: JSON lines until the session is discarded.  */
struct follow
{
  esbx_store_t *store;
  char *session;
  off_t offset;
  char *pending;
  size_t len, pos;
};

static int
append_line (const json_t *ev, void *data)
{
  struct follow *f = data;
  size_t l;
  _cleanup_free_ char *s = json_serialize (ev, false, &l);

  f->pending = xrealloc (f->pending, f->len + l + 1);
  memcpy (f->pending + f->len, s, l);
  f->pending[f->len + l] = '\n';
  f->len += l + 1;
  return 0;
}

static ssize_t
follow_read (void *cls, uint64_t pos, char *buf, size_t max)
{
  struct follow *f = cls;
  esbx_error_t err = NULL;
  size_t n;

  while (f->pos == f->len)
    {
      struct timespec ts = { 0, FOLLOW_INTERVAL_MS * 1000000L };

      free (f->pending);
      f->pending = NULL;
      f->len = f->pos = 0;
      if (esbx_events_read (f->store, f->session, &f->offset, append_line, f, &err) < 0)
        esbx_error_free (&err);
      if (f->len)
        break;
      if (!esbx_session_exists (f->store, f->session))
        return MHD_CONTENT_READER_END_OF_STREAM;
      nanosleep (&ts, NULL);
    }
  n = f->len - f->pos < max ? f->len - f->pos : max;
  memcpy (buf, f->pending + f->pos, n);
  f->pos += n;
  return (ssize_t)n;
}

static void
follow_free (void *cls)
{
  struct follow *f = cls;
  free (f->session);
  free (f->pending);
  free (f);
}

void
esbx_gateway_session_events (struct esbx_gateway_ctx *ctx)
{
  const char *off = esbx_gateway_query (ctx, "offset"),
             *follow = esbx_gateway_query (ctx, "follow");
  esbx_error_t err = NULL;
  off_t offset = 0;
  json_t *arr, *o;
  char *end;

  if (esbx_gateway_session_must_exist (ctx) < 0)
    return;
  /* As `esbx events`: what the kernel and the resolver refused so far
     becomes events now.  */
  esbx_egress_record_refused (ctx->store, ctx->arg);
  if (off)
    {
      errno = 0;
      offset = (off_t)strtoll (off, &end, 10);
      if (*off == '\0' || *end || errno || offset < 0)
        return esbx_gateway_reply_fail (ctx, ESBX_ERR_USAGE, 0,
                                        "query parameter `offset` must be a byte offset");
    }
  if (follow && strcmp (follow, "0") != 0 && strcmp (follow, "false") != 0)
    {
      struct follow *f = xmalloc0 (sizeof *f);
      f->store = ctx->store;
      f->session = xstrdup (ctx->arg);
      f->offset = offset;
      ctx->stream
          = MHD_create_response_from_callback (MHD_SIZE_UNKNOWN, 4096, follow_read, f, follow_free);
      if (ctx->stream == NULL)
        {
          follow_free (f);
          return esbx_gateway_reply_fail (ctx, ESBX_ERR_FAILED, errno,
                                          "cannot start the event stream");
        }
      MHD_add_response_header (ctx->stream, MHD_HTTP_HEADER_CONTENT_TYPE, "application/x-ndjson");
      ctx->status = MHD_HTTP_OK;
      return;
    }
  arr = json_new (JSON_ARRAY);
  if (esbx_events_read (ctx->store, ctx->arg, &offset, collect_event, arr, &err) < 0)
    {
      json_free (arr);
      return esbx_gateway_reply_err (ctx, &err);
    }
  o = json_new (JSON_OBJECT);
  json_set (o, "events", arr);
  json_set_int (o, "offset", (int64_t)offset);
  esbx_gateway_reply_json (ctx, MHD_HTTP_OK, o);
}

/* A publish or rebase that failed: its error with VIEW (owned: what it
   refused, "conflicts" and "unmerged", or a rebase's whole result), or
   the error alone when VIEW is NULL.  */
static void
reply_failed (struct esbx_gateway_ctx *ctx, esbx_error_t *err, struct esbx_publish_result *r,
              json_t *view)
{
  esbx_publish_result_free (r);
  if (view == NULL)
    return esbx_gateway_reply_err (ctx, err);
  json_set_error (view, *err);
  free (ctx->reason);
  ctx->reason = xstrdup ((*err)->msg);
  esbx_gateway_reply_json (ctx, esbx_http_status_of_error (*err), view);
  esbx_error_free (err);
}

void
esbx_gateway_session_publish (struct esbx_gateway_ctx *ctx)
{
  static const char *const fields[]
      = { "message", "discard", "include_ignored", "allow_secrets", NULL };
  struct esbx_publish_result r = { 0 };
  _cleanup_free_ char **allow = NULL;
  _cleanup_free_ char *by = NULL, *request = NULL;
  esbx_error_t err = NULL;
  unsigned int flags;
  json_t *o;

  if (esbx_gateway_check_body (ctx, fields, "sbba") < 0)
    return;
  allow = esbx_gateway_strings (json_get (ctx->json, "allow_secrets"));
  flags = json_get_bool (ctx->json, "discard", false) ? ESBX_PUBLISH_DISCARD : 0;
  if (json_get_bool (ctx->json, "include_ignored", false))
    flags |= ESBX_PUBLISH_INCLUDE_IGNORED;
  by = xasprintf ("token:%s", ctx->token->id);
  if (esbx_sandbox_publish_as (ctx->store, ctx->arg, json_get_string (ctx->json, "message"), flags,
                               allow, by, &r, &request, &err)
      < 0)
    return reply_failed (ctx, &err, &r, esbx_refused_json (&r));
  o = esbx_publish_result_json (&r);
  esbx_publish_result_free (&r);
  /* A gated project: filed, not landed (README, "The gate").  */
  if (request)
    {
      _cleanup_json_ json_t *rec = esbx_request_load (ctx->store, request, NULL, NULL);
      json_set_string (o, "request", request);
      json_set_string (o, "state", rec ? json_get_string (rec, "state") : "queued");
    }
  esbx_gateway_reply_json (ctx, MHD_HTTP_OK, o);
}

void
esbx_gateway_session_rebase (struct esbx_gateway_ctx *ctx)
{
  static const char *const fields[] = { "restart", NULL };
  struct esbx_publish_result r = { 0 };
  esbx_error_t err = NULL;
  unsigned int did = 0;
  json_t *o;

  if (esbx_gateway_check_body (ctx, fields, "b") < 0 || esbx_gateway_session_must_exist (ctx) < 0)
    return;
  if (esbx_sandbox_rebase (ctx->store, ctx->arg,
                           json_get_bool (ctx->json, "restart", false) ? ESBX_REBASE_RESTART : 0,
                           &r, &did, &err)
      < 0)
    return reply_failed (ctx, &err, &r,
                         r.layer ? esbx_sandbox_rebase_json (&r, did) : esbx_refused_json (&r));
  o = esbx_sandbox_rebase_json (&r, did);
  esbx_publish_result_free (&r);
  esbx_gateway_reply_json (ctx, MHD_HTTP_OK, o);
}

void
esbx_gateway_session_stop (struct esbx_gateway_ctx *ctx)
{
  esbx_gateway_reply_done (ctx, esbx_sandbox_stop);
}

void
esbx_gateway_session_ps (struct esbx_gateway_ctx *ctx)
{
  esbx_error_t err = NULL;

  esbx_gateway_reply_view (ctx, esbx_ps_list (ctx->store, ctx->arg, &err), &err);
}
