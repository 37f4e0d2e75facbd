/* The gateway's exec: POST /v1/sessions/S/exec runs a command in the
   session as `esbx exec` does and hands back its output and exit status.

   With "stream": true the answer is a stream of JSON lines
   (application/x-ndjson), sent while the command runs:

     {"stdout": TEXT} or {"stdout_hex": HEX}   a piece of its stdout
     {"stderr": TEXT} or {"stderr_hex": HEX}   a piece of its stderr
     {"status": N}                             the end: its exit status
     {"error": MSG, "kind": K, "code": N}      the end: it stopped short

   esbxd holds one piece of output (EXEC_CHUNK bytes) at a time: when the
   client reads slowly, the command waits on its pipe as it would on a
   terminal, and esbxd's memory does not grow with the output.  Without
   "stream" the answer is one JSON object with the first EXEC_KEEP bytes of
   each stream (stdout_truncated / stderr_truncated say when there was
   more).  Either way the session's logs keep what the shim keeps
   (exec.h: log_limit, from esbxd's --exec-log-limit).  */
#include "routes_exec.h"
#include "exec.h"
#include "fs.h"
#include "sync.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/pidfd.h>
#include <sys/wait.h>
#include <unistd.h>

#define EXEC_CHUNK      (64u * 1024) /* bytes of output per piece */
#define EXEC_KEEP       (1u << 20)   /* bytes per stream in a one-document answer */
#define HANGUP_GRACE_MS 5000         /* a client went away: SIGHUP, then SIGKILL after this */

static const char *const stream_name[2] = { "stdout", "stderr" };

struct gateway_exec
{
  pid_t pid; /* the child running esbx_exec_run; 0 once reaped */
  int pidfd;
  int fd[2]; /* read ends of its stdout and stderr; -1 at their end */
  /* memfd: the error of esbx_exec_run when it failed (esbx_error_send),
     read once the child is gone; not a pipe, whose end the monitor that
     esbx_exec_run forks may hold long after.  */
  int report;
  esbx_error_t failure; /* what REPORT held, once the child has ended */
  int wstatus;
  bool stream; /* frames for the client, or KEEP for one document */

  /* An incomplete UTF-8 sequence at the end of a piece, held back for the
     next one, so that text split across reads stays text.  */
  char tail[2][4];
  size_t ntail[2];

  char *frames; /* stream: encoded lines not yet handed to MHD */
  size_t len, pos;
  char *keep[2]; /* one document: the first EXEC_KEEP bytes of each stream */
  size_t nkeep[2];
  bool truncated[2];
  bool had_output;
  bool ended;
};

/* ---- the child ---------------------------------------------------------- */

/* esbx_exec_run joins the holder's pid namespace and redirects signals in
   the calling process, so it runs in a child of its own; the daemon's
   threads never see that.  */
static void __attribute__ ((noreturn))
child (struct esbx_gateway_ctx *ctx, const struct esbx_exec_opts *o, int out, int err_w, int report)
{
  int devnull = open ("/dev/null", O_RDONLY | O_CLOEXEC);
  esbx_error_t err = NULL;
  sigset_t none;
  int status;

  sigemptyset (&none);
  sigprocmask (SIG_SETMASK, &none, NULL);
  if (devnull < 0 || dup2 (devnull, 0) < 0 || dup2 (out, 1) < 0 || dup2 (err_w, 2) < 0)
    _exit (125);
  /* The child holds nothing of esbxd but what esbx_exec_run needs: the
     monitor it forks outlives it and must not keep clients' connections or
     listening sockets open.  */
  esbx_close_fds_except (ctx->store->rootfd, report);
  if (esbx_exec_run (ctx->store, ctx->arg, o, &status, &err) < 0)
    {
      esbx_error_send (report, &err);
      _exit (125);
    }
  _exit (status & 0xff);
}

static int
nonblocking_pipe (int p[2])
{
  if (pipe2 (p, O_CLOEXEC) < 0)
    return -1;
  return fcntl (p[0], F_SETFL, O_NONBLOCK);
}

