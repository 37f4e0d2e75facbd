/* The tools in one table: what each needs (scope, and the gateway route
   that does the same, whose token rules apply to it over HTTP), what it is
   about (a session, a project, the store), its schemas; and for every
   call the limits of the server's caller, checked before the tool runs,
   and the event it leaves in its session.  */
#include "mcp_internal.h"
#include "events.h"
#include "log.h"
#include "text.h"
#include "utils.h"

#include <string.h>

enum mcp_target
{
  ON_SESSION, /* the session argument (or the one the server is confined to) */
  ON_PROJECT, /* the project argument: a session is made in it */
  ON_STORE,   /* a listing, filtered to what the caller may see */
};

struct mcp_tool
{
  const char *name;
  const char *title;
  const char *description;
  unsigned scope;
  const char *route;
  enum mcp_target target;
  bool one_session; /* offered by a server confined to one session */
  bool read_only;
  bool destructive;
  mcp_tool_fn fn;
  const char *input;  /* JSON Schema of the arguments, "session" left out */
  const char *output; /* and of structuredContent */
};

#define M ESBX_SCOPE_MANAGE
#define R ESBX_SCOPE_RUNTIME
#define O ESBX_SCOPE_OBSERVE

#define SESSION_ARG                                                                                \
  "\"session\": {\"type\": \"string\", \"description\": \"The session (a server confined to one "  \
  "session takes it as the default).\"}"
#define ANY_OBJECT "{\"type\": \"object\"}"

