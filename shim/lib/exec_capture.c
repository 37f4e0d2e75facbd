/* A command run as `esbx exec` runs it, its output collected (see
   exec_capture.h).  esbx_exec_run joins the holder's pid namespace and
   takes signals over in the calling process, so it runs in a child; the
   child keeps nothing of the caller but the store and its report, so that
   the monitor it forks (which outlives it) holds no other call's pipes.  */
#include "exec_capture.h"
#include "fs.h"
#include "sync.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHUNK        (64u * 1024)
#define DEFAULT_KEEP (64u * 1024)
#define TAIL_MAX     200
/* While a cancelled command's pid is not known yet (it is being started),
   look again this often.  */
#define PID_POLL_MS 20

struct stream
{
  int fd; /* -1 at its end */
  char *head;
  size_t nhead, max_head;
  char *ring; /* the last MAX_RING bytes after the head */
  size_t ring_pos, nring, max_ring;
  uint64_t total;
};

struct capture
{
  pid_t child; /* 0 once reaped */
  int pidfd, report;
  volatile pid_t *command; /* shared with the child: the command's pid, 0 until it runs */
  struct stream s[2];
  int last; /* the stream written last, -1 before any */
  int wstatus;
};

static int64_t
now_ms (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
on_started (pid_t pid, void *data)
{
  volatile pid_t *shared = data;

  __atomic_store_n (shared, pid, __ATOMIC_RELEASE);
}

static void __attribute__ ((noreturn))
child (esbx_store_t *store, const char *session, const struct esbx_exec_opts *o, int out, int err_w,
       int report, volatile pid_t *shared)
{
  struct esbx_exec_opts run = *o;
  int devnull = open ("/dev/null", O_RDONLY | O_CLOEXEC);
  esbx_error_t err = NULL;
  sigset_t none;
  int status;

  sigemptyset (&none);
  sigprocmask (SIG_SETMASK, &none, NULL);
  signal (SIGPIPE, SIG_DFL);
  if (devnull < 0 || dup2 (devnull, 0) < 0 || dup2 (out, 1) < 0 || dup2 (err_w, 2) < 0)
    _exit (125);
  esbx_close_fds_except (store->rootfd, report);
  run.started = on_started;
  run.started_data = (void *)shared;
  if (esbx_exec_run (store, session, &run, &status, &err) < 0)
    {
      esbx_error_send (report, &err);
      _exit (125);
    }
  _exit (status & 0xff);
}

static void
stream_add (struct stream *st, const char *buf, size_t n)
{
  size_t k;

  st->total += n;
  k = st->max_head - st->nhead < n ? st->max_head - st->nhead : n;
  memcpy (st->head + st->nhead, buf, k);
  st->nhead += k;
  buf += k;
  n -= k;
  if (st->max_ring == 0)
    return;
  if (n > st->max_ring)
    {
      buf += n - st->max_ring;
      n = st->max_ring;
    }
  while (n > 0)
    {
      k = st->max_ring - st->ring_pos < n ? st->max_ring - st->ring_pos : n;
      memcpy (st->ring + st->ring_pos, buf, k);
      st->ring_pos = (st->ring_pos + k) % st->max_ring;
      st->nring = st->nring + k > st->max_ring ? st->max_ring : st->nring + k;
      buf += k;
      n -= k;
    }
}

/* The I-th byte of what the ring holds, oldest first.  */
static char
ring_at (const struct stream *st, size_t i)
{
  size_t start = st->nring < st->max_ring ? 0 : st->ring_pos;

  return st->ring[(start + i) % st->max_ring];
}

/* The last N bytes the stream kept, into BUF; how many there were.  */
static size_t
stream_last (const struct stream *st, char *buf, size_t n)
{
  size_t have = st->nhead + st->nring, i, from;

  if (n > have)
    n = have;
  from = have - n;
  for (i = 0; i < n; i++)
    {
      size_t at = from + i;
      buf[i] = at < st->nhead ? st->head[at] : ring_at (st, at - st->nhead);
    }
  return n;
}

/* The last line the command wrote, without its newline.  */
static void
last_line (const struct capture *c, char tail[TAIL_MAX + 1])
{
  char buf[TAIL_MAX + 1];
  size_t n, start;

  tail[0] = '\0';
  if (c->last < 0)
    return;
  n = stream_last (&c->s[c->last], buf, TAIL_MAX);
  while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
    n--;
  for (start = n; start > 0 && buf[start - 1] != '\n'; start--)
    ;
  memcpy (tail, buf + start, n - start);
  tail[n - start] = '\0';
}

/* Read what stream I has; once the child is gone, "nothing now" is its
   end (the monitor, or a process the command left, may hold a copy of the
   pipe's write end long after).  */
static void
read_stream (struct capture *c, int i)
{
  char buf[CHUNK];
  ssize_t n;

  while (c->s[i].fd >= 0)
    {
      n = TEMP_FAILURE_RETRY (read (c->s[i].fd, buf, sizeof buf));
      if (n > 0)
        {
          stream_add (&c->s[i], buf, (size_t)n);
          c->last = i;
          if ((size_t)n < sizeof buf)
            return;
          continue;
        }
      if (n < 0 && errno == EAGAIN && c->child != 0)
        return;
      close (c->s[i].fd);
      c->s[i].fd = -1;
    }
}

static void
reap (struct capture *c, bool wait)
{
  pid_t p;

  while ((p = waitpid (c->child, &c->wstatus, wait ? 0 : WNOHANG)) < 0 && errno == EINTR)
    ;
  if (p != 0)
    c->child = 0;
}

/* SIG to the command's process group once it is known.  */
static bool
signal_group (struct capture *c, int sig)
{
  pid_t pid = __atomic_load_n (c->command, __ATOMIC_ACQUIRE);

  if (pid <= 0)
    return false;
  kill (-pid, sig);
  return true;
}

static int
start (esbx_store_t *store, const char *session, const struct esbx_exec_opts *o, struct capture *c,
       esbx_error_t *err)
{
  int out[2] = { -1, -1 }, errp[2] = { -1, -1 };
  int i;

  c->report = memfd_create ("esbx-exec-report", MFD_CLOEXEC);
  if (c->report < 0)
    return esbx_make_error (err, errno, "exec: memfd");
  if (pipe2 (out, O_CLOEXEC) < 0 || pipe2 (errp, O_CLOEXEC) < 0)
    {
      esbx_make_error (err, errno, "exec: pipe");
      goto fail;
    }
  c->child = fork ();
  if (c->child < 0)
    {
      c->child = 0;
      esbx_make_error (err, errno, "exec: fork");
      goto fail;
    }
  if (c->child == 0)
    child (store, session, o, out[1], errp[1], c->report, c->command);
  close (out[1]);
  close (errp[1]);
  c->s[0].fd = out[0];
  c->s[1].fd = errp[0];
  for (i = 0; i < 2; i++)
    fcntl (c->s[i].fd, F_SETFL, O_NONBLOCK);
  c->pidfd = pidfd_open (c->child, 0);
  return 0;
fail:
  for (i = 0; i < 2; i++)
    {
      if (out[i] >= 0)
        close (out[i]);
      if (errp[i] >= 0)
        close (errp[i]);
    }
  return -1;
}

/* The error esbx_exec_run sent, if it failed; the child has ended.  */
static int
read_failure (struct capture *c, esbx_error_t *err)
{
  struct esbx_sync_msg msg;
  esbx_error_t failure = NULL;
  struct stat st;

  if (fstat (c->report, &st) < 0 || st.st_size == 0)
    return 0;
  if (lseek (c->report, 0, SEEK_SET) < 0)
    return esbx_make_error (err, errno, "exec: read the report of its child");
  esbx_sync_recv (c->report, &msg, &failure, &failure);
  esbx_sync_msg_clear (&msg);
  if (failure == NULL)
    return 0;
  *err = failure;
  return -1;
}

static int
poll_timeout (int64_t now, int64_t a, int64_t b, int64_t c)
{
  int64_t t = -1, v[3] = { a, b, c };
  int i;

  for (i = 0; i < 3; i++)
    if (v[i] > 0 && (t < 0 || v[i] - now < t))
      t = v[i] - now < 0 ? 0 : v[i] - now;
  return (int)t;
}

static void
wait_end (struct capture *c, const struct esbx_exec_capture_opts *co, struct esbx_exec_capture *res)
{
  int64_t t0 = now_ms (), now = t0, deadline = co->timeout_ms > 0 ? t0 + co->timeout_ms : 0;
  int64_t next_tick = co->tick && co->tick_ms ? t0 + co->tick_ms : 0, ending = 0, kill_at = 0;
  bool termed = false, killed = false;
  int i;

  while (c->child || c->s[0].fd >= 0 || c->s[1].fd >= 0)
    {
      struct pollfd p[4] = {
        { .fd = c->s[0].fd, .events = POLLIN },
        { .fd = c->s[1].fd, .events = POLLIN },
        { .fd = c->child ? c->pidfd : -1, .events = POLLIN },
        { .fd = ending ? -1 : co->cancel_fd, .events = POLLIN },
      };
      int timeout = poll_timeout (now, next_tick, ending ? 0 : deadline, kill_at);

      if (ending && !termed && (timeout < 0 || timeout > PID_POLL_MS))
        timeout = PID_POLL_MS;
      if (c->child && c->pidfd < 0 && (timeout < 0 || timeout > 100))
        timeout = 100;
      if (c->child == 0)
        timeout = 0;
      if (poll (p, 4, timeout) < 0 && errno != EINTR)
        break;
      now = now_ms ();
      if (!ending && p[3].revents)
        res->cancelled = true;
      if (!ending && deadline && now >= deadline)
        res->timed_out = true;
      if (!ending && (res->cancelled || res->timed_out))
        ending = now;
      /* A command being started has no pid yet: wait for it a while, then
         end its caller, which has not got that far.  */
      if (ending && !termed && (signal_group (c, SIGTERM) || now - ending >= EXEC_CAPTURE_GRACE_MS))
        {
          termed = true;
          kill_at = now + EXEC_CAPTURE_GRACE_MS;
          if (__atomic_load_n (c->command, __ATOMIC_ACQUIRE) <= 0)
            kill_at = now;
        }
      if (kill_at && now >= kill_at && !killed)
        {
          signal_group (c, SIGKILL);
          if (c->child)
            kill (c->child, SIGKILL);
          killed = true;
          kill_at = 0;
        }
      if (c->child && (p[2].revents || c->pidfd < 0))
        reap (c, false);
      for (i = 0; i < 2; i++)
        if (c->s[i].fd >= 0 && (p[i].revents || c->child == 0))
          read_stream (c, i);
      /* What an ended command left in its group goes with it.  */
      if (c->child == 0 && termed && !killed)
        {
          signal_group (c, SIGKILL);
          killed = true;
        }
      if (next_tick && now >= next_tick && c->child)
        {
          char tail[TAIL_MAX + 1];
          uint64_t total[2] = { c->s[0].total, c->s[1].total };

          last_line (c, tail);
          co->tick (co->data, now - t0, total, tail);
          next_tick = now + co->tick_ms;
        }
    }
  if (c->child)
    {
      signal_group (c, SIGKILL);
      kill (c->child, SIGKILL);
      reap (c, true);
    }
  res->elapsed_ms = now_ms () - t0;
}

static void
finish_stream (struct stream *st, struct esbx_exec_capture *res, int i)
{
  size_t k;

  res->out[i] = xmalloc (st->nhead + st->nring + 1);
  memcpy (res->out[i], st->head, st->nhead);
  for (k = 0; k < st->nring; k++)
    res->out[i][st->nhead + k] = ring_at (st, k);
  res->len[i] = st->nhead + st->nring;
  res->out[i][res->len[i]] = '\0';
  res->head[i] = st->nhead;
  res->total[i] = st->total;
  res->cut[i] = st->total - res->len[i];
}

int
esbx_exec_capture (esbx_store_t *store, const char *session, const struct esbx_exec_opts *o,
                   const struct esbx_exec_capture_opts *co, struct esbx_exec_capture *res,
                   esbx_error_t *err)
{
  size_t keep = co->keep ? co->keep : DEFAULT_KEEP;
  struct capture c = { .pidfd = -1, .report = -1, .last = -1 };
  int i, ret = 0;

  memset (res, 0, sizeof *res);
  c.command
      = mmap (NULL, sizeof (pid_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (c.command == MAP_FAILED)
    return esbx_make_error (err, errno, "exec: mmap");
  for (i = 0; i < 2; i++)
    {
      c.s[i].fd = -1;
      c.s[i].max_head = keep / 2;
      c.s[i].max_ring = keep - keep / 2;
      c.s[i].head = xmalloc (c.s[i].max_head + 1);
      c.s[i].ring = xmalloc (c.s[i].max_ring + 1);
    }
  if (start (store, session, o, &c, err) < 0)
    ret = -1;
  else
    {
      wait_end (&c, co, res);
      if (read_failure (&c, err) < 0)
        ret = -1;
      res->status = WIFEXITED (c.wstatus) ? WEXITSTATUS (c.wstatus) : 128 + WTERMSIG (c.wstatus);
    }
  for (i = 0; i < 2; i++)
    {
      if (ret == 0)
        finish_stream (&c.s[i], res, i);
      if (c.s[i].fd >= 0)
        close (c.s[i].fd);
      free (c.s[i].head);
      free (c.s[i].ring);
    }
  if (c.pidfd >= 0)
    close (c.pidfd);
  if (c.report >= 0)
    close (c.report);
  munmap ((void *)c.command, sizeof (pid_t));
  return ret;
}

void
esbx_exec_capture_free (struct esbx_exec_capture *res)
{
  free (res->out[0]);
  free (res->out[1]);
  res->out[0] = res->out[1] = NULL;
}
