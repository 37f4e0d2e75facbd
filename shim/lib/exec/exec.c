/* `esbx exec`: the caller's side (see exec_internal.h for the monitor and
 * the command).  It checks the request, starts the holder if needed,
 * numbers the command and opens its logs, writes "exec.start", then forks
 * the monitor and, until the monitor's verdict, relays stdin to the
 * command (a pipe, or the pty under --tty, with the caller's terminal in
 * raw mode), forwards SIGINT, SIGTERM, SIGHUP and SIGQUIT to it and, under
 * --tty, the window size.  */
#include "exec.h"
#include "egress.h"
#include "events.h"
#include "exec_internal.h"
#include "fs.h"
#include "holder.h"
#include "log.h"
#include "owner.h"
#include "path.h"
#include "proc.h"
#include "secret_redact.h"
#include "sandbox_session.h"
#include "sync.h"
#include "text.h"
#include "utils.h"

#include <ctype.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#define LOGS_DIR     "logs"
#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define ROOT_HOME    "/root"
#define HOSTNAME_MAX 64
#define RELAY_BUF    65536

static volatile sig_atomic_t command_pidfd = -1;
static volatile sig_atomic_t pty_master = -1;

static void
forward_signal (int sig)
{
  if (command_pidfd >= 0)
    pidfd_send_signal (command_pidfd, sig, NULL, 0);
}

static void
forward_winsize (int sig)
{
  struct winsize ws;
  int saved = errno;

  (void)sig;
  if (pty_master >= 0 && ioctl (STDIN_FILENO, TIOCGWINSZ, &ws) == 0)
    ioctl (pty_master, TIOCSWINSZ, &ws);
  errno = saved;
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
  return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
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
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
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
        return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                     "--cwd `%s` is outside the workspace `%s`", cwd, workspace);
      rest = cwd + wlen;
    }
  if (esbx_clean_relpath (rest, true, &clean, &cerr) < 0)
    {
      esbx_error_free (&cerr);
      return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                   "--cwd `%s` is outside the workspace `%s`", cwd, workspace);
    }
  *out = clean[0] ? xasprintf ("%s/%s", workspace, clean) : xstrdup (workspace);
  return 0;
}

/* Set KV ("K=V") in ENV, replacing an earlier K.  */
static void
env_set (struct strv *env, char *kv)
{
  size_t k, klen = strchr (kv, '=') - kv + 1;

  for (k = 0; k < env->n; k++)
    if (strncmp (env->v[k], kv, klen) == 0)
      {
        free (env->v[k]);
        env->v[k] = kv;
        return;
      }
  strv_push (env, kv);
}

/* The defaults, then the session's env (session.json), its secrets held
   as variables, then --env.  HOME
   is /root, a private tmpfs of the session's root, for uid 0; /tmp, the
   one directory everyone may write, for other users.  */
/* An egress session's way out is the store's proxy on its gateway, and
   the proxy's CA is in the bundle its root trusts (the holder binds it on
   CA_BUNDLE): the variables the usual programs read for both.  */
#define CA_BUNDLE "/etc/ssl/certs/ca-certificates.crt"
static void
egress_env (const struct esbx_sandbox_session *ss, struct strv *env)
{
  static const char *const proxy_vars[]
      = { "HTTP_PROXY",  "HTTPS_PROXY",      "http_proxy",
          "https_proxy", "npm_config_proxy", "npm_config_https_proxy" };
  static const char *const ca_vars[]
      = { "SSL_CERT_FILE",  "CURL_CA_BUNDLE",      "REQUESTS_CA_BUNDLE",
          "GIT_SSL_CAINFO", "NODE_EXTRA_CA_CERTS", "npm_config_cafile" };
  char gw[INET_ADDRSTRLEN], addr[INET_ADDRSTRLEN];
  esbx_error_t e = NULL;
  size_t i;
  int slot;

  if (ss->rec->network == NULL || strcmp (ss->rec->network, "egress") != 0)
    return;
  slot = esbx_egress_slot (ss->store, ss->name);
  if (slot < 0 || esbx_egress_slot_addresses (slot, gw, addr, &e) < 0)
    {
      esbx_error_free (&e);
      return;
    }
  for (i = 0; i < ARRAY_SIZE (proxy_vars); i++)
    env_set (env, xasprintf ("%s=http://%s:%d", proxy_vars[i], gw, ESBX_EGRESS_PROXY_PORT));
  env_set (env, xstrdup ("NO_PROXY=localhost,127.0.0.1"));
  env_set (env, xstrdup ("no_proxy=localhost,127.0.0.1"));
  for (i = 0; i < ARRAY_SIZE (ca_vars); i++)
    env_set (env, xasprintf ("%s=" CA_BUNDLE, ca_vars[i]));
}