static const struct mcp_tool tools[] = {
  { "session_create", "Create a session",
    "Make a new esbx session of a project: a private copy-on-write workspace on the project's "
    "head (or BASE, or a snapshot) where commands run confined. Returns its name.",
    M, "session_create", ON_PROJECT, false, false, false, mcp_tool_session_create,
    "{\"type\": \"object\", \"properties\": {"
    "\"project\": {\"type\": \"string\", \"description\": \"The project.\"},"
    "\"name\": {\"type\": \"string\", \"description\": \"The session's name; generated when "
    "left out.\"},"
    "\"base\": {\"type\": \"string\", \"description\": \"A layer of the project to start from "
    "(id, prefix or head).\"},"
    "\"from_snapshot\": {\"type\": \"string\", \"description\": \"Start from this snapshot of "
    "the project instead.\"},"
    "\"labels\": {\"type\": \"object\", \"additionalProperties\": {\"type\": \"string\"}},"
    "\"env\": {\"type\": \"object\", \"additionalProperties\": {\"type\": \"string\"}, "
    "\"description\": \"Variables every command of the session starts with.\"},"
    "\"network\": {\"type\": \"string\", \"enum\": [\"none\", \"egress\", \"host\"], "
    "\"description\": \"none (the default), egress (the allow-list only) or host.\"},"
    "\"allow\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}, \"description\": "
    "\"Egress allow-list: HOST[:PORT], *.DOMAIN[:PORT], ADDRESS or CIDR.\"},"
    "\"secrets\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}, \"description\": "
    "\"Secrets by name: NAME[,env=VAR][,file=/run/secrets/F].\"},"
    "\"ttl\": {\"type\": \"string\", \"description\": \"How long it may live: 30m, 2h, 7d.\"},"
    "\"idle_ttl\": {\"type\": \"string\", \"description\": \"How long it may stay unused.\"}"
    "}, \"additionalProperties\": false}",
    "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\"}, "
    "\"session\": " ANY_OBJECT "}, \"required\": [\"name\"]}" },
  { "session_list", "List sessions", "The sessions the caller may see, of one project or all.", O,
    "session_list", ON_STORE, false, true, false, mcp_tool_session_list,
    "{\"type\": \"object\", \"properties\": {\"project\": {\"type\": \"string\"}}, "
    "\"additionalProperties\": false}",
    "{\"type\": \"object\", \"properties\": {\"sessions\": {\"type\": \"array\", "
    "\"items\": " ANY_OBJECT "}}, \"required\": [\"sessions\"]}" },
  { "session_inspect", "Inspect a session",
    "A session's record: project, base, network, labels, lifetime, its holder and resources.", O,
    "session_inspect", ON_SESSION, true, true, false, mcp_tool_session_inspect,
    "{\"type\": \"object\", \"properties\": {" SESSION_ARG "}, \"additionalProperties\": false}",
    "{\"type\": \"object\", \"properties\": {\"session\": " ANY_OBJECT "}, \"required\": "
    "[\"session\"]}" },
  { "session_fork", "Fork a session",
    "Snapshot a session and make a new session from the snapshot: a second line of work from "
    "the same state.",
    M, "session_fork", ON_SESSION, false, false, false, mcp_tool_session_fork,
    "{\"type\": \"object\", \"properties\": {" SESSION_ARG
    ", \"name\": {\"type\": \"string\", \"description\": \"The new session's name.\"}, "
    "\"ttl\": {\"type\": \"string\"}, \"idle_ttl\": {\"type\": \"string\"}}, "
    "\"additionalProperties\": false}",
    "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\"}, \"snapshot\": "
    "{\"type\": \"string\"}}, \"required\": [\"name\", \"snapshot\"]}" },
  { "session_snapshot", "Snapshot a session",
    "Keep the session's state as a snapshot that new sessions can start from.", M,
    "session_snapshot", ON_SESSION, true, false, false, mcp_tool_session_snapshot,
    "{\"type\": \"object\", \"properties\": {" SESSION_ARG
    ", \"name\": {\"type\": \"string\"}}, \"additionalProperties\": false}",
    "{\"type\": \"object\", \"properties\": {\"snapshot\": {\"type\": \"string\"}}, \"required\": "
    "[\"snapshot\"]}" },
  { "run", "Run a command",
    "Run a command in the session (as `esbx exec`): argv, or a shell string run by /bin/sh -c, "
    "in the workspace. Returns the exit status, stdout and stderr (secrets redacted; the first "
    "and last MAX_OUTPUT/2 bytes of each, the cut said). Long commands report progress; a "
    "cancelled call ends the command and what it started.",
    R, "session_exec", ON_SESSION, true, false, false, mcp_tool_run,
    "{\"type\": \"object\", \"properties\": {" SESSION_ARG
    ", \"command\": {\"type\": [\"string\", \"array\"], \"items\": {\"type\": \"string\"}, "
    "\"description\": \"An argv array, or a string for /bin/sh -c.\"},"
    "\"cwd\": {\"type\": \"string\", \"description\": \"Directory in the workspace (relative, "
    "or absolute under it).\"},"
    "\"env\": {\"type\": \"object\", \"additionalProperties\": {\"type\": \"string\"}},"
    "\"timeout_s\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 86400, \"description\": "
    "\"End the command after this many seconds.\"},"
    "\"background\": {\"type\": \"boolean\", \"description\": \"Start it and return at once (a "
    "server, a watcher); its output goes to the session's logs.\"},"
    "\"max_output\": {\"type\": \"integer\", \"minimum\": 256, \"maximum\": 1048576, "
    "\"description\": \"Bytes of each stream to return (default 65536).\"}"
    "}, \"required\": [\"command\"], \"additionalProperties\": false}",
    "{\"type\": \"object\", \"properties\": {\"exit_code\": {\"type\": \"integer\"}, \"stdout\": "
    "{\"type\": \"string\"}, \"stderr\": {\"type\": \"string\"}, \"stdout_cut\": {\"type\": "
    "\"integer\"}, \"stderr_cut\": {\"type\": \"integer\"}, \"timed_out\": {\"type\": "
    "\"boolean\"}, \"cancelled\": {\"type\": \"boolean\"}, \"background\": {\"type\": "
    "\"boolean\"}, \"duration_ms\": {\"type\": "
    "\"integer\"}}, \"required\": [\"exit_code\", \"stdout\", \"stderr\"]}" },
  { "file_read", "Read a file",
    "Read a text file of the session's workspace, whole or a range of lines (1-based, "
    "inclusive).",
    R, "file_read", ON_SESSION, true, true, false, mcp_tool_file_read,
    "{\"type\": \"object\", \"properties\": {" SESSION_ARG
    ", \"path\": {\"type\": \"string\", \"description\": \"Relative to the workspace, or "
    "absolute under it.\"}, \"start_line\": {\"type\": \"integer\", \"minimum\": 1}, "
    "\"end_line\": {\"type\": \"integer\", \"minimum\": 1}}, \"required\": [\"path\"], "
    "\"additionalProperties\": false}",
    "{\"type\": \"object\", \"properties\": {\"path\": {\"type\": \"string\"}, \"content\": "
    "{\"type\": \"string\"}, \"size\": {\"type\": \"integer\"}, \"lines\": {\"type\": "
    "\"integer\"}, \"start_line\": {\"type\": \"integer\"}, \"end_line\": {\"type\": "
    "\"integer\"}}, \"required\": [\"path\", \"content\", \"size\"]}" },
  { "file_write", "Write a file",
    "Write a file of the session's workspace whole (its directories made as needed).", R,
    "file_write", ON_SESSION, true, false, true, mcp_tool_file_write,
    "{\"type\": \"object\", \"properties\": {" SESSION_ARG
    ", \"path\": {\"type\": \"string\"}, \"contents\": {\"type\": \"string\"}, \"mode\": "
    "{\"type\": \"string\", \"description\": \"Octal permission bits, e.g. 0755 (default "
    "0644, or the file's own).\"}}, \"required\": [\"path\", \"contents\"], "
    "\"additionalProperties\": false}",
    "{\"type\": \"object\", \"properties\": {\"path\": {\"type\": \"string\"}, \"size\": "
    "{\"type\": \"integer\"}, \"created\": {\"type\": \"boolean\"}}, \"required\": [\"path\", "
    "\"size\"]}" },
  { "file_edit", "Edit a file",
    "Replace one occurrence of SEARCH_TEXT in a file of the workspace. Fails, changing nothing, "
    "when the text is not found, or found more than once and WHICH_MATCH does not say which "
    "(1-based).",
    R, "file_write", ON_SESSION, true, false, true, mcp_tool_file_edit,
    "{\"type\": \"object\", \"properties\": {" SESSION_ARG
    ", \"path\": {\"type\": \"string\"}, \"search_text\": {\"type\": \"string\"}, "
    "\"replace_text\": {\"type\": \"string\"}, \"which_match\": {\"type\": \"integer\", "
    "\"minimum\": 1}}, \"required\": [\"path\", \"search_text\", \"replace_text\"], "
    "\"additionalProperties\": false}",
    "{\"type\": \"object\", \"properties\": {\"path\": {\"type\": \"string\"}, \"matches\": "
    "{\"type\": \"integer\"}, \"replaced\": {\"type\": \"integer\"}, \"size\": {\"type\": "
    "\"integer\"}}, \"required\": [\"path\", \"matches\", \"replaced\"]}" },
  { "file_list", "List files",
    "List a directory of the workspace, DEPTH levels down (default 1): path, type, size, "
    "mode.",
    R, "file_read", ON_SESSION, true, true, false, mcp_tool_file_list,
    "{\"type\": \"object\", \"properties\": {" SESSION_ARG
    ", \"path\": {\"type\": \"string\", \"description\": \"Default: the workspace.\"}, "
    "\"depth\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 8}}, "
    "\"additionalProperties\": false}",
    "{\"type\": \"object\", \"properties\": {\"path\": {\"type\": \"string\"}, \"entries\": "
    "{\"type\": \"array\", \"items\": " ANY_OBJECT "}, \"truncated\": {\"type\": \"boolean\"}}, "
    "\"required\": [\"path\", \"entries\"]}" },
  { "file_delete", "Delete a file",
    "Delete a file or symlink of the workspace, or a directory with RECURSIVE.", R, "file_write",
    ON_SESSION, true, false, true, mcp_tool_file_delete,
    "{\"type\": \"object\", \"properties\": {" SESSION_ARG
    ", \"path\": {\"type\": \"string\"}, \"recursive\": {\"type\": \"boolean\"}}, \"required\": "
    "[\"path\"], \"additionalProperties\": false}",
    "{\"type\": \"object\", \"properties\": {\"path\": {\"type\": \"string\"}, \"type\": "
    "{\"type\": \"string\"}}, \"required\": [\"path\"]}" },
  { "diff", "Show the session's changes",
    "What the session changed against its base: the paths with kind and type, or with PATCH "
    "the unified diff of its text files (needs the runtime scope).",
    O, "session_diff", ON_SESSION, true, true, false, mcp_tool_diff,
    "{\"type\": \"object\", \"properties\": {" SESSION_ARG
    ", \"patch\": {\"type\": \"boolean\"}, \"include_ignored\": {\"type\": \"boolean\"}}, "
    "\"additionalProperties\": false}",
    "{\"type\": \"object\", \"properties\": {\"changes\": {\"type\": \"array\", "
    "\"items\": " ANY_OBJECT
    "}, \"patch\": {\"type\": \"string\"}, \"truncated\": {\"type\": \"boolean\"}}}" },
  { "events", "The session's events",
    "The session's event log from OFFSET: every command run (exec.start, exec), tool call, "
    "publish and rebase. Answers the offset to read on from.",
    O, "session_events", ON_SESSION, true, true, false, mcp_tool_events,
    "{\"type\": \"object\", \"properties\": {" SESSION_ARG
    ", \"offset\": {\"type\": \"integer\", \"minimum\": 0}, \"limit\": {\"type\": \"integer\", "
    "\"minimum\": 1, \"maximum\": 500}}, \"additionalProperties\": false}",
    "{\"type\": \"object\", \"properties\": {\"events\": {\"type\": \"array\", "
    "\"items\": " ANY_OBJECT
    "}, \"offset\": {\"type\": \"integer\"}}, \"required\": [\"events\", \"offset\"]}" },
  { "publish", "Publish the session's changes",
    "Put the session's changes on top of its project as one layer. When a path changed upstream "
    "too, nothing is published: the answer names the conflicting paths; rebase, then publish "
    "again.",
    M, "session_publish", ON_SESSION, true, false, false, mcp_tool_publish,
    "{\"type\": \"object\", \"properties\": {" SESSION_ARG
    ", \"message\": {\"type\": \"string\"}, \"discard\": {\"type\": \"boolean\", "
    "\"description\": \"End the session once published.\"}, \"include_ignored\": {\"type\": "
    "\"boolean\"}, \"allow_secrets\": {\"type\": \"array\", \"items\": {\"type\": "
    "\"string\"}}}, \"additionalProperties\": false}",
    "{\"type\": \"object\", \"properties\": {\"published\": {\"type\": \"boolean\"}, \"layer\": "
    "{\"type\": [\"string\", \"null\"]}, \"changes\": {\"type\": \"integer\"}, \"conflicts\": "
    "{\"type\": \"array\", \"items\": " ANY_OBJECT "}, \"hint\": {\"type\": \"string\"}}, "
    "\"required\": [\"published\"]}" },
  { "rebase", "Rebase the session",
    "Move the session onto its project's head, merging what both sides changed where it can. "
    "Paths it could not merge are named (markers or their three versions kept): fix them, "
    "resolve them, publish.",
    M, "session_rebase", ON_SESSION, true, false, false, mcp_tool_rebase,
    "{\"type\": \"object\", \"properties\": {" SESSION_ARG
    ", \"restart\": {\"type\": \"boolean\", \"description\": \"End the session's processes "
    "if any run.\"}}, \"additionalProperties\": false}",
    "{\"type\": \"object\", \"properties\": {\"base\": {\"type\": [\"string\", \"null\"]}, "
    "\"status\": {\"type\": \"string\"}, \"merged\": "
    "{\"type\": \"array\"}, \"unmerged\": {\"type\": \"array\"}, \"conflicts\": {\"type\": "
    "\"array\"}}}" },
  { "resolve", "Mark rebased paths resolved",
    "After a rebase left paths unmerged and they are fixed: mark them resolved, as they are "
    "now, so that publish takes them.",
    M, "session_resolved", ON_SESSION, true, false, false, mcp_tool_resolve,
    "{\"type\": \"object\", \"properties\": {" SESSION_ARG
    ", \"paths\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}}}, \"required\": "
    "[\"paths\"], \"additionalProperties\": false}",
    "{\"type\": \"object\", \"properties\": {\"resolved\": {\"type\": \"array\"}}, "
    "\"required\": [\"resolved\"]}" },
  { "discard", "Discard the session",
    "End the session: its processes stop and its files go (unpublished changes to the trash "
    "unless FORCE).",
    M, "session_discard", ON_SESSION, true, false, true, mcp_tool_discard,
    "{\"type\": \"object\", \"properties\": {" SESSION_ARG
    ", \"force\": {\"type\": \"boolean\"}}, \"additionalProperties\": false}",
    "{\"type\": \"object\", \"properties\": {\"discarded\": {\"type\": \"string\"}}, "
    "\"required\": [\"discarded\"]}" },
};

