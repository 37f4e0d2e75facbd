/* The tools on sessions as wholes: make, list, inspect, fork, snapshot,
   their changes and events, publish, rebase, resolve, discard.  Each calls
   the lifecycle API (sandbox.h) as the CLI's verb and the gateway's route
   of the same name do, and answers the same JSON views.  */
#include "mcp_internal.h"
#include "events.h"
#include "sandbox.h"
#include "secret_redact.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static int
duration_arg (struct mcp_call *c, const char *key, int64_t *out, esbx_error_t *err)
{
  const char *s = mcp_arg_string (c, key);

  if (s && esbx_parse_duration (s, out, err) < 0)
    return esbx_error_wrap (err, "argument `%s`", key);
  return 0;
}

/* {"name": NAME, "session": its view}.  */
static void
made_result (struct mcp_call *c, const char *name, const char *snapshot)
{
  json_t *o = json_new (JSON_OBJECT), *view;
  esbx_error_t err = NULL;

  json_set_string (o, "name", name);
  if (snapshot)
    json_set_string (o, "snapshot", snapshot);
  view = esbx_sandbox_inspect (c->store, name, &err);
  esbx_error_free (&err);
  if (view && snapshot == NULL)
    json_set (o, "session", view);
  else
    json_free (view);
  mcp_result_text (c, o,
                   xasprintf ("session `%s` made%s%s", name, snapshot ? " from snapshot " : "",
                              snapshot ? snapshot : ""));
}

/* A call's grant (the gateway's token rules), then the session is made
   under the lock it gave.  */
static int
granted (struct mcp_call *c, const char *project, struct esbx_session_opts *o, int *lock,
         esbx_error_t *err)
{
  const struct esbx_mcp_host *h = &c->srv->host;
  char *reason = NULL;

  *lock = -1;
  if (h->grant_session && !h->grant_session (h->data, project, o, lock, &reason))
    {
      esbx_make_error_kind (err, ESBX_ERR_FORBIDDEN, 0, "forbidden: %s", reason);
      free (reason);
      return -1;
    }
  return 0;
}

int
mcp_tool_session_create (struct mcp_call *c, esbx_error_t *err)
{
  const char *project = mcp_arg_string (c, "project");
  _cleanup_free_ char **allow = mcp_arg_strings (c, "allow"), **secrets = NULL, *name = NULL;
  _cleanup_strv_ char **labels = mcp_arg_pairs (c, "labels"), **env = mcp_arg_pairs (c, "env");
  _cleanup_close_ int lock = -1;
  struct esbx_session_opts o = { 0 };
  const json_t *v;
  const char *key;
  size_t i;

  if (project == NULL)
    project = c->srv->host.project;
  json_object_foreach (json_get (c->args, "env"), i, key, v)
    if (esbx_session_env_check (key, v->text, err) < 0)
      return esbx_error_wrap (err, "session_create");
  secrets = mcp_arg_strings (c, "secrets");
  o.name = mcp_arg_string (c, "name");
  o.base = mcp_arg_string (c, "base");
  o.snapshot = mcp_arg_string (c, "from_snapshot");
  o.network = mcp_arg_string (c, "network");
  o.labels = labels;
  o.env = env;
  o.allow = allow[0] ? allow : NULL;
  o.secrets = secrets[0] ? secrets : NULL;
  o.token = c->srv->host.token;
  if (duration_arg (c, "ttl", &o.ttl, err) < 0 || duration_arg (c, "idle_ttl", &o.idle_ttl, err) < 0
      || granted (c, project, &o, &lock, err) < 0)
    return esbx_error_wrap (err, "session_create");
  if (esbx_sandbox_create (c->store, project, &o, &name, err) < 0)
    return -1;
  made_result (c, name, NULL);
  return 0;
}

static bool
visible (const struct esbx_session *s, const void *data)
{
  const struct esbx_mcp_server *srv = data;

  if (srv->host.project && strcmp (s->project, srv->host.project) != 0)
    return false;
  return srv->host.sees == NULL || srv->host.sees (srv->host.data, s);
}

int
mcp_tool_session_list (struct mcp_call *c, esbx_error_t *err)
{
  const char *project = mcp_arg_string (c, "project");
  json_t *arr, *o;

  if (project == NULL)
    project = c->srv->host.project;
  arr = esbx_sandbox_list (c->store, project, visible, c->srv, err);
  if (arr == NULL)
    return -1;
  o = json_new (JSON_OBJECT);
  json_set (o, "sessions", arr);
  mcp_result (c, o);
  return 0;
}

int
mcp_tool_session_inspect (struct mcp_call *c, esbx_error_t *err)
{
  json_t *view = esbx_sandbox_inspect (c->store, c->session, err), *o;

  if (view == NULL)
    return -1;
  o = json_new (JSON_OBJECT);
  json_set (o, "session", view);
  mcp_result (c, o);
  return 0;
}

