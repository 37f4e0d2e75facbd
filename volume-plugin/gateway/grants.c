/* What a token may give a session (grants.h).  The checks read the store as
   it is at the request; the store's own checks (session_create.c) follow
   when the session is made.  */
#include "grants.h"
#include "utils.h"

#include <string.h>
#include <unistd.h>

/* "project `P`" or "session `S`": what T is limited to; NULL for a token
   without limits.  */
static char *
limit_of (const struct esbx_token *t)
{
  if (t->session)
    return xasprintf ("session `%s`", t->session);
  if (t->project)
    return xasprintf ("project `%s`", t->project);
  return NULL;
}

/* The network a session of PROJECT asked for with NETWORK gets: NETWORK, or
   the project's default (none when it has none, or does not exist: that
   fails later, with its own error).  */
static char *
network_of (struct esbx_gateway_ctx *ctx, const char *project, const char *network)
{
  _cleanup_json_ json_t *defaults = NULL;
  esbx_error_t err = NULL;

  if (network)
    return xstrdup (network);
  defaults = project ? esbx_project_network_get (ctx->store, project, &err) : NULL;
  esbx_error_free (&err);
  return xstrdup (defaults ? json_get_string (defaults, "network") : "none");
}

bool
esbx_grant_network (struct esbx_gateway_ctx *ctx, const char *project, const char *network,
                    char **reason)
{
  _cleanup_free_ char *limit = limit_of (ctx->token), *got = NULL;

  if (limit == NULL)
    return true;
  if (network == NULL)
    {
      got = network_of (ctx, project, NULL);
      if (strcmp (got, "host") == 0)
        {
          *reason = xasprintf ("token `%s` is limited to %s: the host's network, project `%s`'s "
                               "default, needs a token without project or session limits; name "
                               "another network",
                               ctx->token->id, limit, project);
          return false;
        }
      return true;
    }
  if (strcmp (network, "host") != 0)
    return true;
  *reason = xasprintf ("token `%s` is limited to %s: the host's network needs a token without "
                       "project or session limits",
                       ctx->token->id, limit);
  return false;
}

bool
esbx_grant_disk (struct esbx_gateway_ctx *ctx, const char *project, int64_t disk, char **reason)
{
  _cleanup_free_ char *limit = limit_of (ctx->token), *most = NULL, *asked = NULL;
  esbx_error_t err = NULL;
  int64_t d = 0;

  if (limit == NULL || disk == 0)
    return true;
  /* A project that does not exist fails later, with its own error.  */
  if (project && esbx_disk_default (ctx->store, project, &d, &err) < 0)
    {
      *reason = xasprintf ("token `%s`: %s", ctx->token->id, err->msg);
      esbx_error_free (&err);
      return false;
    }
  if (d <= 0 || (disk > 0 && disk <= d))
    return true;
  most = esbx_disk_size_string (d);
  asked = esbx_disk_size_string (disk);
  *reason = xasprintf ("token `%s` is limited to %s: a disk of %s, more than the default of %s, "
                       "needs a token without project or session limits",
                       ctx->token->id, limit, asked, most);
  return false;
}

bool
esbx_grant_secrets (struct esbx_gateway_ctx *ctx, const char *project, char *const *specs,
                    char **reason)
{
  _cleanup_free_ char *limit = limit_of (ctx->token);
  size_t i;

  if (limit == NULL)
    return true;
  for (i = 0; specs && specs[i]; i++)
    {
      _cleanup_free_ char *name = xstrndup (specs[i], strcspn (specs[i], ",")), *owner = NULL;
      esbx_error_t err = NULL;

      if (esbx_secret_owner (ctx->store, name, &owner, &err) < 0)
        esbx_error_free (&err);
      if (owner && project && strcmp (owner, project) == 0)
        continue;
      *reason = xasprintf ("token `%s` is limited to %s: `%s` is not a secret of project `%s`",
                           ctx->token->id, limit, name, project ? project : "-");
      return false;
    }
  return true;
}

bool
esbx_grant_room (struct esbx_gateway_ctx *ctx, const char *project, const char *network, int *lock,
                 char **reason)
{
  const struct esbx_token *t = ctx->token;
  _cleanup_free_ char *got = NULL;
  esbx_error_t err = NULL;
  size_t sessions, egress;

  *lock = -1;
  if (t->max_sessions == 0 && t->max_egress == 0)
    return true;
  got = network_of (ctx, project, network);
  *lock = esbx_token_lock (ctx->store, t->id, &err);
  if (*lock < 0 || esbx_token_holdings (ctx->store, t->id, &sessions, &egress, &err) < 0)
    {
      *reason = xasprintf ("token `%s`: %s", t->id, err->msg);
      esbx_error_free (&err);
      return false;
    }
  if (t->max_sessions && sessions >= t->max_sessions)
    *reason = xasprintf ("token `%s` holds %zu sessions, its cap (token create --max-sessions %u): "
                         "discard one first",
                         t->id, sessions, t->max_sessions);
  else if (t->max_egress && strcmp (got, "egress") == 0 && egress >= t->max_egress)
    *reason = xasprintf ("token `%s` holds %zu sessions on the egress network, its cap (token "
                         "create --max-egress %u): discard one first, or name another network",
                         t->id, egress, t->max_egress);
  else
    return true;
  close (*lock);
  *lock = -1;
  return false;
}
