/* The monitor of one `esbx exec` (see exec_internal.h).
 *
 * It runs in a session of its own and stays in the caller's pid namespace
 * and cgroup, out of reach of the command: neither `kill 0` from the
 * command nor a signal to the caller's process group ends it, and a dead
 * caller does not keep the "exec" event or the logs from being written.
 * What the command writes goes to the caller's stdout and stderr (while
 * they take it) and to the logs, of which the first LOG_LIMIT bytes per
 * stream are kept; the event says when a log was cut.  A detached
 * command's output is copied the same way, by a child of the monitor that
 * stays in the background until the command closes it.  */
#include "exec_internal.h"
#include "cgroup.h"
#include "events.h"
#include "fs.h"
#include "proc.h"
#include "secret_redact.h"
#include "sync.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

struct report
{
  esbx_error_t error; /* setup or execve failed */
  pid_t detached_pid;
};

struct stream
{
  int fd;   /* read end, -1 at EOF */
  int pass; /* the caller's stdout or stderr, -1 once it failed */
  int log;
  uint64_t bytes, logged, limit;
  struct esbx_redactor red; /* the session's secrets become ***NAME*** */
};

/* What the command says before it becomes the program (or fails to).  */
static void
read_report (int fd, struct report *r)
{
  struct esbx_sync_msg msg;
  esbx_error_t broken = NULL;
  int n;

  while ((n = esbx_sync_recv (fd, &msg, &r->error, &broken)) > 0)
    {
      if (msg.type == EXEC_DETACHED)
        r->detached_pid = msg.value;
      esbx_sync_msg_clear (&msg);
    }
  esbx_error_free (&broken);
}

/* Pass and log BUF (LEN bytes, redacted already).  */
static void
emit (struct stream *s, const char *buf, size_t len)
{
  size_t keep;

  if (len == 0)
    return;
  /* What the caller and the logs get, redacted: what the event counts.  */
  s->bytes += (uint64_t)len;
  if (s->pass >= 0 && esbx_write_all (s->pass, buf, len) < 0)
    s->pass = -1;
  keep = s->logged >= s->limit                  ? 0
         : s->limit - s->logged < (uint64_t)len ? (size_t)(s->limit - s->logged)
                                                : len;
  if (keep > 0 && esbx_write_all (s->log, buf, keep) == 0)
    s->logged += keep;
}

static bool
pump (struct stream *s)
{
  char buf[65536];
  ssize_t n = TEMP_FAILURE_RETRY (read (s->fd, buf, sizeof buf));
  _cleanup_free_ char *out = NULL;
  size_t len;

  if (n < 0 && errno == EAGAIN)
    return false;
  if (n <= 0)
    {
      /* EIO: the pty's last slave is closed.  What was held back as the
         possible start of a value goes out now.  */
      close (s->fd);
      s->fd = -1;
      out = esbx_redact (&s->red, NULL, 0, true, &len);
      emit (s, out, len);
      esbx_redactor_free (&s->red);
      return false;
    }
  out = esbx_redact (&s->red, buf, (size_t)n, false, &len);
  explicit_bzero (buf, (size_t)n);
  emit (s, out, len);
  return true;
}

/* Copy until the command exits (its pidfd turns readable) and what it
   wrote is drained: a background process that keeps the pipes open does
   not keep us waiting.  With PIDFD -1, until every stream is closed.  */
static void
copy_output (struct stream *st, size_t n, int pidfd)
{
  struct pollfd p[3];
  size_t i, np;

  for (;;)
    {
      np = 0;
      for (i = 0; i < n; i++)
        if (st[i].fd >= 0)
          p[np++] = (struct pollfd){ .fd = st[i].fd, .events = POLLIN };
      if (np == 0)
        return;
      if (pidfd >= 0)
        p[np++] = (struct pollfd){ .fd = pidfd, .events = POLLIN };
      if (poll (p, np, -1) < 0)
        {
          if (errno == EINTR)
            continue;
          return;
        }
      for (i = 0; i < n; i++)
        if (st[i].fd >= 0)
          pump (&st[i]);
      if (pidfd >= 0 && (p[np - 1].revents & POLLIN))
        break;
    }
  for (i = 0; i < n; i++)
    while (st[i].fd >= 0 && pump (&st[i]))
      ;
}

/* The command line as the event keeps it: values of secrets redacted.  */
static json_t *
argv_json (const struct exec_run *r, char *const *argv)
{
  json_t *a = json_new (JSON_ARRAY);

  for (; *argv; argv++)
    {
      _cleanup_free_ char *shown = esbx_redact_string (r->secrets, r->n_secrets, *argv);
      json_append (a, json_new_string (shown));
    }
  return a;
}

static int64_t
tv_usec (const struct timeval *tv)
{
  return (int64_t)tv->tv_sec * 1000000 + tv->tv_usec;
}

static bool
counter_grew (uint64_t before, uint64_t after)
{
  return after != UINT64_MAX && after > (before == UINT64_MAX ? 0 : before);
}