static char **
build_env (const struct exec_run *r, bool root, char *const *extra)
{
  const struct esbx_sandbox_session *ss = r->ss;
  struct strv env = { 0 };
  const char *term = getenv ("TERM"), *key;
  const json_t *v;
  size_t i;

  strv_push (&env, xstrdup ("PATH=" DEFAULT_PATH));
  strv_push (&env, xstrdup (root ? "HOME=" ROOT_HOME : "HOME=/tmp"));
  strv_push (&env, xasprintf ("HOSTNAME=%.*s", HOSTNAME_MAX, ss->name));
  strv_push (&env, xasprintf ("ESBX_SESSION=%s", ss->name));
  if (term)
    strv_push (&env, xasprintf ("TERM=%s", term));
  json_object_foreach (ss->rec->env, i, key, v)
    env_set (&env, xasprintf ("%s=%s", key, v->text));
  egress_env (ss, &env);
  for (i = 0; i < r->n_secrets; i++)
    if (r->secrets[i].env && r->secrets[i].inject)
      env_set (&env, xasprintf ("%s=%s", r->secrets[i].env, r->secrets[i].placeholder));
    else if (r->secrets[i].env)
      env_set (&env, xasprintf ("%s=%.*s", r->secrets[i].env, (int)r->secrets[i].len,
                                r->secrets[i].value));
  for (i = 0; extra && extra[i]; i++)
    env_set (&env, xstrdup (extra[i]));
  return env.v;
}

/* The next command number of the session, under the logs lock.  LOGS/seq
   is rewritten in place (a few bytes at offset 0, under the lock) rather
   than through a temp file and a rename: no inode is created and freed for
   every command.  Not fsynced: the logs it numbers are not either.  */