static int
start (struct esbx_gateway_ctx *ctx, const struct esbx_exec_opts *o, struct gateway_exec *r)
{
  int out[2] = { -1, -1 }, err[2] = { -1, -1 };

  r->fd[0] = r->fd[1] = r->pidfd = -1;
  r->report = memfd_create ("esbx-exec-report", MFD_CLOEXEC);
  if (r->report < 0 || nonblocking_pipe (out) < 0 || nonblocking_pipe (err) < 0)
    goto fail;
  r->pid = fork ();
  if (r->pid < 0)
    goto fail;
  if (r->pid == 0)
    child (ctx, o, out[1], err[1], r->report);
  close (out[1]);
  close (err[1]);
  r->fd[0] = out[0];
  r->fd[1] = err[0];
  r->pidfd = pidfd_open (r->pid, 0);
  return 0;
fail:
  esbx_gateway_reply_fail (ctx, ESBX_ERR_FAILED, errno, "exec: %s", strerror (errno));
  for (int i = 0; i < 2; i++)
    {
      if (out[i] >= 0)
        close (out[i]);
      if (err[i] >= 0)
        close (err[i]);
    }
  if (r->report >= 0)
    close (r->report);
  r->report = -1;
  r->pid = 0;
  return -1;
}

/* ---- output ------------------------------------------------------------- */

/* Bytes at the end of DATA that begin a UTF-8 sequence it does not finish.  */
static size_t
incomplete_tail (const char *data, size_t len)
{
  size_t k;

  for (k = 1; k <= 3 && k <= len; k++)
    {
      unsigned char c = (unsigned char)data[len - k];
      size_t need;

      if ((c & 0xc0) == 0x80)
        continue;
      need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
      return need > k ? k : 0;
    }
  return 0;
}

/* {NAME: text} when DATA is text, else {NAME_hex: hex}: the client writes
   back the exact bytes either way.  */
static void
set_bytes (json_t *o, const char *name, const char *data, size_t len)
{
  _cleanup_free_ char *key = NULL, *text = NULL;

  if (esbx_utf8_valid (data, len) && memchr (data, '\0', len) == NULL)
    {
      text = xstrndup (data, len);
      json_set_string (o, name, text);
      return;
    }
  key = xasprintf ("%s_hex", name);
  text = esbx_hex ((const unsigned char *)data, len);
  json_set_string (o, key, text);
}

static void
add_frame (struct gateway_exec *r, json_t *o)
{
  size_t n;
  _cleanup_free_ char *line = json_serialize (o, false, &n);

  json_free (o);
  r->frames = xrealloc (r->frames, r->len + n + 1);
  memcpy (r->frames + r->len, line, n);
  r->frames[r->len + n] = '\n';
  r->len += n + 1;
}

static void
keep_bytes (struct gateway_exec *r, int i, const char *data, size_t len)
{
  size_t room = EXEC_KEEP - r->nkeep[i];

  if (len > room)
    {
      r->truncated[i] = true;
      len = room;
    }
  r->keep[i] = xrealloc (r->keep[i], r->nkeep[i] + len + 1);
  memcpy (r->keep[i] + r->nkeep[i], data, len);
  r->nkeep[i] += len;
}

/* A piece of stream I (LAST: its end).  */
static void
add_output (struct gateway_exec *r, int i, const char *buf, size_t n, bool last)
{
  _cleanup_free_ char *data = xmalloc (r->ntail[i] + n + 1);
  size_t len = r->ntail[i] + n, hold;
  json_t *o;

  memcpy (data, r->tail[i], r->ntail[i]);
  memcpy (data + r->ntail[i], buf, n);
  r->had_output |= len > 0;
  if (!r->stream)
    {
      r->ntail[i] = 0;
      return keep_bytes (r, i, data, len);
    }
  hold = last ? 0 : incomplete_tail (data, len);
  memcpy (r->tail[i], data + len - hold, hold);
  r->ntail[i] = hold;
  if (len == hold)
    return;
  o = json_new (JSON_OBJECT);
  set_bytes (o, stream_name[i], data, len - hold);
  add_frame (r, o);
}

static void
reap (struct gateway_exec *r, bool wait)
{
  pid_t p;

  while ((p = waitpid (r->pid, &r->wstatus, wait ? 0 : WNOHANG)) < 0 && errno == EINTR)
    ;
  if (p != 0)
    r->pid = 0;
}

/* Read what stream I has.  Once the child is gone its output is all in
   the pipe, and nothing more is coming even when a copy of the write end
   lingers in another process: "nothing now" is then the end.  */
static void
read_stream (struct gateway_exec *r, int i, bool *got)
{
  char buf[EXEC_CHUNK];
  ssize_t n = TEMP_FAILURE_RETRY (read (r->fd[i], buf, sizeof buf));

  if (n > 0)
    {
      add_output (r, i, buf, (size_t)n, false);
      *got = true;
      return;
    }
  if (n < 0 && errno == EAGAIN && r->pid != 0)
    return;
  add_output (r, i, "", 0, true);
  close (r->fd[i]);
  r->fd[i] = -1;
}

