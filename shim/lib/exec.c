#include "exec.h"
#include "cgroup.h"
#include "confine.h"
#include "syscall_filter.h"
#include "events.h"
#include "fs.h"
#include "holder.h"
#include "log.h"
#include "owner.h"
#include "path.h"
#include "proc.h"
#include "text.h"
#include "utils.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

#define LOGS_DIR     "logs"
#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define HOSTNAME_MAX 64

extern char **environ;

static volatile sig_atomic_t forward_to;

static void
forward_signal (int sig)
{
  if (forward_to > 0)
    kill (forward_to, sig);
}

int
esbx_exec_check_env (const char *kv, esbx_error_t *err)
{
  const char *eq = strchr (kv, '=');
  const char *p;

  if (eq == NULL || eq == kv || isdigit ((unsigned char)kv[0]))
    goto bad;
  for (p = kv; p < eq; p++)
    if (!isalnum ((unsigned char)*p) && *p != '_')
      goto bad;
  return 0;
bad:
  return esbx_make_error_code (err, ESBX_EXIT_USAGE, 0,
                               "invalid --env `%s`: expected NAME=VALUE with NAME made of "
                               "letters, digits and _",
                               kv);
}

static bool
parse_id (const char *s, size_t len, unsigned long *out)
{
  char buf[16];
  char *end;

  if (len == 0 || len >= sizeof buf)
    return false;
  memcpy (buf, s, len);
  buf[len] = '\0';
  for (size_t i = 0; i < len; i++)
    if (!isdigit ((unsigned char)buf[i]))
      return false;
  errno = 0;
  *out = strtoul (buf, &end, 10);
  return errno == 0 && *out < UINT_MAX;
}

int
esbx_exec_parse_user (const char *s, uid_t *uid, gid_t *gid, esbx_error_t *err)
{
  const char *colon = strchr (s, ':');
  unsigned long u, g;

  if (!parse_id (s, colon ? (size_t)(colon - s) : strlen (s), &u)
      || (colon && !parse_id (colon + 1, strlen (colon + 1), &g)))
    return esbx_make_error_code (err, ESBX_EXIT_USAGE, 0,
                                 "invalid --user `%s`: expected UID[:GID] (numbers)", s);
  *uid = (uid_t)u;
  *gid = (gid_t)(colon ? g : u);
  return 0;
}

/* The directory the command starts in, as seen inside the session.  */
static int
resolve_cwd (const char *workspace, const char *cwd, char **out, esbx_error_t *err)
{
  _cleanup_free_ char *clean = NULL;
  size_t wlen = strlen (workspace);
  const char *rest = cwd;
  esbx_error_t cerr = NULL;

  if (cwd == NULL)
    {
      *out = xstrdup (workspace);
      return 0;
    }
  if (cwd[0] == '/')
    {
      if (strncmp (cwd, workspace, wlen) != 0 || (cwd[wlen] != '\0' && cwd[wlen] != '/'))
        return esbx_make_error_code (err, ESBX_EXIT_USAGE, 0,
                                     "--cwd `%s` is outside the workspace `%s`", cwd, workspace);
      rest = cwd + wlen;
    }
  if (esbx_clean_relpath (rest, true, &clean, &cerr) < 0)
    {
      esbx_error_free (&cerr);
      return esbx_make_error_code (err, ESBX_EXIT_USAGE, 0,
                                   "--cwd `%s` is outside the workspace `%s`", cwd, workspace);
    }
  *out = clean[0] ? xasprintf ("%s/%s", workspace, clean) : xstrdup (workspace);
  return 0;
}