static int
next_seq (int dfd, unsigned long *seq, esbx_error_t *err)
{
  _cleanup_close_ int lock = -1, fd = -1;
  char buf[32];
  ssize_t n;
  int len;

  if (mkdirat (dfd, LOGS_DIR, 0755) < 0 && errno != EEXIST)
    return esbx_make_error (err, errno, "mkdir `%s`", LOGS_DIR);
  lock = esbx_lock_at (dfd, LOGS_DIR "/.lock", true, true, err);
  if (lock < 0)
    return -1;
  fd = TEMP_FAILURE_RETRY (
      openat (dfd, LOGS_DIR "/seq", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (fd < 0)
    return esbx_make_error (err, errno, "open `%s/seq`", LOGS_DIR);
  n = TEMP_FAILURE_RETRY (pread (fd, buf, sizeof buf - 1, 0));
  buf[n > 0 ? n : 0] = '\0';
  *seq = strtoul (buf, NULL, 10) + 1;
  len = snprintf (buf, sizeof buf, "%lu\n", *seq);
  if (TEMP_FAILURE_RETRY (pwrite (fd, buf, (size_t)len, 0)) != len || ftruncate (fd, len) < 0)
    return esbx_make_error (err, errno, "write `%s/seq`", LOGS_DIR);
  return 0;
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

static uint64_t
default_log_limit (void)
{
  const char *v = getenv ("ESBX_EXEC_LOG_LIMIT");
  uint64_t n = 0;
  esbx_error_t perr = NULL;

  if (v && *v && esbx_parse_size (v, &n, &perr) == 0 && n > 0)
    return n;
  esbx_error_free (&perr);
  return ESBX_EXEC_LOG_LIMIT_DEFAULT;
}

static void
close_fd (int *fd)
{
  if (*fd >= 0)
    close (*fd);
  *fd = -1;
}

static void
close_run (struct exec_run *r)
{
  int *fds[] = { &r->outlog, &r->errlog, &r->in,    &r->out,       &r->err,
                 &r->in_w,   &r->out_r,  &r->err_r, &r->verdict_w, &r->holder_pidfd };
  size_t i;

  /* The pty's slave is IN, OUT and ERR at once.  */
  if (r->out == r->in)
    r->out = -1;
  if (r->err == r->in)
    r->err = -1;
  for (i = 0; i < ARRAY_SIZE (fds); i++)
    close_fd (fds[i]);
  for (i = 0; r->env && r->env[i]; i++)
    {
      explicit_bzero (r->env[i], strlen (r->env[i]));
      free (r->env[i]);
    }
  free (r->env);
  esbx_secrets_free (r->secrets, r->n_secrets);
  free (r->cwd);
  free (r->outname);
  free (r->errname);
  free (r->started);
}

static int
make_pipe (int *rd, int *wr, esbx_error_t *err)
{
  int fds[2];

  if (pipe2 (fds, O_CLOEXEC) < 0)
    return esbx_make_error (err, errno, "pipe");
  *rd = fds[0];
  *wr = fds[1];
  return 0;
}

/* The command's stdio: none for a detached command's stdin, the pty's
   slave under --tty, pipes otherwise.  */
static int
make_stdio (struct exec_run *r, esbx_error_t *err)
{
  if (r->opts->tty)
    {
      if (exec_pty_open (r->info->pid, &r->out_r, &r->in, err) < 0)
        return -1;
      r->out = r->err = r->in;
      r->in_w = TEMP_FAILURE_RETRY (fcntl (r->out_r, F_DUPFD_CLOEXEC, 3));
      if (r->in_w < 0)
        return esbx_make_error (err, errno, "dup");
      return 0;
    }
  if (!r->opts->detach && make_pipe (&r->in, &r->in_w, err) < 0)
    return -1;
  if (make_pipe (&r->out_r, &r->out, err) < 0 || make_pipe (&r->err_r, &r->err, err) < 0)
    return -1;
  return 0;
}

static int
prepare (struct exec_run *r, esbx_error_t *err)
{
  const struct esbx_exec_opts *o = r->opts;
  int dfd = r->ss->dfd;

  r->holder_pidfd = pidfd_open (r->info->pid, 0);
  if (r->holder_pidfd < 0 || !esbx_proc_alive (r->info->pid, r->info->starttime))
    return esbx_make_error (err, ESRCH, "holder of session `%s` is gone", r->ss->name);
  if (next_seq (dfd, &r->seq, err) < 0)
    return -1;
  r->outname = xasprintf (LOGS_DIR "/%lu.out", r->seq);
  r->errname = xasprintf (LOGS_DIR "/%lu.err", r->seq);
  r->outlog = open_log (dfd, r->outname, err);
  if (r->outlog < 0)
    return -1;
  r->errlog = open_log (dfd, r->errname, err);
  if (r->errlog < 0)
    return -1;
  r->log_limit = o->log_limit ? o->log_limit : default_log_limit ();
  if (esbx_session_secrets (r->ss->store, r->ss->rec, &r->secrets, &r->n_secrets, err) < 0)
    return -1;
  /* A proxy that ended (killed, crashed) comes back on its ports.  */
  if (r->ss->rec->network && strcmp (r->ss->rec->network, "egress") == 0)
    {
      struct esbx_egress_proxy p = { 0 };
      esbx_error_t e = NULL;

      if (esbx_egress_proxy_ensure (r->ss->store, &p, &e) < 0)
        {
          esbx_warn ("%s", e->msg);
          esbx_error_free (&e);
        }
      esbx_egress_proxy_clear (&p);
    }
  r->env = build_env (r, !r->set_user || r->uid == 0, o->env);
  if (make_stdio (r, err) < 0)
    return -1;
  if (o->tty && isatty (STDIN_FILENO))
    {
      struct winsize ws;
      if (ioctl (STDIN_FILENO, TIOCGWINSZ, &ws) == 0)
        ioctl (r->out_r, TIOCSWINSZ, &ws);
    }
  return 0;
}

struct relay
{
  int from, to; /* -1 once done */
  char buf[RELAY_BUF];
  size_t len, off;
};

static void
relay_step (struct relay *rl, short from_ev, short to_ev)
{
  ssize_t n;

  if (rl->len == rl->off && (from_ev & (POLLIN | POLLHUP | POLLERR | POLLNVAL)))
    {
      n = TEMP_FAILURE_RETRY (read (rl->from, rl->buf, sizeof rl->buf));
      if (n <= 0)
        {
          rl->from = -1;
          return;
        }
      rl->len = (size_t)n;
      rl->off = 0;
    }
  if (rl->len > rl->off && (to_ev & (POLLOUT | POLLERR | POLLHUP)))
    {
      n = TEMP_FAILURE_RETRY (write (rl->to, rl->buf + rl->off, rl->len - rl->off));
      if (n < 0 && errno == EAGAIN)
        return;
      if (n <= 0)
        {
          rl->from = rl->to = -1;
          return;
        }
      rl->off += (size_t)n;
    }
}

struct verdict
{
  bool done;
  int status;
  esbx_error_t error;
};

/* Read one message of the monitor; false once it is gone.  */
static bool
read_verdict (int fd, const struct esbx_exec_opts *o, struct verdict *v)
{
  struct esbx_sync_msg msg;
  esbx_error_t broken = NULL;
  int n = esbx_sync_recv (fd, &msg, &v->error, &broken);

  esbx_error_free (&broken);
  if (n <= 0)
    return false;
  if (msg.type == EXEC_FORKED)
    {
      int pidfd = pidfd_open ((pid_t)msg.value, 0);
      if (pidfd >= 0)
        command_pidfd = pidfd;
      if (o->started)
        o->started ((pid_t)msg.value, o->started_data);
    }
  else if (msg.type == EXEC_STATUS)
    {
      v->done = true;
      v->status = msg.value;
    }
  else if (msg.type == ESBX_SYNC_ERROR)
    v->done = true;
  esbx_sync_msg_clear (&msg);
  return true;
}

/* Relay stdin and collect the monitor's lines until its verdict.  */
static void
serve (struct exec_run *r, int verdict_r, struct verdict *v)
{
  static struct relay in;

  in.from = r->opts->detach ? -1 : STDIN_FILENO;
  in.to = r->in_w;
  in.len = in.off = 0;
  if (in.to >= 0)
    fcntl (in.to, F_SETFL, O_NONBLOCK);
  while (!v->done)
    {
      struct pollfd p[3] = {
        { .fd = verdict_r, .events = POLLIN },
        { .fd = in.len == in.off ? in.from : -1, .events = POLLIN },
        { .fd = in.len > in.off ? in.to : -1, .events = POLLOUT },
      };

      if (poll (p, 3, -1) < 0)
        {
          if (errno == EINTR)
            continue;
          break;
        }
      if (in.from >= 0 && in.to >= 0 && (p[1].revents || p[2].revents))
        {
          relay_step (&in, p[1].revents, p[2].revents);
          /* End of stdin: the command reads EOF (the pty: its EOF char).  */
          if (in.from < 0 && r->in_w >= 0)
            {
              if (r->opts->tty)
                esbx_write_all (r->in_w, "\004", 1);
              else
                {
                  close (r->in_w);
                  r->in_w = -1;
                }
            }
        }
      if (p[0].revents && !read_verdict (verdict_r, r->opts, v))
        break;
    }
}

static void
set_signals (bool on, struct sigaction *saved)
{
  static const int fwd[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGWINCH, SIGPIPE };
  struct sigaction sa = { 0 };
  size_t i;

  sigemptyset (&sa.sa_mask);
  for (i = 0; i < ARRAY_SIZE (fwd); i++)
    {
      if (!on)
        {
          sigaction (fwd[i], &saved[i], NULL);
          continue;
        }
      sa.sa_handler = fwd[i] == SIGWINCH  ? forward_winsize
                      : fwd[i] == SIGPIPE ? SIG_IGN
                                          : forward_signal;
      sigaction (fwd[i], &sa, &saved[i]);
    }
}

static int
run (struct exec_run *r, int *status, esbx_error_t *err)
{
  _cleanup_close_ int verdict_r = -1;
  struct verdict v = { 0 };
  struct sigaction saved[6];
  struct termios raw, old;
  bool restore_tty = false;
  int wstatus;
  pid_t mon;

  if (make_pipe (&verdict_r, &r->verdict_w, err) < 0)
    return -1;
  {
    json_t *f = json_new (JSON_OBJECT);
    json_t *a = json_new (JSON_ARRAY);
    char *const *p;

    /* Events never hold a secret's value.  */
    for (p = r->opts->argv; *p; p++)
      {
        _cleanup_free_ char *shown = esbx_redact_string (r->secrets, r->n_secrets, *p);
        json_append (a, json_new_string (shown));
      }
    json_set_int (f, "seq", (int64_t)r->seq);
    json_set (f, "argv", a);
    esbx_event_append_to (r->ss, "exec.start", f, NULL);
  }
  r->started = esbx_rfc3339_now ();
  mon = fork ();
  if (mon < 0)
    return esbx_make_error (err, errno, "fork");
  if (mon == 0)
    {
      close (verdict_r);
      if (r->in_w >= 0)
        close (r->in_w);
      exec_monitor (r);
    }
  /* The command's side and the output belong to the monitor now.  */
  close (take_fd (&r->verdict_w));
  if (r->opts->tty)
    {
      pty_master = r->in_w;
      close (take_fd (&r->in));
      r->out = r->err = -1;
      close (take_fd (&r->out_r));
      if (isatty (STDIN_FILENO) && tcgetattr (STDIN_FILENO, &old) == 0)
        {
          raw = old;
          cfmakeraw (&raw);
          restore_tty = tcsetattr (STDIN_FILENO, TCSANOW, &raw) == 0;
        }
    }
  else
    {
      if (r->in >= 0)
        close (take_fd (&r->in));
      close (take_fd (&r->out));
      close (take_fd (&r->err));
      close (take_fd (&r->out_r));
      close (take_fd (&r->err_r));
    }
  set_signals (true, saved);
  serve (r, verdict_r, &v);
  set_signals (false, saved);
  if (restore_tty)
    tcsetattr (STDIN_FILENO, TCSANOW, &old);
  pty_master = -1;
  if (command_pidfd >= 0)
    close (command_pidfd);
  command_pidfd = -1;
  while (TEMP_FAILURE_RETRY (waitpid (mon, &wstatus, 0)) < 0 && errno != ECHILD)
    ;
  if (!v.done)
    return esbx_make_error (err, 0, "exec in session `%s`: its monitor died", r->ss->name);
  if (v.error)
    {
      *err = steal_pointer (&v.error);
      if ((*err)->kind == ESBX_ERR_EXEC_FAILED || (*err)->kind == ESBX_ERR_EXEC_NOT_FOUND)
        return esbx_error_wrap (err, "session `%s`", r->ss->name);
      return esbx_error_wrap (err, "exec in session `%s`", r->ss->name);
    }
  *status = v.status;
  return 0;
}

int
esbx_exec_run (esbx_store_t *store, const char *session, const struct esbx_exec_opts *opts,
               int *status, esbx_error_t *err)
{
  _cleanup_sandbox_session_ struct esbx_sandbox_session *ss = NULL;
  struct esbx_holder_info info = { 0 };
  struct exec_run r = {
    .opts = opts,
    .info = &info,
    .holder_pidfd = -1,
    .outlog = -1,
    .errlog = -1,
    .in = -1,
    .out = -1,
    .err = -1,
    .in_w = -1,
    .out_r = -1,
    .err_r = -1,
    .verdict_w = -1,
  };
  size_t i;
  int ret;

  if (opts->argv == NULL || opts->argv[0] == NULL)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "no command to run");
  if (opts->user && esbx_exec_parse_user (opts->user, &r.uid, &r.gid, err) < 0)
    return -1;
  r.set_user = opts->user != NULL;
  for (i = 0; opts->env && opts->env[i]; i++)
    if (esbx_exec_check_env (opts->env[i], err) < 0)
      return -1;
  if (opts->tty && opts->detach)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "--tty and --detach exclude each other");
  if (esbx_sandbox_session_open (store, session, &ss, err) < 0)
    return -1;
  r.ss = ss;
  if (resolve_cwd (ss->rec->workspace, opts->cwd, &r.cwd, err) < 0)
    return -1;
  /* An exec is use: the idle time to live counts from its start and end.  */
  esbx_session_touch (store, session);

  if (esbx_owner_begin (ss, err) < 0)
    return -1;
  ret = esbx_holder_ensure (ss, &info, err);
  if (ret == 0)
    ret = prepare (&r, err);
  if (ret == 0)
    ret = run (&r, status, err);
  esbx_owner_end (ss);
  esbx_session_touch (store, session);
  close_run (&r);
  esbx_holder_info_free (&info);
  return ret;
}