/* The error esbx_exec_run sent, if it failed: the child has ended, so the
   report holds all it ever will.  */
static void
read_failure (struct gateway_exec *r)
{
  struct esbx_sync_msg msg;

  if (r->report < 0)
    return;
  if (lseek (r->report, 0, SEEK_SET) < 0)
    {
      esbx_make_error (&r->failure, errno, "exec: read the report of its child");
      return;
    }
  /* FAILURE gets the child's error, or why it could not be read.  */
  esbx_sync_recv (r->report, &msg, &r->failure, &r->failure);
  esbx_sync_msg_clear (&msg);
}

static int
exit_status (int wstatus)
{
  return WIFEXITED (wstatus) ? WEXITSTATUS (wstatus) : 128 + WTERMSIG (wstatus);
}

static void
add_end (struct gateway_exec *r)
{
  json_t *o;

  r->ended = true;
  read_failure (r);
  if (!r->stream)
    return;
  o = json_new (JSON_OBJECT);
  if (r->failure)
    {
      json_set_error (o, r->failure);
    }
  else
    json_set_int (o, "status", exit_status (r->wstatus));
  add_frame (r, o);
}

/* Wait for the command's next piece of output, or its end.  Without a
   pidfd (kernels before 5.3) the child is looked at every 100 ms.  */
static void
step (struct gateway_exec *r)
{
  bool got = false;
  int i;

  while (!got && !r->ended)
    {
      struct pollfd p[3] = {
        { .fd = r->fd[0], .events = POLLIN },
        { .fd = r->fd[1], .events = POLLIN },
        { .fd = r->pid ? r->pidfd : -1, .events = POLLIN },
      };

      if (r->fd[0] < 0 && r->fd[1] < 0)
        {
          if (r->pid)
            reap (r, true);
          add_end (r);
          break;
        }
      if (poll (p, 3, r->pid == 0 ? 0 : r->pidfd >= 0 ? -1 : 100) < 0 && errno != EINTR)
        {
          if (r->pid)
            reap (r, true);
          add_end (r);
          break;
        }
      if (r->pid && (p[2].revents || r->pidfd < 0))
        reap (r, false);
      for (i = 0; i < 2 && !got; i++)
        if (r->fd[i] >= 0 && (p[i].revents || r->pid == 0))
          read_stream (r, i, &got);
    }
}

/* ---- the answer --------------------------------------------------------- */

static void
run_free (struct gateway_exec *r)
{
  int i;

  for (i = 0; i < 2; i++)
    {
      if (r->fd[i] >= 0)
        close (r->fd[i]);
      free (r->keep[i]);
    }
  /* The client went away before the end: hang up on the command as a
     closed terminal would, and do not wait for ever.  */
  if (r->pid)
    {
      struct pollfd p = { .fd = r->pidfd, .events = POLLIN };

      kill (r->pid, SIGHUP);
      if (r->pidfd < 0 || poll (&p, 1, HANGUP_GRACE_MS) <= 0)
        kill (r->pid, SIGKILL);
      reap (r, true);
    }
  if (r->pidfd >= 0)
    close (r->pidfd);
  if (r->report >= 0)
    close (r->report);
  esbx_error_free (&r->failure);
  free (r->frames);
  free (r);
}

static ssize_t
stream_read (void *cls, uint64_t pos, char *buf, size_t max)
{
  struct gateway_exec *r = cls;
  size_t n;

  (void)pos;
  if (r->pos == r->len)
    {
      r->pos = r->len = 0;
      while (r->len == 0 && !r->ended)
        step (r);
      if (r->len == 0)
        return MHD_CONTENT_READER_END_OF_STREAM;
    }
  n = r->len - r->pos < max ? r->len - r->pos : max;
  memcpy (buf, r->frames + r->pos, n);
  r->pos += n;
  return (ssize_t)n;
}

static void
stream_free (void *cls)
{
  run_free (cls);
}

/* The command could not run at all: the HTTP status says so, as before
   any output (esbx_http_status_of_error: 422 when it could not be
   started).  */
static bool
reply_failure (struct esbx_gateway_ctx *ctx, struct gateway_exec *r)
{
  if (r->failure == NULL)
    return false;
  esbx_gateway_reply_err (ctx, &r->failure);
  return true;
}