static char **
build_env (const char *session, char *const *extra)
{
  struct strv env = { 0 };
  const char *term = getenv ("TERM");
  size_t i, k, klen;

  strv_push (&env, xstrdup ("PATH=" DEFAULT_PATH));
  strv_push (&env, xstrdup ("HOME=/tmp"));
  strv_push (&env, xasprintf ("HOSTNAME=%.*s", HOSTNAME_MAX, session));
  strv_push (&env, xasprintf ("ESBX_SESSION=%s", session));
  if (term)
    strv_push (&env, xasprintf ("TERM=%s", term));
  for (i = 0; extra && extra[i]; i++)
    {
      klen = strchr (extra[i], '=') - extra[i] + 1;
      for (k = 0; k < env.n; k++)
        if (strncmp (env.v[k], extra[i], klen) == 0)
          break;
      if (k < env.n)
        {
          free (env.v[k]);
          env.v[k] = xstrdup (extra[i]);
        }
      else
        strv_push (&env, xstrdup (extra[i]));
    }
  return env.v;
}

/* The next command number of the session, under the logs lock.  */
static int
next_seq (int dfd, unsigned long *seq, esbx_error_t *err)
{
  _cleanup_close_ int lock = -1;
  _cleanup_free_ char *buf = NULL;
  char out[32];
  size_t len;

  if (mkdirat (dfd, LOGS_DIR, 0755) < 0 && errno != EEXIST)
    return esbx_make_error (err, errno, "mkdir `%s`", LOGS_DIR);
  lock = esbx_lock_at (dfd, LOGS_DIR "/.lock", true, true, err);
  if (lock < 0)
    return -1;
  *seq = 1;
  if (esbx_read_file_at (dfd, LOGS_DIR "/seq", 64, &buf, &len, NULL) == 0)
    *seq = strtoul (buf, NULL, 10) + 1;
  snprintf (out, sizeof out, "%lu\n", *seq);
  {
    _cleanup_close_ int ldfd = esbx_open_dir_at (dfd, LOGS_DIR, err);
    if (ldfd < 0)
      return -1;
    /* Not fsynced: the logs it numbers are not either.  */
    return esbx_replace_file_at (ldfd, "seq", out, strlen (out), 0644, err);
  }
}

static int
open_log (int dfd, const char *name, esbx_error_t *err)
{
  int fd = TEMP_FAILURE_RETRY (
      openat (dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0640));
  if (fd < 0)
    return esbx_make_error (err, errno, "create `%s`", name);
  return fd;
}

struct child
{
  int pidfd; /* the holder */
  const char *cgroup;
  const char *cwd;
  const struct esbx_exec_opts *opts;
  bool set_user;
  uid_t uid;
  gid_t gid;
  char **env;
  int in, out, err; /* -1: keep */
  int report;       /* CLOEXEC pipe: "E msg" setup, "X errno msg" exec, "P pid" */
};

static void __attribute__ ((noreturn))
child_fail (int report, char kind, int status, esbx_error_t *err)
{
  _cleanup_free_ char *line
      = xasprintf ("%c%d %s\n", kind, status, err && *err ? (*err)->msg : "failed");
  esbx_write_all (report, line, strlen (line));
  _exit (127);
}