static uint64_t
grown (uint64_t before, uint64_t after)
{
  return after - (before == UINT64_MAX ? 0 : before);
}

static void
limit_events (const struct exec_run *r, const struct esbx_cgroup_usage *before,
              const struct esbx_cgroup_usage *after, json_t *ev)
{
  json_t *f;

  if (counter_grew (before->oom_kills, after->oom_kills))
    {
      f = json_new (JSON_OBJECT);
      json_set_int (f, "seq", (int64_t)r->seq);
      json_set_int (f, "oom_kills", (int64_t)grown (before->oom_kills, after->oom_kills));
      if (after->memory_limit != UINT64_MAX)
        json_set_int (f, "limit", (int64_t)after->memory_limit);
      esbx_event_append_to (r->ss, "limit.memory", f, NULL);
      json_set (ev, "oom_killed", json_new_bool (true));
    }
  if (counter_grew (before->pids_denied, after->pids_denied))
    {
      f = json_new (JSON_OBJECT);
      json_set_int (f, "seq", (int64_t)r->seq);
      json_set_int (f, "forks_denied", (int64_t)grown (before->pids_denied, after->pids_denied));
      if (after->pids_limit != UINT64_MAX)
        json_set_int (f, "limit", (int64_t)after->pids_limit);
      esbx_event_append_to (r->ss, "limit.pids", f, NULL);
      json_set (ev, "pids_limit_hit", json_new_bool (true));
    }
}

static json_t *
base_event (const struct exec_run *r)
{
  json_t *ev = json_new (JSON_OBJECT);
  _cleanup_free_ char *ended = esbx_rfc3339_now ();
  const struct esbx_exec_opts *o = r->opts;

  json_set_int (ev, "seq", (int64_t)r->seq);
  json_set (ev, "argv", argv_json (r, o->argv));
  json_set_string (ev, "cwd", r->cwd);
  json_set (ev, "user", o->user ? json_new_string (o->user) : json_new (JSON_NULL));
  json_set (ev, "detach", json_new_bool (o->detach));
  json_set (ev, "tty", json_new_bool (o->tty));
  json_set_string (ev, "started", r->started);
  json_set_string (ev, "ended", ended);
  json_set_string (ev, "stdout_log", r->outname);
  json_set_string (ev, "stderr_log", r->errname);
  json_set_int (ev, "log_limit", (int64_t)r->log_limit);
  return ev;
}

static void
stream_fields (json_t *ev, const struct stream *st, const char *name)
{
  _cleanup_free_ char *bytes = xasprintf ("%s_bytes", name);
  _cleanup_free_ char *cut = xasprintf ("%s_truncated", name);

  json_set_int (ev, bytes, (int64_t)st->bytes);
  if (st->bytes > st->logged)
    json_set (ev, cut, json_new_bool (true));
}

static void __attribute__ ((noreturn)) verdict (const struct exec_run *r, int status)
{
  esbx_sync_send (r->verdict_w, EXEC_STATUS, status, NULL);
  _exit (0);
}

static void __attribute__ ((noreturn)) fail (const struct exec_run *r, esbx_error_t *err)
{
  esbx_error_send (r->verdict_w, err);
  _exit (0);
}

static void __attribute__ ((noreturn, format (printf, 3, 4)))
fail_errno (const struct exec_run *r, int status, const char *fmt, ...)
{
  esbx_error_t err = NULL;
  _cleanup_free_ char *what = NULL;
  va_list ap;

  va_start (ap, fmt);
  what = xvasprintf (fmt, ap);
  va_end (ap);
  esbx_make_error (&err, status, "%s", what);
  fail (r, &err);
}

static void __attribute__ ((noreturn)) failed (const struct exec_run *r, struct report *rep)
{
  json_t *ev = base_event (r);
  int code = esbx_error_exit_status (rep->error);
  char *msg = esbx_redact_string (r->secrets, r->n_secrets, rep->error->msg);

  /* The message names the command: the event and the caller see it
     redacted.  */
  free (rep->error->msg);
  rep->error->msg = msg;
  json_set_string (ev, "error", msg);
  if (code >= 126)
    json_set_int (ev, "exit_status", code);
  esbx_event_append_to (r->ss, "exec", ev, NULL);
  fail (r, &rep->error);
}

/* The detached command runs on; its output is copied to the logs by this
   process in the background, which lets go of the caller's descriptors.  */
static void __attribute__ ((noreturn))
detached (struct exec_run *r, const struct report *rep, struct stream *st)
{
  json_t *ev = base_event (r);
  int null = TEMP_FAILURE_RETRY (open ("/dev/null", O_RDWR | O_CLOEXEC));

  json_set_int (ev, "exit_status", 0);
  if (rep->detached_pid > 0)
    json_set_int (ev, "pid", rep->detached_pid);
  esbx_event_append_to (r->ss, "exec", ev, NULL);
  if (null >= 0)
    {
      dup2 (null, 0);
      dup2 (null, 1);
      dup2 (null, 2);
      close (null);
    }
  /* The caller reaps this process: the copy goes on in a child of its
     own, which nobody waits for.  */
  if (fork () == 0)
    {
      close (r->verdict_w);
      copy_output (st, 2, -1);
      _exit (0);
    }
  verdict (r, 0);
}