static void
reply_stream (struct esbx_gateway_ctx *ctx, struct gateway_exec *r)
{
  /* Until the first piece of output, a failure to start is still an
     HTTP error.  */
  while (r->len == 0 && !r->ended)
    step (r);
  if (r->ended && !r->had_output && reply_failure (ctx, r))
    return run_free (r);
  ctx->stream = MHD_create_response_from_callback (MHD_SIZE_UNKNOWN, EXEC_CHUNK, stream_read, r,
                                                   stream_free);
  if (ctx->stream == NULL)
    {
      esbx_gateway_reply_fail (ctx, ESBX_ERR_FAILED, errno, "exec: cannot start the output stream");
      return run_free (r);
    }
  MHD_add_response_header (ctx->stream, MHD_HTTP_HEADER_CONTENT_TYPE, "application/x-ndjson");
  ctx->status = MHD_HTTP_OK;
}

static void
reply_document (struct esbx_gateway_ctx *ctx, struct gateway_exec *r)
{
  json_t *res;
  int i;

  while (!r->ended)
    step (r);
  if (reply_failure (ctx, r))
    return run_free (r);
  res = json_new (JSON_OBJECT);
  json_set_int (res, "status", exit_status (r->wstatus));
  for (i = 0; i < 2; i++)
    {
      set_bytes (res, stream_name[i], r->keep[i] ? r->keep[i] : "", r->nkeep[i]);
      if (r->truncated[i])
        {
          _cleanup_free_ char *key = xasprintf ("%s_truncated", stream_name[i]);
          json_set (res, key, json_new_bool (true));
        }
    }
  esbx_gateway_reply_json (ctx, MHD_HTTP_OK, res);
  run_free (r);
}

/* The log limit of this exec: what the client asks, never more than
   esbxd's --exec-log-limit (or the shim's default without it).  */
static int
log_limit (struct esbx_gateway_ctx *ctx, uint64_t *limit)
{
  const char *s = json_get_string (ctx->json, "log_limit");
  uint64_t max = ctx->exec_log_limit, asked;
  esbx_error_t err = NULL;

  *limit = max;
  if (s == NULL)
    return 0;
  if (esbx_parse_size (s, &asked, &err) < 0 || asked == 0)
    {
      esbx_gateway_reply_fail (ctx, ESBX_ERR_USAGE, 0,
                               "field `log_limit` must be a size of at least 1 byte, e.g. 1M");
      esbx_error_free (&err);
      return -1;
    }
  if (max == 0)
    max = ESBX_EXEC_LOG_LIMIT_DEFAULT;
  *limit = asked < max ? asked : max;
  return 0;
}

void
esbx_gateway_session_exec (struct esbx_gateway_ctx *ctx)
{
  static const char *const fields[]
      = { "argv", "env", "cwd", "user", "detach", "stream", "log_limit", NULL };
  struct esbx_exec_opts o = { 0 };
  _cleanup_free_ char **argv = NULL, **env = NULL;
  struct gateway_exec *r;
  const json_t *a;
  esbx_error_t err = NULL;
  size_t i;

  if (esbx_gateway_check_body (ctx, fields, "aassbbs") < 0
      || esbx_gateway_session_must_exist (ctx) < 0)
    return;
  a = json_get (ctx->json, "argv");
  if (a == NULL || a->type != JSON_ARRAY || json_len (a) == 0)
    return esbx_gateway_reply_fail (ctx, ESBX_ERR_USAGE, 0,
                                    "field `argv` is required: a non-empty array of strings");
  argv = esbx_gateway_strings (a);
  env = esbx_gateway_strings (json_get (ctx->json, "env"));
  for (i = 0; env[i]; i++)
    if (esbx_exec_check_env (env[i], &err) < 0)
      return esbx_gateway_reply_err (ctx, &err);
  if (log_limit (ctx, &o.log_limit) < 0)
    return;
  o.argv = argv;
  o.env = env;
  o.cwd = json_get_string (ctx->json, "cwd");
  o.user = json_get_string (ctx->json, "user");
  o.detach = json_get_bool (ctx->json, "detach", false);

  r = xmalloc0 (sizeof *r);
  r->stream = json_get_bool (ctx->json, "stream", false);
  if (start (ctx, &o, r) < 0)
    return free (r);
  if (r->stream)
    reply_stream (ctx, r);
  else
    reply_document (ctx, r);
}