static const char *
scope_name (unsigned scope)
{
  return scope == M ? "manage" : scope == R ? "runtime" : "observe";
}

static json_t *
parse_schema (const char *name, const char *text)
{
  esbx_error_t err = NULL;
  json_t *j = json_parse (text, strlen (text), &err);

  /* The table is this file's: a schema that does not parse is a bug.  */
  if (j == NULL)
    {
      esbx_warn ("mcp: the schema of tool `%s`: %s", name, err->msg);
      abort ();
    }
  return j;
}

void
mcp_tools_load (struct esbx_mcp_server *s)
{
  size_t i;

  s->tools = xmalloc0 (ARRAY_SIZE (tools) * sizeof *s->tools);
  for (i = 0; i < ARRAY_SIZE (tools); i++)
    {
      json_t *in = parse_schema (tools[i].name, tools[i].input);

      if (tools[i].target == ON_SESSION && s->host.session == NULL)
        {
          json_t *req = json_get (in, "required");

          if (req == NULL)
            {
              req = json_new (JSON_ARRAY);
              json_set (in, "required", req);
            }
          json_append (req, json_new_string ("session"));
        }
      s->tools[i].name = tools[i].name;
      s->tools[i].input_schema = in;
      s->tools[i].output_schema = parse_schema (tools[i].name, tools[i].output);
    }
}