static void __attribute__ ((noreturn))
finished (const struct exec_run *r, pid_t pid, struct stream *st, size_t nst,
          const struct esbx_cgroup_usage *before)
{
  struct esbx_cgroup_usage after;
  _cleanup_close_ int pidfd = pidfd_open (pid, 0);
  struct rusage ru = { 0 };
  int wstatus = 0, status;
  json_t *ev;
  size_t i;

  copy_output (st, nst, pidfd);
  while (TEMP_FAILURE_RETRY (wait4 (pid, &wstatus, 0, &ru)) < 0 && errno != ECHILD)
    ;
  ev = base_event (r);
  if (WIFSIGNALED (wstatus))
    {
      status = 128 + WTERMSIG (wstatus);
      json_set_int (ev, "signal", WTERMSIG (wstatus));
    }
  else
    status = WEXITSTATUS (wstatus);
  json_set_int (ev, "exit_status", status);
  for (i = 0; i < nst; i++)
    stream_fields (ev, &st[i], i == 0 ? "stdout" : "stderr");
  json_set_int (ev, "cpu_user_usec", tv_usec (&ru.ru_utime));
  json_set_int (ev, "cpu_system_usec", tv_usec (&ru.ru_stime));
  json_set_int (ev, "max_rss_bytes", (int64_t)ru.ru_maxrss * 1024);
  if (esbx_cgroup_usage (r->info->cgroup, &after, NULL) == 0)
    limit_events (r, before, &after, ev);
  esbx_event_append_to (r->ss, "exec", ev, NULL);
  verdict (r, status);
}

void
exec_monitor (struct exec_run *r)
{
  struct esbx_cgroup_usage before;
  struct report rep = { 0 };
  struct stream st[2] = {
    { r->out_r, r->opts->detach ? -1 : STDOUT_FILENO, r->outlog, 0, 0, r->log_limit, { 0 } },
    { r->err_r, r->opts->detach ? -1 : STDERR_FILENO, r->errlog, 0, 0, r->log_limit, { 0 } },
  };
  size_t nst = r->err_r >= 0 ? 2 : 1;
  int fds[2], own;

  esbx_redactor_init (&st[0].red, r->secrets, r->n_secrets);
  esbx_redactor_init (&st[1].red, r->secrets, r->n_secrets);
  pid_t pid;

  setsid ();
  signal (SIGPIPE, SIG_IGN);
  for (size_t i = 0; i < nst; i++)
    fcntl (st[i].fd, F_SETFL, fcntl (st[i].fd, F_GETFL) | O_NONBLOCK);
  /* Not the caller's directory: it may be a mount that discard removes.  */
  if (chdir ("/") < 0)
    _exit (125);
  if (pipe2 (fds, O_CLOEXEC) < 0)
    fail_errno (r, errno, "pipe");
  esbx_cgroup_usage (r->info->cgroup, &before, NULL);
  /* The command is born in the session's pid namespace; this process
     stays where it is, and so do its later children (the copier of a
     detached command's output).  */
  own = TEMP_FAILURE_RETRY (open ("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC));
  if (own < 0)
    fail_errno (r, errno, "open `/proc/self/ns/pid`");
  /* A gVisor sandbox's processes live in gVisor's kernel: `runsc exec`
     stays in the host's.  */
  if (r->info->gvisor_id == NULL && setns (r->holder_pidfd, CLONE_NEWPID) < 0)
    fail_errno (r, errno, "join the pid namespace of the holder");
  pid = fork ();
  if (pid == 0)
    {
      close (fds[0]);
      exec_child (r, fds[1]);
    }
  if (pid < 0)
    fail_errno (r, errno, "fork");
  if (r->info->gvisor_id == NULL && setns (own, CLONE_NEWPID) < 0)
    fail_errno (r, errno, "return to the own pid namespace");
  close (own);
  close (fds[1]);
  if (r->in >= 0)
    close (r->in);
  if (r->out >= 0 && r->out != r->in)
    close (r->out);
  if (r->err >= 0 && r->err != r->in && r->err != r->out)
    close (r->err);
  esbx_sync_send (r->verdict_w, EXEC_FORKED, (int)pid, NULL);

  read_report (fds[0], &rep);
  close (fds[0]);
  if (rep.error)
    {
      while (TEMP_FAILURE_RETRY (waitpid (pid, NULL, 0)) < 0 && errno != ECHILD)
        ;
      failed (r, &rep);
    }
  if (r->opts->detach)
    {
      while (TEMP_FAILURE_RETRY (waitpid (pid, NULL, 0)) < 0 && errno != ECHILD)
        ;
      detached (r, &rep, st);
    }
  finished (r, pid, st, nst, &before);
}
