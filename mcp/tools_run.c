/* The run tool: a command in the session as `esbx exec` runs it
   (exec_capture.h: the same holder, monitor, logs, events and redaction),
   its output bounded with the cut said, progress while it runs, and a
   cancellation or its timeout ending it with what it started.  */
#include "mcp_internal.h"
#include "exec_capture.h"
#include "utils.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define TICK_MS 1000

static void
tick (void *data, int64_t elapsed_ms, const uint64_t total[2], const char *tail)
{
  struct mcp_call *c = data;
  int64_t timeout_s = mcp_arg_int (c, "timeout_s", 0);
  json_t *msg, *params;

  if (c->progress_token == NULL || c->io == NULL || c->io->notify == NULL)
    return;
  msg = json_new (JSON_OBJECT);
  params = json_new (JSON_OBJECT);
  json_set_string (msg, "jsonrpc", "2.0");
  json_set_string (msg, "method", "notifications/progress");
  json_set (params, "progressToken", json_copy (c->progress_token));
  /* Seconds: they only grow, as progress must.  */
  json_set (params, "progress", mcp_number ((double)elapsed_ms / 1000.0));
  if (timeout_s)
    json_set_int (params, "total", timeout_s);
  {
    _cleanup_free_ char *m
        = xasprintf ("running %" PRId64 " s, %" PRIu64 " bytes of output%s%s", elapsed_ms / 1000,
                     total[0] + total[1], tail[0] ? ": " : "", tail);
    json_set_string (params, "message", m);
  }
  json_set (msg, "params", params);
  c->io->notify (c->io->data, msg);
}

/* Stream I as kept: its head, the cut said, its tail.  */
static char *
shown (const struct esbx_exec_capture *r, int i)
{
  if (r->cut[i] == 0)
    return xstrndup (r->out[i], r->len[i]);
  return xasprintf ("%.*s\n[... %" PRIu64 " bytes cut ...]\n%.*s", (int)r->head[i], r->out[i],
                    r->cut[i], (int)(r->len[i] - r->head[i]), r->out[i] + r->head[i]);
}

int
mcp_tool_run (struct mcp_call *c, esbx_error_t *err)
{
  static const char *const names[2] = { "stdout", "stderr" };
  const json_t *cmd = json_get (c->args, "command");
  _cleanup_free_ char **argv = NULL;
  _cleanup_strv_ char **env = mcp_arg_pairs (c, "env");
  _cleanup_free_ char *text = NULL;
  struct esbx_exec_opts o = { 0 };
  struct esbx_exec_capture_opts co = { 0 };
  struct esbx_exec_capture r;
  char *sh[] = { (char *)"/bin/sh", (char *)"-c", NULL, NULL };
  size_t tlen = 0, i;
  FILE *f;
  json_t *res;

  if (cmd->type == JSON_STRING)
    {
      sh[2] = cmd->text;
      o.argv = sh;
    }
  else
    {
      argv = mcp_arg_strings (c, "command");
      if (argv[0] == NULL)
        return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "run: argument `command` is empty");
      o.argv = argv;
    }
  for (i = 0; env[i]; i++)
    if (esbx_exec_check_env (env[i], err) < 0)
      return esbx_error_wrap (err, "run");
  o.env = env;
  o.cwd = mcp_arg_string (c, "cwd");
  o.detach = mcp_arg_bool (c, "background", false);
  o.log_limit = c->srv->host.exec_log_limit;
  co.keep = (size_t)mcp_arg_int (c, "max_output", MCP_DEFAULT_OUTPUT);
  co.cancel_fd = c->cancel_fd;
  co.timeout_ms = mcp_arg_int (c, "timeout_s", 0) * 1000;
  co.tick_ms = c->progress_token ? TICK_MS : 0;
  co.tick = tick;
  co.data = c;
  if (esbx_exec_capture (c->store, c->session, &o, &co, &r, err) < 0)
    return -1;

  res = json_new (JSON_OBJECT);
  json_set_int (res, "exit_code", r.status);
  f = open_memstream (&text, &tlen);
  if (r.timed_out)
    fprintf (f, "timed out after %" PRId64 " s: the command and what it started were ended\n",
             mcp_arg_int (c, "timeout_s", 0));
  else if (r.cancelled)
    fprintf (f, "cancelled: the command and what it started were ended\n");
  if (o.detach)
    fprintf (f, "started in the background; its output goes to the session's logs\n");
  else
    fprintf (f, "exit status %d\n", r.status);
  for (i = 0; i < 2; i++)
    {
      _cleanup_free_ char *s = shown (&r, (int)i);
      _cleanup_free_ char *cut = xasprintf ("%s_cut", names[i]);

      json_set_string (res, names[i], s);
      json_set_int (res, cut, (int64_t)r.cut[i]);
      if (s[0])
        fprintf (f, "--- %s ---\n%s%s", names[i], s, s[strlen (s) - 1] == '\n' ? "" : "\n");
    }
  fclose (f);
  json_set (res, "timed_out", json_new_bool (r.timed_out));
  json_set (res, "cancelled", json_new_bool (r.cancelled));
  json_set (res, "background", json_new_bool (o.detach));
  json_set_int (res, "duration_ms", r.elapsed_ms);
  esbx_exec_capture_free (&r);
  mcp_result_text (c, res, steal_pointer (&text));
  c->is_error = r.timed_out || r.cancelled;
  return 0;
}