int
mcp_tool_session_fork (struct mcp_call *c, esbx_error_t *err)
{
  _cleanup_free_ char *snap = NULL, *name = NULL, *project = NULL;
  _cleanup_close_ int lock = -1;
  struct esbx_session_opts o = { 0 };
  struct esbx_session *rec = NULL;
  json_t *res;

  if (esbx_session_load (c->store, c->session, &rec, err) < 0)
    return -1;
  project = xstrdup (rec->project);
  esbx_session_free (rec);
  o.name = mcp_arg_string (c, "name");
  o.token = c->srv->host.token;
  if (duration_arg (c, "ttl", &o.ttl, err) < 0 || duration_arg (c, "idle_ttl", &o.idle_ttl, err) < 0
      || granted (c, project, &o, &lock, err) < 0)
    return esbx_error_wrap (err, "session_fork");
  if (esbx_sandbox_fork (c->store, c->session, &o, &snap, &name, err) < 0)
    return -1;
  res = json_new (JSON_OBJECT);
  json_set_string (res, "name", name);
  json_set_string (res, "snapshot", snap);
  mcp_result_text (
      c, res, xasprintf ("session `%s` forked from `%s` (snapshot `%s`)", name, c->session, snap));
  return 0;
}

int
mcp_tool_session_snapshot (struct mcp_call *c, esbx_error_t *err)
{
  _cleanup_free_ char *snap = NULL;
  json_t *res;

  if (esbx_sandbox_snapshot (c->store, c->session, mcp_arg_string (c, "name"), &snap, err) < 0)
    return -1;
  res = json_new (JSON_OBJECT);
  json_set_string (res, "snapshot", snap);
  mcp_result_text (c, res, xasprintf ("snapshot `%s` of session `%s`", snap, c->session));
  return 0;
}

/* The patch of the session's text files, MCP_MAX_PATCH bytes at most.  */
static int
patch (struct mcp_call *c, esbx_error_t *err)
{
  _cleanup_close_ int fd = memfd_create ("esbx-patch", MFD_CLOEXEC);
  _cleanup_free_ char *text = NULL;
  FILE *f;
  struct stat st;
  size_t n;
  json_t *o;
  int r;

  if (fd < 0 || (f = fdopen (fcntl (fd, F_DUPFD_CLOEXEC, 3), "w")) == NULL)
    return esbx_make_error (err, errno, "diff: memfd");
  r = esbx_session_patch (c->store, c->session, f, err);
  fclose (f);
  if (r < 0)
    return -1;
  if (fstat (fd, &st) < 0)
    return esbx_make_error (err, errno, "diff: stat the patch");
  n = (size_t)st.st_size < MCP_MAX_PATCH ? (size_t)st.st_size : MCP_MAX_PATCH;
  text = xmalloc (n + 1);
  if (pread (fd, text, n, 0) != (ssize_t)n)
    return esbx_make_error (err, errno, "diff: read the patch");
  text[n] = '\0';
  o = json_new (JSON_OBJECT);
  json_set_string (o, "patch", text);
  json_set (o, "truncated", json_new_bool ((size_t)st.st_size > n));
  mcp_result_text (c, o,
                   (size_t)st.st_size > n ? xasprintf ("%s\n[patch cut at %zu of %lld bytes]", text,
                                                       n, (long long)st.st_size)
                                          : steal_pointer (&text));
  return 0;
}

int
mcp_tool_diff (struct mcp_call *c, esbx_error_t *err)
{
  struct esbx_changeset cs = { 0 };
  _cleanup_free_ char *text = NULL;
  size_t len = 0, i;
  FILE *f;
  json_t *o;

  if (mcp_arg_bool (c, "patch", false))
    return patch (c, err);
  if (esbx_session_diff (c->store, c->session,
                         mcp_arg_bool (c, "include_ignored", false) ? ESBX_CHANGES_INCLUDE_IGNORED
                                                                    : 0,
                         &cs, NULL, err)
          < 0
      || esbx_redact_changes (c->store, c->session, &cs, err) < 0)
    {
      esbx_changeset_free (&cs);
      return -1;
    }
  /* One line a path as `esbx diff` prints it: kind, path.  */
  f = open_memstream (&text, &len);
  for (i = 0; f && i < cs.n; i++)
    fprintf (f, "%c %s\n",
             cs.v[i].kind == ESBX_ADDED     ? 'A'
             : cs.v[i].kind == ESBX_DELETED ? 'D'
                                            : 'M',
             cs.v[i].path);
  if (f)
    fclose (f);
  o = json_new (JSON_OBJECT);
  json_set (o, "changes", esbx_changeset_json (&cs));
  esbx_changeset_free (&cs);
  mcp_result_text (c, o, text && len ? steal_pointer (&text) : xstrdup ("no changes"));
  return 0;
}

struct event_walk
{
  json_t *arr;
  size_t limit;
};

/* Stops on the LIMIT-th event, once it is taken: the reader's offset is
   then just past it, where the next call goes on.  */
static int
take_event (const json_t *ev, void *data)
{
  struct event_walk *w = data;

  json_append (w->arr, json_copy (ev));
  return json_len (w->arr) >= w->limit ? -1 : 0;
}

int
mcp_tool_events (struct mcp_call *c, esbx_error_t *err)
{
  struct event_walk w
      = { .arr = json_new (JSON_ARRAY), .limit = (size_t)mcp_arg_int (c, "limit", MCP_MAX_EVENTS) };
  off_t offset = (off_t)mcp_arg_int (c, "offset", 0);
  json_t *o;

  if (esbx_events_read (c->store, c->session, &offset, take_event, &w, err) < 0)
    {
      json_free (w.arr);
      return -1;
    }
  o = json_new (JSON_OBJECT);
  json_set (o, "events", w.arr);
  json_set_int (o, "offset", (int64_t)offset);
  mcp_result (c, o);
  return 0;
}