void
mcp_tools_free (struct esbx_mcp_server *s)
{
  size_t i;

  for (i = 0; s->tools && i < ARRAY_SIZE (tools); i++)
    {
      json_free (s->tools[i].input_schema);
      json_free (s->tools[i].output_schema);
    }
  free (s->tools);
}

/* Whether this server's caller gets tool T at all.  */
static bool
offered (const struct esbx_mcp_server *s, const struct mcp_tool *t)
{
  if ((s->host.scopes & t->scope) == 0)
    return false;
  return s->host.session == NULL || t->one_session;
}

json_t *
mcp_tools_list (struct esbx_mcp_server *s)
{
  json_t *arr = json_new (JSON_ARRAY), *res = json_new (JSON_OBJECT);
  size_t i;

  for (i = 0; i < ARRAY_SIZE (tools); i++)
    {
      json_t *o, *ann;

      if (!offered (s, &tools[i]))
        continue;
      o = json_new (JSON_OBJECT);
      json_set_string (o, "name", tools[i].name);
      json_set_string (o, "title", tools[i].title);
      json_set_string (o, "description", tools[i].description);
      json_set (o, "inputSchema", json_copy (s->tools[i].input_schema));
      json_set (o, "outputSchema", json_copy (s->tools[i].output_schema));
      ann = json_new (JSON_OBJECT);
      json_set_string (ann, "title", tools[i].title);
      json_set (ann, "readOnlyHint", json_new_bool (tools[i].read_only));
      json_set (ann, "destructiveHint", json_new_bool (tools[i].destructive));
      json_set (ann, "openWorldHint", json_new_bool (false));
      json_set (o, "annotations", ann);
      json_append (arr, o);
    }
  json_set (res, "tools", arr);
  return res;
}

