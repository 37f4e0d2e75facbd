/* What a token may give a session (grants.h).  The checks read the store as
   it is at the request; the store's own checks (session_create.c) follow
   when the session is made.  */
#include "grants.h"
#include "utils.h"

#include <string.h>

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

bool
esbx_grant_network (struct esbx_gateway_ctx *ctx, const char *project, const char *network,
                    char **reason)
{
  _cleanup_free_ char *limit = limit_of (ctx->token);
  _cleanup_json_ json_t *defaults = NULL;
  esbx_error_t err = NULL;

  if (limit == NULL)
    return true;
  if (network == NULL)
    {
      /* A project that does not exist fails later, with its own error.  */
      defaults = project ? esbx_project_network_get (ctx->store, project, &err) : NULL;
      esbx_error_free (&err);
      if (defaults && strcmp (json_get_string (defaults, "network"), "host") == 0)
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
