#include "auth.h"
#include "log.h"
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

/* The project and id of session NAME; both NULL when it does not exist.  */
static void
load_session (esbx_store_t *store, const char *name, char **project, char **id)
{
  struct esbx_session *s = NULL;
  esbx_error_t err = NULL;

  *project = *id = NULL;
  if (!esbx_name_valid (name) || esbx_session_load (store, name, &s, &err) < 0)
    {
      esbx_error_free (&err);
      return;
    }
  *project = xstrdup (s->project);
  *id = xstrdup (s->id);
  esbx_session_free (s);
}

void
esbx_auth_resolve_target (struct esbx_gateway_ctx *ctx, const struct esbx_gateway_route *route)
{
  const char *s;

  ctx->content = route->content_flag && esbx_gateway_query_flag (ctx->conn, route->content_flag);
  switch (route->target)
    {
    case GATEWAY_TARGET_PROJECT:
      ctx->project = xstrdup (ctx->arg);
      break;
    case GATEWAY_TARGET_SESSION:
      ctx->session = xstrdup (ctx->arg);
      load_session (ctx->store, ctx->arg, &ctx->project, &ctx->session_id);
      break;
    case GATEWAY_TARGET_BODY_PROJECT:
    case GATEWAY_TARGET_BODY_NAME:
      s = json_get_string (ctx->json,
                           route->target == GATEWAY_TARGET_BODY_PROJECT ? "project" : "name");
      ctx->project = s ? xstrdup (s) : NULL;
      break;
    case GATEWAY_TARGET_QUERY_PROJECT:
      s = MHD_lookup_connection_value (ctx->conn, MHD_GET_ARGUMENT_KIND, "project");
      ctx->project = s ? xstrdup (s) : NULL;
      break;
    case GATEWAY_TARGET_QUERY_REF:
      s = MHD_lookup_connection_value (ctx->conn, MHD_GET_ARGUMENT_KIND, "ref");
      if (s == NULL)
        break;
      if (strchr (s, '@') == NULL && esbx_name_valid (s) && esbx_session_exists (ctx->store, s))
        {
          ctx->session = xstrdup (s);
          load_session (ctx->store, s, &ctx->project, &ctx->session_id);
        }
      else
        ctx->project = xstrndup (s, strcspn (s, "@"));
      break;
    case GATEWAY_TARGET_REQUEST:
      {
        esbx_error_t err = NULL;
        json_t *rec = esbx_request_load (ctx->store, ctx->arg, &ctx->project, &err);

        esbx_error_free (&err);
        if (rec && json_get_string (rec, "session"))
          {
            ctx->session = xstrdup (json_get_string (rec, "session"));
            ctx->session_id = xstrdup (json_get_string (rec, "session_id"));
          }
        json_free (rec);
      }
      break;
    case GATEWAY_TARGET_LIST:
    case GATEWAY_TARGET_TOKEN:
    case GATEWAY_TARGET_STORE:
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
check_scope (const struct esbx_gateway_ctx *ctx, const struct esbx_gateway_route *route,
             char **reason)
{
  const struct esbx_token *t = ctx->token;

  if (ctx->content)
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

/* Whether session NAME with id ID (NULL: it does not exist) is the one T
   was made for; the name alone never suffices.  */
static bool
session_is (const struct esbx_token *t, const char *name, const char *id, char **reason)
{
  if (name == NULL || strcmp (name, t->session) != 0)
    *reason = xasprintf ("token `%s` is limited to session `%s`", t->id, t->session);
  else if (t->session_id == NULL)
    *reason = xasprintf ("token `%s` is limited to session `%s` by name only (it was made before "
                         "sessions had ids): make a new token",
                         t->id, t->session);
  else if (id == NULL)
    *reason = xasprintf ("token `%s` is limited to session `%s` (id %s), which no longer exists",
                         t->id, t->session, t->session_id);
  else if (strcmp (id, t->session_id) != 0)
    *reason = xasprintf ("token `%s` is limited to session `%s` (id %s); the session of that name "
                         "now is another one (id %s)",
                         t->id, t->session, t->session_id, id);
  else
    return true;
  return false;
}

/* Whether PROJECT is the project T was made for: the same name and, once
   the token is bound (esbx_token_bind_project), the same id.  */
static bool
project_is (esbx_store_t *store, const struct esbx_token *t, const char *project, char **reason)
{
  _cleanup_free_ char *id = NULL;
  esbx_error_t err = NULL;

  if (project == NULL || strcmp (project, t->project) != 0)
    *reason = xasprintf ("token `%s` is limited to project `%s`", t->id, t->project);
  else if (t->project_id == NULL)
    return true;
  else if (!esbx_project_exists (store, project))
    *reason = xasprintf ("token `%s` is limited to project `%s` (id %s), which no longer exists",
                         t->id, t->project, t->project_id);
  else if (esbx_project_id (store, project, &id, &err) < 0)
    {
      *reason = xasprintf ("token `%s`: %s", t->id, err->msg);
      esbx_error_free (&err);
    }
  else if (strcmp (id, t->project_id) != 0)
    *reason = xasprintf ("token `%s` is limited to project `%s` (id %s); the project of that name "
                         "now is another one (id %s)",
                         t->id, t->project, t->project_id, id);
  else
    return true;
  return false;
}

bool
esbx_auth_authorize (struct esbx_gateway_ctx *ctx, const struct esbx_gateway_route *route,
                     char **reason)
{
  const struct esbx_token *t = ctx->token;

  if (!check_scope (ctx, route, reason))
    return false;
  if (route->target == GATEWAY_TARGET_LIST || route->target == GATEWAY_TARGET_TOKEN)
    return true;
  /* A session token acts on its session only: never on a project as a
     whole, never on another session.  */
  if (t->session && route->target == GATEWAY_TARGET_STORE)
    {
      *reason = xasprintf ("token `%s` is limited to session `%s`", t->id, t->session);
      return false;
    }
  if (t->session && !session_is (t, ctx->session, ctx->session_id, reason))
    return false;
  if (t->project && route->target == GATEWAY_TARGET_STORE)
    {
      *reason = xasprintf ("token `%s` is limited to project `%s`", t->id, t->project);
      return false;
    }
  if (t->project && !project_is (ctx->store, t, ctx->project, reason))
    return false;
  return true;
}

void
esbx_auth_bind (struct esbx_gateway_ctx *ctx)
{
  esbx_error_t err = NULL;

  if (esbx_token_bind_project (ctx->store, (struct esbx_token *)ctx->token, &err) < 0)
    {
      esbx_warn ("gateway: %s", err->msg);
      esbx_error_free (&err);
    }
}

bool
esbx_auth_sees_project (esbx_store_t *store, const struct esbx_token *token, const char *project)
{
  _cleanup_free_ char *reason = NULL, *sproject = NULL, *sid = NULL;

  if (token->session)
    {
      /* The project of the token's session is visible in project lists.  */
      load_session (store, token->session, &sproject, &sid);
      return sproject && strcmp (sproject, project) == 0
             && session_is (token, token->session, sid, &reason);
    }
  if (token->project)
    return project_is (store, token, project, &reason);
  return true;
}

bool
esbx_auth_sees_session (esbx_store_t *store, const struct esbx_token *token,
                        const struct esbx_session *s)
{
  _cleanup_free_ char *reason = NULL;

  if (token->session)
    return session_is (token, s->name, s->id, &reason);
  if (token->project)
    return project_is (store, token, s->project, &reason);
  return true;
}