/* The project of session NAME in *PROJECT and its id in *ID (owned);
   false when it does not exist.  */
static bool
session_of (esbx_store_t *store, const char *name, char **project, char **id)
{
  struct esbx_session *rec = NULL;
  esbx_error_t err = NULL;

  if (!esbx_name_valid (name) || esbx_session_load (store, name, &rec, &err) < 0)
    {
      esbx_error_free (&err);
      return false;
    }
  *project = xstrdup (rec->project);
  *id = xstrdup (rec->id);
  esbx_session_free (rec);
  return true;
}

/* The session a call of a session tool acts on, within the server's
   limits: *SESSION borrows from ARGS or the host.  */
static int
resolve_session (struct esbx_mcp_server *s, const struct mcp_tool *t, const json_t *args,
                 const char **session, esbx_error_t *err)
{
  const char *name = json_get_string (args, "session");
  _cleanup_free_ char *project = NULL, *id = NULL;
  const struct esbx_mcp_host *h = &s->host;

  if (h->session)
    {
      if (name && strcmp (name, h->session) != 0)
        return esbx_make_error_kind (err, ESBX_ERR_FORBIDDEN, 0,
                                     "%s: this server is confined to session `%s`: `%s` is out of "
                                     "its reach",
                                     t->name, h->session, name);
      name = h->session;
      if (!session_of (h->store, name, &project, &id))
        return esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0,
                                     "%s: session `%s` (id %s), this server's, no longer exists",
                                     t->name, name, s->session_id);
      if (strcmp (id, s->session_id) != 0)
        return esbx_make_error_kind (err, ESBX_ERR_FORBIDDEN, 0,
                                     "%s: this server is confined to session `%s` (id %s); the "
                                     "session of that name now is another one (id %s)",
                                     t->name, name, s->session_id, id);
    }
  if (name == NULL)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "%s: argument `session` is required",
                                 t->name);
  if (!esbx_name_valid (name))
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "%s: invalid session name `%s`: names must match %s", t->name,
                                 name, ESBX_NAME_RULE);
  if (h->project && (project || session_of (h->store, name, &project, &id))
      && strcmp (project, h->project) != 0)
    return esbx_make_error_kind (err, ESBX_ERR_FORBIDDEN, 0,
                                 "%s: this server is confined to project `%s`: no session `%s` "
                                 "there",
                                 t->name, h->project, name);
  if (h->project && project == NULL)
    return esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0, "%s: session `%s` does not exist",
                                 t->name, name);
  *session = name;
  return 0;
}

