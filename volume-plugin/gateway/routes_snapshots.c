/* The gateway's snapshot routes: what `esbx session snapshot|fork` and
   `esbx snapshot` do on the store.  Snapshot listings, inspection and
   removal are for tokens without project or session limits, as the trash
   is: a snapshot outlives the session it was taken of.  */
#include "routes_snapshots.h"
#include "grants.h"
#include "sandbox.h"
#include "text.h"
#include "utils.h"

#include <string.h>

static int
duration_field (struct esbx_gateway_ctx *ctx, const char *key, int64_t *out, esbx_error_t *err)
{
  const char *s = json_get_string (ctx->json, key);

  if (s && esbx_parse_duration (s, out, err) < 0)
    return esbx_error_wrap (err, "field `%s`", key);
  return 0;
}

int
esbx_gateway_lifetime_opts (struct esbx_gateway_ctx *ctx, struct esbx_session_opts *o,
                            esbx_error_t *err)
{
  o->snapshot = json_get_string (ctx->json, "snapshot");
  o->on_expiry = json_get_string (ctx->json, "on_expiry");
  if (duration_field (ctx, "ttl", &o->ttl, err) < 0
      || duration_field (ctx, "idle_ttl", &o->idle_ttl, err) < 0)
    return -1;
  return 0;
}

void
esbx_gateway_session_snapshot (struct esbx_gateway_ctx *ctx)
{
  static const char *const fields[] = { "name", "push", NULL };
  _cleanup_free_ char *snap = NULL;
  const char *name;
  esbx_error_t err = NULL;

  if (esbx_gateway_check_body (ctx, fields, "sb") < 0 || esbx_gateway_session_must_exist (ctx) < 0)
    return;
  name = json_get_string (ctx->json, "name");
  if ((json_get_bool (ctx->json, "push", false)
           ? esbx_sandbox_snapshot_push (ctx->store, ctx->arg, name, &snap, &err)
           : esbx_sandbox_snapshot (ctx->store, ctx->arg, name, &snap, &err))
      < 0)
    return esbx_gateway_reply_err (ctx, &err);
  esbx_gateway_reply_string (ctx, MHD_HTTP_CREATED, "snapshot", snap);
}

void
esbx_gateway_session_fork (struct esbx_gateway_ctx *ctx)
{
  static const char *const fields[] = { "name", "ttl", "idle_ttl", "on_expiry", "disk", NULL };
  struct esbx_session_opts o = { 0 };
  const char *disk;
  _cleanup_free_ char *snap = NULL, *name = NULL;
  _cleanup_close_ int lock = -1;
  esbx_error_t err = NULL;
  char *reason = NULL;

  if (esbx_gateway_check_body (ctx, fields, "sssss") < 0
      || esbx_gateway_session_must_exist (ctx) < 0)
    return;
  /* A fork is a new session of the project: on its default network.  */
  if (!esbx_grant_network (ctx, ctx->project, NULL, &reason))
    return esbx_gateway_reply_forbidden (ctx, reason);
  o.name = json_get_string (ctx->json, "name");
  if (esbx_gateway_lifetime_opts (ctx, &o, &err) < 0)
    return esbx_gateway_reply_err (ctx, &err);
  /* Without one, the fork gets its parent's.  */
  if ((disk = json_get_string (ctx->json, "disk"))
      && esbx_disk_size_parse (disk, &o.disk, &err) < 0)
    return esbx_gateway_reply_err (ctx, &err);
  if (!esbx_grant_disk (ctx, ctx->project, o.disk, &reason))
    return esbx_gateway_reply_forbidden (ctx, reason);
  if (!esbx_grant_room (ctx, ctx->project, NULL, &lock, &reason))
    return esbx_gateway_reply_forbidden (ctx, reason);
  o.token = ctx->token->id;
  if (esbx_sandbox_fork (ctx->store, ctx->arg, &o, &snap, &name, &err) < 0)
    return esbx_gateway_reply_err (ctx, &err);
  esbx_gateway_reply_string (ctx, MHD_HTTP_CREATED, "name", name);
}

void
esbx_gateway_snapshot_list (struct esbx_gateway_ctx *ctx)
{
  const char *project = esbx_gateway_query (ctx, "project");
  esbx_error_t err = NULL;

  if (project && esbx_check_name ("project", project, &err) < 0)
    return esbx_gateway_reply_err (ctx, &err);
  esbx_gateway_reply_view (ctx, esbx_snapshot_list (ctx->store, project, &err), &err);
}

void
esbx_gateway_snapshot_inspect (struct esbx_gateway_ctx *ctx)
{
  esbx_error_t err = NULL;

  esbx_gateway_reply_view (ctx, esbx_snapshot_inspect (ctx->store, ctx->arg, &err), &err);
}

void
esbx_gateway_snapshot_rm (struct esbx_gateway_ctx *ctx)
{
  esbx_gateway_reply_done (ctx, esbx_snapshot_rm);
}
