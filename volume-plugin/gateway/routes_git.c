/* The gateway's push-git and pull-git: the CLI verbs' requests, with what
   the daemon must not do for a token.  The remote a request names is a
   URL (a local path or file:// would read or write host paths with the
   daemon's rights: refused, 403); pull-git without one takes the source
   recorded when the host made the project.  A secret for the credentials
   is granted as one attached to a session is (grants.c): a token limited
   to the project only the project's own.  */
#include "routes_git.h"
#include "grants.h"
#include "utils.h"

#include <string.h>
#include <strings.h>

static void
sync_route (struct esbx_gateway_ctx *ctx, bool push)
{
  static const char *const fields[] = { "remote", "branch", "ref", "secret", NULL };
  struct esbx_git_sync_opts o = { .urls_only = true };
  esbx_error_t err = NULL;
  char *reason = NULL;

  if (esbx_gateway_check_body (ctx, fields, "ssss") < 0)
    return;
  o.remote = json_get_string (ctx->json, "remote");
  o.secret = json_get_string (ctx->json, "secret");
  if (push)
    o.branch = json_get_string (ctx->json, "branch");
  else
    o.ref = json_get_string (ctx->json, "ref");
  if ((push && json_get (ctx->json, "ref")) || (!push && json_get (ctx->json, "branch")))
    return esbx_gateway_reply_fail (ctx, ESBX_ERR_USAGE, 0, "field `%s` is for %s",
                                    push ? "ref" : "branch", push ? "pull-git" : "push-git");
  if (o.remote && (strstr (o.remote, "://") == NULL || strncasecmp (o.remote, "file:", 5) == 0))
    return esbx_gateway_reply_forbidden (
        ctx, xasprintf ("remote `%s` is a path of the daemon's host: name a URL (http, https, "
                        "ssh, git)",
                        o.remote));
  if (o.secret)
    {
      char *specs[] = { (char *)o.secret, NULL };

      if (!esbx_grant_secrets (ctx, ctx->arg, specs, &reason))
        return esbx_gateway_reply_forbidden (ctx, reason);
    }
  esbx_gateway_reply_view (ctx,
                           push ? esbx_project_push_git (ctx->store, ctx->arg, &o, &err)
                                : esbx_project_pull_git (ctx->store, ctx->arg, &o, &err),
                           &err);
}

void
esbx_gateway_project_push_git (struct esbx_gateway_ctx *ctx)
{
  sync_route (ctx, true);
}

void
esbx_gateway_project_pull_git (struct esbx_gateway_ctx *ctx)
{
  sync_route (ctx, false);
}
