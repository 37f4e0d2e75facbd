/* The gateway's routes of the gate and the merge queue (routes_queue.h).
   A request's project and session are resolved before authorization
   (auth.c, GATEWAY_TARGET_REQUEST): a token limited to a project sees and
   reviews that project's requests only.  */
#include "routes_queue.h"
#include "auth.h"
#include "http.h"
#include "utils.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define WAIT_MAX_SECONDS 60

static char *
caller (const struct esbx_gateway_ctx *ctx)
{
  return xasprintf ("token:%s", ctx->token->id);
}

void
esbx_gateway_gate_get (struct esbx_gateway_ctx *ctx)
{
  struct esbx_gate g = { 0 };
  esbx_error_t err = NULL;

  if (esbx_gate_load (ctx->store, ctx->arg, &g, &err) < 0)
    return esbx_gateway_reply_err (ctx, &err);
  esbx_gateway_reply_json (ctx, MHD_HTTP_OK, esbx_gate_json (&g));
  esbx_gate_clear (&g);
}

static bool
count_field (struct esbx_gateway_ctx *ctx, const char *key, int64_t *out)
{
  const json_t *v = json_get (ctx->json, key);

  if (v == NULL || v->type == JSON_NULL)
    return true;
  if (!json_int_value (v, out) || *out < 0)
    {
      esbx_gateway_reply_fail (ctx, ESBX_ERR_USAGE, 0, "field `%s` must be a number", key);
      return false;
    }
  return true;
}

void
esbx_gateway_gate_set (struct esbx_gateway_ctx *ctx)
{
  static const char *const fields[]
      = { "mode", "checks", "check_timeout", "approvals", "parallel", "secrets", NULL };
  _cleanup_free_ char **checks = NULL, **secrets = NULL;
  struct esbx_gate g = { 0 };
  int64_t timeout = ESBX_GATE_DEFAULT_TIMEOUT, approvals = 0, parallel = 0;
  esbx_error_t err = NULL;

  if (ctx->token->project || ctx->token->session)
    return esbx_gateway_reply_forbidden (
        ctx, xasprintf ("token `%s` is limited: a project's gate is set by a token without "
                        "project or session limits",
                        ctx->token->id));
  if (esbx_gateway_check_body (ctx, fields, "sa__a_a") < 0)
    return;
  if (!count_field (ctx, "check_timeout", &timeout) || !count_field (ctx, "approvals", &approvals)
      || !count_field (ctx, "parallel", &parallel))
    return;
  g.mode = (char *)json_get_string (ctx->json, "mode");
  if (g.mode == NULL)
    return esbx_gateway_reply_fail (ctx, ESBX_ERR_USAGE, 0, "field `mode` is required");
  checks = esbx_gateway_strings (json_get (ctx->json, "checks"));
  secrets = esbx_gateway_strings (json_get (ctx->json, "secrets"));
  g.checks = checks;
  g.secrets = secrets;
  g.check_timeout = timeout;
  g.approvals = approvals > 1000 ? 1000 : (unsigned)approvals;
  g.parallel = parallel > 1000 ? 1000 : (unsigned)parallel;
  if (esbx_gate_set (ctx->store, ctx->arg, &g, &err) < 0)
    return esbx_gateway_reply_err (ctx, &err);
  esbx_gateway_gate_get (ctx);
}

void
esbx_gateway_request_list (struct esbx_gateway_ctx *ctx)
{
  const char *project = esbx_gateway_query (ctx, "project");
  esbx_error_t err = NULL;
  json_t *arr, *out;

  if (project && project[0] == '\0')
    project = NULL;
  arr = esbx_queue_list (ctx->store, project, esbx_gateway_query_flag (ctx->conn, "all"), &err);
  if (arr == NULL)
    return esbx_gateway_reply_err (ctx, &err);
  out = json_new (JSON_ARRAY);
  for (size_t i = 0; i < json_len (arr); i++)
    {
      const json_t *r = json_at (arr, i);
      if (esbx_auth_sees_project (ctx->store, ctx->token, json_get_string (r, "project")))
        json_append (out, json_copy (r));
    }
  json_free (arr);
  esbx_gateway_reply_json (ctx, MHD_HTTP_OK, out);
}