/* Between fork and exec.  Single-threaded parent: allocation is safe.  */
static void __attribute__ ((noreturn)) run_child (const struct child *c)
{
  esbx_error_t err = NULL;
  sigset_t none;
  int fd;

  sigemptyset (&none);
  sigprocmask (SIG_SETMASK, &none, NULL);
  signal (SIGPIPE, SIG_DFL);
  /* The cgroup is written through the host's /sys: before the mount
     namespace changes.  */
  if (esbx_cgroup_enter (c->cgroup, 0, &err) < 0)
    child_fail (c->report, 'E', 0, &err);
  if (setns (c->pidfd, CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWNET) < 0)
    {
      esbx_make_error (&err, errno, "join the namespaces of the holder");
      child_fail (c->report, 'E', 0, &err);
    }
  if (chdir (c->cwd) < 0)
    {
      esbx_make_error (&err, errno, "--cwd `%s`", c->cwd);
      child_fail (c->report, 'E', 0, &err);
    }
  if (c->opts->detach)
    {
      fd = open ("/dev/null", O_RDONLY | O_CLOEXEC);
      if (fd < 0 || dup2 (fd, 0) < 0)
        {
          esbx_make_error (&err, errno, "open /dev/null");
          child_fail (c->report, 'E', 0, &err);
        }
      setsid ();
    }
  if ((c->out >= 0 && dup2 (c->out, 1) < 0) || (c->err >= 0 && dup2 (c->err, 2) < 0))
    {
      esbx_make_error (&err, errno, "dup2");
      child_fail (c->report, 'E', 0, &err);
    }
  /* Whatever the caller of esbx left open (bats keeps fd 3) must not leak
     into the session, nor keep that caller waiting on a detached command.  */
  syscall (SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC);
  if (esbx_confine_user (c->set_user, c->uid, c->gid, &err) < 0)
    child_fail (c->report, 'E', 0, &err);
  environ = c->env;
  if (esbx_seccomp_load (&err) < 0)
    child_fail (c->report, 'E', 0, &err);
  if (c->opts->detach)
    {
      pid_t pid = fork ();
      char line[32];

      if (pid < 0)
        {
          esbx_make_error (&err, errno, "fork");
          child_fail (c->report, 'E', 0, &err);
        }
      if (pid > 0)
        {
          snprintf (line, sizeof line, "P%d\n", (int)pid);
          esbx_write_all (c->report, line, strlen (line));
          _exit (0);
        }
    }
  execvp (c->opts->argv[0], c->opts->argv);
  {
    int saved = errno;
    esbx_make_error (&err, saved, "exec `%s`", c->opts->argv[0]);
    child_fail (c->report, 'X', saved, &err);
  }
}

struct report
{
  bool setup_failed, exec_failed;
  int exec_errno;
  char *msg;
  pid_t detached_pid;
};

static void
read_report (int fd, struct report *r)
{
  char buf[8192];
  size_t used = 0;
  ssize_t n;
  char *line, *save = NULL;

  while (used < sizeof buf - 1
         && (n = TEMP_FAILURE_RETRY (read (fd, buf + used, sizeof buf - 1 - used))) > 0)
    used += (size_t)n;
  buf[used] = '\0';
  for (line = strtok_r (buf, "\n", &save); line; line = strtok_r (NULL, "\n", &save))
    {
      char *sp = strchr (line, ' ');

      if (line[0] == 'P')
        r->detached_pid = atoi (line + 1);
      else if ((line[0] == 'E' || line[0] == 'X') && sp)
        {
          r->setup_failed = line[0] == 'E';
          r->exec_failed = line[0] == 'X';
          r->exec_errno = atoi (line + 1);
          free (r->msg);
          r->msg = xstrdup (sp + 1);
        }
    }
}

struct stream
{
  int fd;   /* read end of the command's pipe, -1 at EOF */
  int pass; /* our stdout/stderr, -1 once it failed */
  int log;
  uint64_t bytes;
};

enum pumped
{
  PUMP_DATA,
  PUMP_AGAIN,
  PUMP_EOF,
};

static enum pumped
pump (struct stream *s)
{
  char buf[65536];
  ssize_t n = TEMP_FAILURE_RETRY (read (s->fd, buf, sizeof buf));

  if (n < 0 && errno == EAGAIN)
    return PUMP_AGAIN;
  if (n <= 0)
    {
      close (s->fd);
      s->fd = -1;
      return PUMP_EOF;
    }
  s->bytes += (uint64_t)n;
  if (s->pass >= 0 && esbx_write_all (s->pass, buf, (size_t)n) < 0)
    s->pass = -1;
  esbx_write_all (s->log, buf, (size_t)n);
  return PUMP_DATA;
}

/* Tee the command's output until it exits and what it wrote is drained: a
   background process that keeps the pipes open does not keep us waiting.  */