/* The project a session_create or session_list call names, within the
   server's limits.  */
static int
resolve_project (struct esbx_mcp_server *s, const struct mcp_tool *t, const json_t *args,
                 const char **project, esbx_error_t *err)
{
  const char *name = json_get_string (args, "project");
  const char *limit = s->host.project;

  if (limit && name && strcmp (name, limit) != 0)
    return esbx_make_error_kind (err, ESBX_ERR_FORBIDDEN, 0,
                                 "%s: this server is confined to project `%s`: `%s` is out of its "
                                 "reach",
                                 t->name, limit, name);
  *project = name ? name : limit;
  if (*project && !esbx_name_valid (*project))
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "%s: invalid project name `%s`: names must match %s", t->name,
                                 *project, ESBX_NAME_RULE);
  if (*project == NULL && t->target == ON_PROJECT)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "%s: argument `project` is required",
                                 t->name);
  return 0;
}

/* Everything that decides whether the call may run, before it does.  */
static int
admit (struct esbx_mcp_server *s, const struct mcp_tool *t, const json_t *args,
       struct esbx_mcp_act *act, esbx_error_t *err)
{
  const struct esbx_mcp_host *h = &s->host;
  char *reason = NULL;

  if ((h->scopes & t->scope) == 0)
    return esbx_make_error_kind (err, ESBX_ERR_FORBIDDEN, 0,
                                 "%s: needs the `%s` scope, which %s%s%s lacks", t->name,
                                 scope_name (t->scope), h->token ? "token `" : "this server",
                                 h->token ? h->token : "", h->token ? "`" : "");
  if (h->session && !t->one_session)
    return esbx_make_error_kind (err, ESBX_ERR_FORBIDDEN, 0,
                                 "%s: this server is confined to session `%s`", t->name,
                                 h->session);
  if (t->target == ON_SESSION && resolve_session (s, t, args, &act->session, err) < 0)
    return -1;
  if (t->target != ON_SESSION && resolve_project (s, t, args, &act->project, err) < 0)
    return -1;
  if (act->content && (h->scopes & ESBX_SCOPE_RUNTIME) == 0)
    return esbx_make_error_kind (err, ESBX_ERR_FORBIDDEN, 0,
                                 "%s: file content (patch) needs the `runtime` scope", t->name);
  if (h->authorize && !h->authorize (h->data, act, &reason))
    {
      esbx_make_error_kind (err, ESBX_ERR_FORBIDDEN, 0, "%s: forbidden: %s", t->name, reason);
      free (reason);
      return -1;
    }
  return 0;
}

