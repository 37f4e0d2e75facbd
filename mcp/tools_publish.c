/* The tools that end a session's line of work or move it: publish, rebase,
   resolve, discard.  A publish refused for conflicts, and a rebase that
   left paths unmerged, are failed calls that carry their paths as data
   (structuredContent), with what to do next.  */
#include "mcp_internal.h"
#include "sandbox.h"
#include "utils.h"

#include <stdio.h>
#include <string.h>

/* MSG, then one line a path of ARR ("  PATH (KIND)"), then HINT.  */
static char *
with_paths (const char *msg, const json_t *arr, const char *hint)
{
  _cleanup_free_ char *text = NULL;
  size_t len = 0, i;
  FILE *f = open_memstream (&text, &len);

  if (f == NULL)
    return xstrdup (msg);
  fprintf (f, "%s\n", msg);
  for (i = 0; i < json_len (arr); i++)
    {
      const json_t *e = json_at (arr, i);
      const char *kind = json_get_string (e, "kind");

      fprintf (f, "  %s%s%s%s\n", json_get_string (e, "path") ? json_get_string (e, "path") : "?",
               kind ? " (" : "", kind ? kind : "", kind ? ")" : "");
    }
  fprintf (f, "%s", hint);
  fclose (f);
  return steal_pointer (&text);
}

int
mcp_tool_publish (struct mcp_call *c, esbx_error_t *err)
{
  _cleanup_free_ char **allow = mcp_arg_strings (c, "allow_secrets");
  struct esbx_publish_result r = { 0 };
  unsigned int flags = 0;
  json_t *o;

  if (mcp_arg_bool (c, "discard", false))
    flags |= ESBX_PUBLISH_DISCARD;
  if (mcp_arg_bool (c, "include_ignored", false))
    flags |= ESBX_PUBLISH_INCLUDE_IGNORED;
  if (esbx_sandbox_publish_allow (c->store, c->session, mcp_arg_string (c, "message"), flags, allow,
                                  &r, err)
      < 0)
    {
      bool unmerged = (*err)->kind == ESBX_ERR_UNMERGED;

      o = r.published ? NULL : esbx_refused_json (&r);
      esbx_publish_result_free (&r);
      if (o == NULL)
        return -1;
      json_set (o, "published", json_new_bool (false));
      json_set (o, "layer", json_new (JSON_NULL));
      if (json_get (o, "conflicts") == NULL)
        json_set (o, "conflicts", json_new (JSON_ARRAY));
      json_set_string (o, "hint",
                       unmerged ? "fix the unmerged paths, mark them with the resolve tool, then "
                                  "publish again"
                                : "rebase, then publish again");
      mcp_result_text (c, o,
                       with_paths ((*err)->msg, json_get (o, unmerged ? "unmerged" : "conflicts"),
                                   json_get_string (o, "hint")));
      c->is_error = true;
      esbx_error_free (err);
      return 0;
    }
  o = esbx_publish_result_json (&r);
  json_set (o, "published", json_new_bool (true));
  mcp_result_text (c, o,
                   r.layer ? xasprintf ("published layer %s (%zu changes)%s", r.layer, r.n_changes,
                                        (flags & ESBX_PUBLISH_DISCARD) ? "; session discarded" : "")
                           : xstrdup ("nothing to publish"));
  esbx_publish_result_free (&r);
  return 0;
}

int
mcp_tool_rebase (struct mcp_call *c, esbx_error_t *err)
{
  struct esbx_publish_result r = { 0 };
  unsigned int did = 0;
  json_t *o;

  if (esbx_sandbox_rebase (c->store, c->session,
                           mcp_arg_bool (c, "restart", false) ? ESBX_REBASE_RESTART : 0, &r, &did,
                           err)
      < 0)
    {
      if (r.layer == NULL)
        {
          esbx_publish_result_free (&r);
          return -1;
        }
      /* The base moved; what it could not merge waits in the session.  */
      o = esbx_sandbox_rebase_json (&r, did);
      esbx_publish_result_free (&r);
      json_set_string (o, "status", "unmerged");
      mcp_result_text (c, o,
                       with_paths ((*err)->msg, json_get (o, "unmerged"),
                                   "fix each (conflict markers, or the version you want), mark "
                                   "them with the resolve tool, then publish"));
      c->is_error = true;
      esbx_error_free (err);
      return 0;
    }
  o = esbx_sandbox_rebase_json (&r, did);
  json_set_string (o, "status", "rebased");
  mcp_result_text (c, o,
                   xasprintf ("rebased onto %s: %zu paths merged", r.layer ? r.layer : "the head",
                              json_len (json_get (o, "merged"))));
  esbx_publish_result_free (&r);
  return 0;
}

int
mcp_tool_resolve (struct mcp_call *c, esbx_error_t *err)
{
  _cleanup_free_ char **paths = mcp_arg_strings (c, "paths");
  json_t *o;

  if (paths[0] == NULL)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "resolve: no path given");
  if (esbx_session_unmerged_resolve (c->store, c->session, paths, err) < 0)
    return -1;
  o = json_new (JSON_OBJECT);
  json_set (o, "resolved", json_copy (json_get (c->args, "paths")));
  mcp_result (c, o);
  return 0;
}

int
mcp_tool_discard (struct mcp_call *c, esbx_error_t *err)
{
  json_t *o;

  if (esbx_sandbox_discard (c->store, c->session,
                            mcp_arg_bool (c, "force", false) ? ESBX_DISCARD_FORCE : 0, err)
      < 0)
    return -1;
  o = json_new (JSON_OBJECT);
  json_set_string (o, "discarded", c->session);
  mcp_result_text (c, o, xasprintf ("session `%s` discarded", c->session));
  return 0;
}