static void
tee_output (struct stream *st, size_t n, int child_pidfd)
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
      p[np++] = (struct pollfd){ .fd = child_pidfd, .events = POLLIN };
      if (poll (p, np, -1) < 0)
        {
          if (errno == EINTR)
            continue;
          return;
        }
      for (i = 0; i < n; i++)
        if (st[i].fd >= 0)
          pump (&st[i]);
      if (p[np - 1].revents & POLLIN)
        break;
    }
  for (i = 0; i < n; i++)
    while (st[i].fd >= 0 && pump (&st[i]) == PUMP_DATA)
      ;
}

static json_t *
argv_json (char *const *argv)
{
  json_t *a = json_new (JSON_ARRAY);

  for (; *argv; argv++)
    json_append (a, json_new_string (*argv));
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

static void
limit_events (esbx_store_t *store, const char *session, unsigned long seq,
              const struct esbx_cgroup_usage *before, const struct esbx_cgroup_usage *after,
              json_t *ev)
{
  json_t *f;

  if (counter_grew (before->oom_kills, after->oom_kills))
    {
      f = json_new (JSON_OBJECT);
      json_set_int (f, "seq", (int64_t)seq);
      json_set_int (
          f, "oom_kills",
          (int64_t)(after->oom_kills - (before->oom_kills == UINT64_MAX ? 0 : before->oom_kills)));
      if (after->memory_limit != UINT64_MAX)
        json_set_int (f, "limit", (int64_t)after->memory_limit);
      esbx_event_append (store, session, "limit.memory", f, NULL);
      json_set (ev, "oom_killed", json_new_bool (true));
    }
  if (counter_grew (before->pids_denied, after->pids_denied))
    {
      f = json_new (JSON_OBJECT);
      json_set_int (f, "seq", (int64_t)seq);
      json_set_int (f, "forks_denied",
                    (int64_t)(after->pids_denied
                              - (before->pids_denied == UINT64_MAX ? 0 : before->pids_denied)));
      if (after->pids_limit != UINT64_MAX)
        json_set_int (f, "limit", (int64_t)after->pids_limit);
      esbx_event_append (store, session, "limit.pids", f, NULL);
      json_set (ev, "pids_limit_hit", json_new_bool (true));
    }
}

static int
run_in_holder (esbx_store_t *store, const char *session, const struct esbx_exec_opts *opts,
               const struct esbx_holder_info *info, const char *cwd, int dfd, int *status,
               esbx_error_t *err)
{
  _cleanup_close_ int pidfd = -1, outlog = -1, errlog = -1, child_pidfd = -1;
  _cleanup_close_ int ownpid = -1;
  _cleanup_close_ int rep_r = -1, rep_w = -1, out_r = -1, out_w = -1, err_r = -1, err_w = -1;
  _cleanup_strv_ char **env = NULL;
  _cleanup_free_ char *outname = NULL, *errname = NULL, *started = NULL, *ended = NULL;
  struct esbx_cgroup_usage before, after;
  struct report rep = { 0 };
  struct child c = { 0 };
  struct sigaction sa = { 0 }, old[4];
  static const int fwd[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };
  struct rusage ru = { 0 };
  unsigned long seq = 0;
  int fds[2], wstatus = 0;
  json_t *ev;
  pid_t pid;
  size_t i;

  if (opts->user && esbx_exec_parse_user (opts->user, &c.uid, &c.gid, err) < 0)
    return -1;
  c.set_user = opts->user != NULL;
  pidfd = pidfd_open (info->pid, 0);
  if (pidfd < 0 || !esbx_proc_alive (info->pid, info->starttime))
    return esbx_make_error (err, ESRCH, "holder of session `%s` is gone", session);

  if (next_seq (dfd, &seq, err) < 0)
    return -1;
  outname = xasprintf (LOGS_DIR "/%lu.out", seq);
  errname = xasprintf (LOGS_DIR "/%lu.err", seq);
  outlog = open_log (dfd, outname, err);
  if (outlog < 0)
    return -1;
  errlog = open_log (dfd, errname, err);
  if (errlog < 0)
    return -1;

  if (pipe2 (fds, O_CLOEXEC) < 0)
    return esbx_make_error (err, errno, "pipe");
  rep_r = fds[0];
  rep_w = fds[1];
  if (!opts->detach)
    {
      if (pipe2 (fds, O_CLOEXEC) < 0)
        return esbx_make_error (err, errno, "pipe");
      out_r = fds[0];
      out_w = fds[1];
      if (pipe2 (fds, O_CLOEXEC) < 0)
        return esbx_make_error (err, errno, "pipe");
      err_r = fds[0];
      err_w = fds[1];
    }
  env = build_env (session, opts->env);
  c.pidfd = pidfd;
  c.cgroup = info->cgroup;
  c.cwd = cwd;
  c.opts = opts;
  c.env = env;
  c.in = -1;
  c.out = opts->detach ? outlog : out_w;
  c.err = opts->detach ? errlog : err_w;
  c.report = rep_w;

  {
    json_t *f = json_new (JSON_OBJECT);
    json_set_int (f, "seq", (int64_t)seq);
    json_set (f, "argv", argv_json (opts->argv));
    esbx_event_append (store, session, "exec.start", f, NULL);
  }
  esbx_cgroup_usage (info->cgroup, &before, NULL);
  started = esbx_rfc3339_now ();

  /* The child is born in the session's pid namespace while we stay where we
     are and can wait for it.  Then our own children go back to being born
     in ours: esbxd forks other things later.  */
  ownpid = TEMP_FAILURE_RETRY (open ("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC));
  if (ownpid < 0)
    return esbx_make_error (err, errno, "open `/proc/self/ns/pid`");
  if (setns (pidfd, CLONE_NEWPID) < 0)
    return esbx_make_error (err, errno, "join the pid namespace of the holder");
  pid = fork ();
  if (pid == 0)
    run_child (&c);
  if (setns (ownpid, CLONE_NEWPID) < 0)
    esbx_warn ("exec in session `%s`: cannot return to the own pid namespace: %s", session,
               strerror (errno));
  if (pid < 0)
    return esbx_make_error (err, errno, "fork");

  forward_to = pid;
  sa.sa_handler = forward_signal;
  sigemptyset (&sa.sa_mask);
  for (i = 0; i < ARRAY_SIZE (fwd); i++)
    sigaction (fwd[i], &sa, &old[i]);
  signal (SIGPIPE, SIG_IGN);
  close (take_fd (&rep_w));
  close (take_fd (&out_w));
  close (take_fd (&err_w));

  read_report (rep_r, &rep);
  if (!opts->detach && !rep.setup_failed && !rep.exec_failed)
    {
      struct stream st[2]
          = { { out_r, STDOUT_FILENO, outlog, 0 }, { err_r, STDERR_FILENO, errlog, 0 } };

      fcntl (out_r, F_SETFL, O_NONBLOCK);
      fcntl (err_r, F_SETFL, O_NONBLOCK);
      child_pidfd = pidfd_open (pid, 0);
      tee_output (st, 2, child_pidfd);
      out_r = st[0].fd;
      err_r = st[1].fd;
      ev = json_new (JSON_OBJECT);
      json_set_int (ev, "stdout_bytes", (int64_t)st[0].bytes);
      json_set_int (ev, "stderr_bytes", (int64_t)st[1].bytes);
    }
  else
    ev = json_new (JSON_OBJECT);
  while (TEMP_FAILURE_RETRY (wait4 (pid, &wstatus, 0, &ru)) < 0 && errno != ECHILD)
    ;
  forward_to = 0;
  for (i = 0; i < ARRAY_SIZE (fwd); i++)
    sigaction (fwd[i], &old[i], NULL);
  ended = esbx_rfc3339_now ();

  json_set_int (ev, "seq", (int64_t)seq);
  json_set (ev, "argv", argv_json (opts->argv));
  json_set_string (ev, "cwd", cwd);
  json_set (ev, "user", opts->user ? json_new_string (opts->user) : json_new (JSON_NULL));
  json_set (ev, "detach", json_new_bool (opts->detach));
  json_set_string (ev, "started", started);
  json_set_string (ev, "ended", ended);
  json_set_string (ev, "stdout_log", outname);
  json_set_string (ev, "stderr_log", errname);

  if (rep.setup_failed || rep.exec_failed)
    {
      int code = rep.exec_errno == ENOENT ? 127 : 126;

      json_set_string (ev, "error", rep.msg);
      if (rep.exec_failed)
        json_set_int (ev, "exit_status", code);
      esbx_event_append (store, session, "exec", ev, NULL);
      if (rep.exec_failed)
        esbx_make_error_code (err, code, 0, "session `%s`: %s", session, rep.msg);
      else
        esbx_make_error (err, 0, "exec in session `%s`: %s", session, rep.msg);
      free (rep.msg);
      return -1;
    }

  if (opts->detach)
    {
      *status = 0;
      if (rep.detached_pid > 0)
        json_set_int (ev, "pid", rep.detached_pid);
      esbx_event_append (store, session, "exec", ev, NULL);
      return 0;
    }

  if (WIFSIGNALED (wstatus))
    {
      *status = 128 + WTERMSIG (wstatus);
      json_set_int (ev, "signal", WTERMSIG (wstatus));
    }
  else
    *status = WEXITSTATUS (wstatus);
  json_set_int (ev, "exit_status", *status);
  json_set_int (ev, "cpu_user_usec", tv_usec (&ru.ru_utime));
  json_set_int (ev, "cpu_system_usec", tv_usec (&ru.ru_stime));
  json_set_int (ev, "max_rss_bytes", (int64_t)ru.ru_maxrss * 1024);
  if (esbx_cgroup_usage (info->cgroup, &after, NULL) == 0)
    limit_events (store, session, seq, &before, &after, ev);
  esbx_event_append (store, session, "exec", ev, NULL);
  return 0;
}

int
esbx_exec_run (esbx_store_t *store, const char *session, const struct esbx_exec_opts *opts,
               int *status, esbx_error_t *err)
{
  struct esbx_holder_info info = { 0 };
  struct esbx_session *s = NULL;
  _cleanup_free_ char *cwd = NULL, *marker = NULL;
  _cleanup_close_ int dfd = -1;
  uid_t uid;
  gid_t gid;
  size_t i;
  int ret;

  if (opts->argv == NULL || opts->argv[0] == NULL)
    return esbx_make_error_code (err, ESBX_EXIT_USAGE, 0, "no command to run");
  if (opts->user && esbx_exec_parse_user (opts->user, &uid, &gid, err) < 0)
    return -1;
  for (i = 0; opts->env && opts->env[i]; i++)
    if (esbx_exec_check_env (opts->env[i], err) < 0)
      return -1;
  if (esbx_session_load (store, session, &s, err) < 0)
    return -1;
  ret = resolve_cwd (s->workspace ? s->workspace : "/workspace", opts->cwd, &cwd, err);
  esbx_session_free (s);
  if (ret < 0)
    return -1;

  dfd = esbx_session_open_dir (store, session, err);
  if (dfd < 0)
    return -1;
  if (esbx_owner_begin (store, session, &marker, err) < 0)
    return -1;
  ret = esbx_holder_ensure (store, session, &info, err);
  if (ret == 0)
    ret = run_in_holder (store, session, opts, &info, cwd, dfd, status, err);
  esbx_holder_info_free (&info);
  esbx_owner_end (store, session, marker);
  return ret;
}
