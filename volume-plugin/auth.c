#include "auth.h"
#include "text.h"
#include "utils.h"

#include <string.h>

int
esbx_auth_authenticate (esbx_store_t *store, const char *header, struct esbx_token **token,
                        char **reason)
{
  esbx_error_t err = NULL;
  const char *secret;

  if (header == NULL || header[0] == '\0')
    {
      *reason = xstrdup ("missing Authorization header: send `Authorization: Bearer TOKEN`");
      return -1;
    }
  if (strncasecmp (header, "Bearer ", 7) != 0)
    {
      *reason = xstrdup ("Authorization header must be `Bearer TOKEN`");
      return -1;
    }
  secret = header + 7;
  while (*secret == ' ')
    secret++;
  if (esbx_token_verify (store, secret, token, &err) < 0)
    {
      *reason = xstrdup (err->msg);
      esbx_error_free (&err);
      return -1;
    }
  return 0;
}

static char *
project_of_session (esbx_store_t *store, const char *session)
{
  struct esbx_session *s = NULL;
  esbx_error_t err = NULL;
  char *p;

  if (!esbx_name_valid (session) || esbx_session_load (store, session, &s, &err) < 0)
    {
      esbx_error_free (&err);
      return NULL;
    }
  p = xstrdup (s->project);
  esbx_session_free (s);
  return p;
}

void
esbx_auth_resolve_target (struct esbx_gw_ctx *ctx, const struct esbx_gw_route *route)
{
  const char *s;

  switch (route->target)
    {
    case GW_TARGET_PROJECT:
      ctx->project = xstrdup (ctx->arg);
      break;
    case GW_TARGET_SESSION:
      ctx->session = xstrdup (ctx->arg);
      ctx->project = project_of_session (ctx->store, ctx->arg);
      break;
    case GW_TARGET_BODY_PROJECT:
    case GW_TARGET_BODY_NAME:
      s = json_get_string (ctx->json, route->target == GW_TARGET_BODY_PROJECT ? "project" : "name");
      ctx->project = s ? xstrdup (s) : NULL;
      break;
    case GW_TARGET_QUERY_PROJECT:
      s = MHD_lookup_connection_value (ctx->conn, MHD_GET_ARGUMENT_KIND, "project");
      ctx->project = s ? xstrdup (s) : NULL;
      break;
    case GW_TARGET_QUERY_REF:
      s = MHD_lookup_connection_value (ctx->conn, MHD_GET_ARGUMENT_KIND, "ref");
      if (s == NULL)
        break;
      if (strchr (s, '@') == NULL && esbx_name_valid (s) && esbx_session_exists (ctx->store, s))
        {
          ctx->session = xstrdup (s);
          ctx->project = project_of_session (ctx->store, s);
        }
      else
        ctx->project = xstrndup (s, strcspn (s, "@"));
      break;
    case GW_TARGET_LIST:
    case GW_TARGET_TOKEN:
    case GW_TARGET_STORE:
      break;
    }
}

static const char *
scope_name (unsigned scope)
{
  return scope == ESBX_SCOPE_MANAGE    ? "manage"
         : scope == ESBX_SCOPE_RUNTIME ? "runtime"
                                       : "observe";
}

/* What `observe` may see is decided here and nowhere else: names, kinds,
   modes, sizes, hashes, provenance, events and processes, never what a
   file holds.  A request that asks a route for file content (a patch)
   needs `runtime`, the scope that reads files.  */
static bool
check_scope (const struct esbx_gw_ctx *ctx, const struct esbx_gw_route *route, char **reason)
{
  const struct esbx_token *t = ctx->token;

  if (route->content_flag && esbx_gw_query_flag (ctx->conn, route->content_flag))
    {
      if (t->scopes & ESBX_SCOPE_RUNTIME)
        return true;
      *reason = xasprintf ("token `%s` lacks the `runtime` scope: `%s` asks for file content",
                           t->id, route->content_flag);
      return false;
    }
  if (route->scope && (t->scopes & route->scope) == 0)
    {
      *reason = xasprintf ("token `%s` lacks the `%s` scope", t->id, scope_name (route->scope));
      return false;
    }
  return true;
}

bool
esbx_auth_authorize (struct esbx_gw_ctx *ctx, const struct esbx_gw_route *route, char **reason)
{
  const struct esbx_token *t = ctx->token;

  if (!check_scope (ctx, route, reason))
    return false;
  if (route->target == GW_TARGET_LIST || route->target == GW_TARGET_TOKEN)
    return true;
  if (t->session)
    {
      /* A session token acts on its session only: never on a project as a
         whole, never on another session.  */
      if (ctx->session == NULL || strcmp (ctx->session, t->session) != 0
          || route->target == GW_TARGET_STORE)
        {
          *reason = xasprintf ("token `%s` is limited to session `%s`", t->id, t->session);
          return false;
        }
    }
  if (t->project)
    {
      if (ctx->project == NULL || strcmp (ctx->project, t->project) != 0
          || route->target == GW_TARGET_STORE)
        {
          *reason = xasprintf ("token `%s` is limited to project `%s`", t->id, t->project);
          return false;
        }
    }
  return true;
}

bool
esbx_gw_token_sees (esbx_store_t *store, const struct esbx_token *token, const char *project,
                    const char *session)
{
  if (token->session)
    {
      if (session)
        return strcmp (session, token->session) == 0;
      /* The project of the token's session is visible in project lists.  */
      _cleanup_free_ char *p = project_of_session (store, token->session);
      return p && strcmp (p, project) == 0;
    }
  if (token->project)
    return project && strcmp (project, token->project) == 0;
  return true;
}