void
esbx_gateway_request_show (struct esbx_gateway_ctx *ctx)
{
  const char *wait = esbx_gateway_query (ctx, "wait");
  long secs = 0;
  esbx_error_t err = NULL;
  json_t *rec;
  char *end;

  if (wait)
    {
      secs = strtol (wait, &end, 10);
      if (*wait == '\0' || *end != '\0' || secs < 0)
        return esbx_gateway_reply_fail (ctx, ESBX_ERR_USAGE, 0,
                                        "`wait` must be a number of seconds");
      if (secs > WAIT_MAX_SECONDS)
        secs = WAIT_MAX_SECONDS;
    }
  for (long tick = 0;; tick++)
    {
      struct timespec ts = { 0, 200 * 1000000L };

      rec = esbx_request_load (ctx->store, ctx->arg, NULL, &err);
      if (rec == NULL)
        return esbx_gateway_reply_err (ctx, &err);
      if (esbx_request_is_final (rec) || tick >= secs * 5)
        break;
      json_free (rec);
      nanosleep (&ts, NULL);
    }
  esbx_gateway_reply_json (ctx, MHD_HTTP_OK, rec);
}

void
esbx_gateway_request_log (struct esbx_gateway_ctx *ctx)
{
  esbx_error_t err = NULL;
  _cleanup_close_ int fd = esbx_request_open_log (ctx->store, ctx->arg, &err);

  if (fd < 0)
    return esbx_gateway_reply_err (ctx, &err);
  esbx_gateway_reply_file (ctx, fd, "text/plain; charset=utf-8");
}

void
esbx_gateway_request_file (struct esbx_gateway_ctx *ctx)
{
  const char *path = esbx_gateway_query (ctx, "path");
  _cleanup_close_ int fd = memfd_create ("esbx-request-file", MFD_CLOEXEC);
  esbx_error_t err = NULL;

  if (path == NULL)
    return esbx_gateway_reply_fail (ctx, ESBX_ERR_USAGE, 0, "query parameter `path` is required");
  if (fd < 0)
    return esbx_gateway_reply_fail (ctx, ESBX_ERR_FAILED, errno, "memfd: %s", strerror (errno));
  if (esbx_request_show (ctx->store, ctx->arg, path, fd, &err) < 0)
    return esbx_gateway_reply_err (ctx, &err);
  esbx_gateway_reply_file (ctx, fd, "application/octet-stream");
}

static void
act (struct esbx_gateway_ctx *ctx, bool approve)
{
  static const char *const fields[] = { "message", NULL };
  _cleanup_free_ char *by = caller (ctx);
  esbx_error_t err = NULL;
  json_t *rec = NULL;
  int r;

  if (esbx_gateway_check_body (ctx, fields, "s") < 0)
    return;
  r = (approve ? esbx_request_approve : esbx_request_reject) (
      ctx->store, ctx->arg, by, json_get_string (ctx->json, "message"), &rec, &err);
  if (r < 0)
    return esbx_gateway_reply_err (ctx, &err);
  esbx_gateway_reply_json (ctx, MHD_HTTP_OK, rec);
}

void
esbx_gateway_request_approve (struct esbx_gateway_ctx *ctx)
{
  act (ctx, true);
}

void
esbx_gateway_request_reject (struct esbx_gateway_ctx *ctx)
{
  act (ctx, false);
}

void
esbx_gateway_request_cancel (struct esbx_gateway_ctx *ctx)
{
  _cleanup_free_ char *by = caller (ctx);
  esbx_error_t err = NULL;

  if (esbx_request_cancel (ctx->store, ctx->arg, by, &err) < 0)
    return esbx_gateway_reply_err (ctx, &err);
  esbx_gateway_reply_json (ctx, MHD_HTTP_OK, json_new (JSON_OBJECT));
}