/* Every call on a session is an event of it.  */
static void
record (struct esbx_mcp_server *s, const struct esbx_mcp_act *act, const char *session,
        const char *error)
{
  json_t *f;
  esbx_error_t err = NULL;

  if (session == NULL || !esbx_session_exists (s->host.store, session))
    return;
  f = json_new (JSON_OBJECT);
  json_set_string (f, "tool", act->tool);
  json_set_string (f, "transport", s->host.transport ? s->host.transport : "stdio");
  json_set (f, "token", s->host.token ? json_new_string (s->host.token) : json_new (JSON_NULL));
  json_set (f, "ok", json_new_bool (error == NULL));
  if (error)
    json_set_string (f, "error", error);
  if (esbx_event_append (s->host.store, session, "mcp.call", f, &err) < 0)
    {
      esbx_warn ("mcp: %s", err->msg);
      esbx_error_free (&err);
    }
}

static json_t *
text_content (const char *text)
{
  json_t *arr = json_new (JSON_ARRAY), *o = json_new (JSON_OBJECT);

  json_set_string (o, "type", "text");
  json_set_string (o, "text", text ? text : "");
  json_append (arr, o);
  return arr;
}

json_t *
mcp_tools_call (struct esbx_mcp_server *s, const char *name, const json_t *args,
                const json_t *progress_token, int cancel_fd, const struct esbx_mcp_io *io,
                int *code, char **msg)
{
  _cleanup_json_ json_t *empty = NULL;
  const struct mcp_tool *t = NULL;
  struct esbx_mcp_act act = { 0 };
  struct mcp_call c = { 0 };
  esbx_error_t err = NULL;
  const char *made;
  json_t *res;
  bool refused = false;
  size_t i;
  int r;

  for (i = 0; i < ARRAY_SIZE (tools); i++)
    if (strcmp (tools[i].name, name) == 0)
      t = &tools[i];
  if (t == NULL)
    {
      *code = ESBX_MCP_INVALID_PARAMS;
      *msg = xasprintf ("unknown tool `%s`", name);
      return NULL;
    }
  if (args == NULL)
    args = empty = json_new (JSON_OBJECT);
  act.tool = t->name;
  act.route = t->route;
  act.scope = t->scope;
  act.content = t->fn == mcp_tool_diff && json_get_bool (args, "patch", false);
  act.target = json_get_string (args, t->target == ON_SESSION ? "session" : "project");
  if (act.target == NULL)
    act.target = t->target == ON_SESSION ? s->host.session : s->host.project;
  c.srv = s;
  c.store = s->host.store;
  c.args = args;
  c.cancel_fd = cancel_fd;
  c.progress_token = progress_token;
  c.io = io;
  /* Bad arguments change nothing: they are checked before anything runs,
     and then only the table's types reach the tool.  */
  r = mcp_schema_check (s->tools[t - tools].input_schema, args, &err);
  if (r < 0)
    esbx_error_wrap (&err, "%s", t->name);
  else
    refused = (r = admit (s, t, args, &act, &err)) < 0;
  if (r == 0)
    {
      c.session = act.session;
      r = t->fn (&c, &err);
    }
  res = json_new (JSON_OBJECT);
  if (r < 0)
    {
      json_set (res, "content", text_content (err->msg));
      json_set (res, "isError", json_new_bool (true));
    }
  else
    {
      json_set (res, "content", text_content (c.text));
      if (c.structured)
        json_set (res, "structuredContent", json_copy (c.structured));
      json_set (res, "isError", json_new_bool (c.is_error));
    }
  made = (t->fn == mcp_tool_session_create || t->fn == mcp_tool_session_fork) && r == 0
             ? json_get_string (c.structured, "name")
             : act.session;
  /* A refused call leaves nothing in a session it may not reach.  */
  if (!refused && (t->fn != mcp_tool_discard || r < 0))
    record (s, &act, made, r < 0 ? err->msg : c.is_error ? c.text : NULL);
  if (s->host.called)
    s->host.called (s->host.data, &act, r < 0 ? err->msg : c.is_error ? c.text : NULL, refused);
  esbx_error_free (&err);
  json_free (c.structured);
  free (c.text);
  return res;
}
