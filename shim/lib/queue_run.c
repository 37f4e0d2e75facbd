/* The merge queue's runner (queue.h).  One process, one loop: it holds up
 * to PARALLEL requests in flight, the first on the head and each next one
 * on the candidate of the one before it (speculation, as merge queues do);
 * their checks run at once, each a child process running `esbx exec` of
 * one command in the request's check session (ID.check, based on its
 * candidate layer, with the project's network default and the gate's
 * secrets only), its output read here into the request's check.log.
 *
 * The first in flight lands when its checks pass and the head is still
 * its parent.  A failed check rejects its request; the ones behind it were
 * tested on a tree that will not land: their checks are stopped, their
 * candidates dropped, and they are built again on the new chain.  When
 * nothing fails, every request runs its checks once.  */
#include "queue.h"
#include "events.h"
#include "exec.h"
#include "fs.h"
#include "log.h"
#include "sandbox.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TICK_MS        200
#define CHECK_LOG_KEEP (1u << 20) /* what exec keeps of a check in the session's logs */

struct slot
{
  char *id;
  char *candidate;
  char *session; /* the check session */
  size_t cmd;    /* the check running (index into the gate's checks) */
  pid_t pid;     /* its child, 0 when none */
  int pidfd;
  int out; /* its output, -1 at its end */
  int64_t started, deadline;
  bool timed_out;
  bool passed;
};

struct runner
{
  esbx_store_t *store;
  const char *project;
  const struct esbx_queue_run_opts *o;
  struct esbx_gate gate;
  struct slot *v;
  size_t n;
  bool draining; /* UNTIL is final: finish what flies, start nothing */
};

static int64_t
now_ms (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
warn_err (esbx_error_t *e)
{
  if (*e)
    {
      esbx_warn ("%s", (*e)->msg);
      esbx_error_free (e);
    }
}

static void report (struct runner *r, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));
static void
report (struct runner *r, const char *fmt, ...)
{
  va_list ap;

  if (r->o == NULL || r->o->report == NULL)
    return;
  va_start (ap, fmt);
  vfprintf (r->o->report, fmt, ap);
  va_end (ap);
  fputc ('\n', r->o->report);
  fflush (r->o->report);
}

static void log_text (struct runner *r, const char *id, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));
static void
log_text (struct runner *r, const char *id, const char *fmt, ...)
{
  _cleanup_free_ char *s = NULL;
  va_list ap;

  va_start (ap, fmt);
  s = xvasprintf (fmt, ap);
  va_end (ap);
  esbx_request_log (r->store, r->project, id, s, strlen (s));
}

/* An event in the request's own session's log too (`esbx events S`).  */
static void
session_event (struct runner *r, const json_t *rec, const char *type, json_t *fields)
{
  const char *s = json_get_string (rec, "session");
  esbx_error_t e = NULL;

  if (fields == NULL)
    fields = json_new (JSON_OBJECT);
  json_set_string (fields, "request", json_get_string (rec, "id"));
  if (s && esbx_session_exists (r->store, s)
      && esbx_event_append (r->store, s, type, fields, &e) < 0)
    esbx_error_free (&e);
  else if (!(s && esbx_session_exists (r->store, s)))
    json_free (fields);
}

static void
discard_session (struct runner *r, const char *name)
{
  esbx_error_t e = NULL;

  if (name && esbx_session_exists (r->store, name)
      && esbx_sandbox_discard (r->store, name, ESBX_DISCARD_FORCE | ESBX_DISCARD_SCRATCH, &e) < 0)
    warn_err (&e);
}

/* ---- a check's child ------------------------------------------------- */

static void __attribute__ ((noreturn))
check_child (esbx_store_t *store, const char *session, const char *command, int out)
{
  char *argv[] = { (char *)"/bin/sh", (char *)"-c", (char *)command, NULL };
  struct esbx_exec_opts o = { .argv = argv, .log_limit = CHECK_LOG_KEEP };
  int devnull = open ("/dev/null", O_RDONLY | O_CLOEXEC);
  esbx_error_t err = NULL;
  sigset_t none;
  int status;

  /* Ends with the runner: a runner killed leaves no check behind but what
     runs in the session, which the next runner discards.  */
  prctl (PR_SET_PDEATHSIG, SIGKILL);
  sigemptyset (&none);
  sigprocmask (SIG_SETMASK, &none, NULL);
  signal (SIGPIPE, SIG_DFL);
  if (devnull < 0 || dup2 (devnull, 0) < 0 || dup2 (out, 1) < 0 || dup2 (out, 2) < 0)
    _exit (125);
  esbx_close_fds_except (store->rootfd, -1);
  if (esbx_exec_run (store, session, &o, &status, &err) < 0)
    {
      dprintf (2, "esbx: %s\n", err->msg);
      _exit (125);
    }
  _exit (status & 0xff);
}

static int
start_check (struct runner *r, struct slot *s, esbx_error_t *err)
{
  const char *command = r->gate.checks[s->cmd];
  int p[2];

  if (pipe2 (p, O_CLOEXEC) < 0)
    return esbx_make_error (err, errno, "pipe");
  log_text (r, s->id, "$ %s\n", command);
  s->pid = fork ();
  if (s->pid < 0)
    {
      close (p[0]);
      close (p[1]);
      return esbx_make_error (err, errno, "fork");
    }
  if (s->pid == 0)
    check_child (r->store, s->session, command, p[1]);
  close (p[1]);
  s->out = p[0];
  fcntl (s->out, F_SETFL, O_NONBLOCK);
  s->pidfd = pidfd_open (s->pid, 0);
  s->started = now_ms ();
  s->deadline = s->started + r->gate.check_timeout * 1000;
  s->timed_out = false;
  return 0;
}

/* Stop slot S's check and reap its child.  */
static void
kill_check (struct runner *r, struct slot *s)
{
  esbx_error_t e = NULL;

  if (s->pid > 0)
    {
      if (s->session && esbx_sandbox_stop (r->store, s->session, &e) < 0)
        esbx_error_free (&e);
      kill (s->pid, SIGKILL);
      waitpid (s->pid, NULL, 0);
      s->pid = 0;
    }
  if (s->pidfd >= 0)
    close (s->pidfd);
  if (s->out >= 0)
    close (s->out);
  s->pidfd = s->out = -1;
}

static void
slot_free (struct runner *r, struct slot *s)
{
  kill_check (r, s);
  discard_session (r, s->session);
  free (s->id);
  free (s->candidate);
  free (s->session);
}

static void
slot_remove (struct runner *r, size_t i)
{
  slot_free (r, &r->v[i]);
  memmove (&r->v[i], &r->v[i + 1], (r->n - i - 1) * sizeof *r->v);
  r->n--;
}

/* Every slot from I on goes back to the queue: their trees will not land
   as they were built.  */
static void
invalidate_from (struct runner *r, size_t i)
{
  while (r->n > i)
    {
      struct slot *s = &r->v[r->n - 1];
      esbx_error_t e = NULL;

      kill_check (r, s);
      discard_session (r, s->session);
      if (esbx_queue_drop (r->store, r->project, s->id, "queued", &e) < 0)
        warn_err (&e);
      else
        log_text (r, s->id, "[esbx: tested again: the request ahead of it did not land]\n");
      slot_remove (r, r->n - 1);
    }
}

/* ---- the steps ------------------------------------------------------- */

/* The check session of slot S, on its candidate.  */
static int
make_check_session (struct runner *r, struct slot *s, esbx_error_t *err)
{
  _cleanup_free_ char *label = xasprintf ("esbx.queue=%s", s->id), *name = NULL;
  char *labels[] = { label, (char *)"esbx.role=check", NULL };
  struct esbx_session_opts o = { 0 };

  s->session = esbx_request_session (s->id, "check");
  discard_session (r, s->session);
  o.name = s->session;
  o.pending_base = s->candidate;
  o.labels = labels;
  o.secrets = r->gate.secrets;
  return esbx_sandbox_create (r->store, r->project, &o, &name, err);
}

static void
after_land (struct runner *r, const char *id)
{
  _cleanup_json_ json_t *rec = esbx_request_read (r->store, r->project, id, NULL);
  const char *session, *sid;
  struct esbx_session *s = NULL;
  esbx_error_t e = NULL;

  if (rec == NULL)
    return;
  report (r, "landed %s (session %s): layer %s", id, json_get_string (rec, "session"),
          json_get_string (rec, "layer") ? json_get_string (rec, "layer") : "none");
  {
    json_t *f = json_new (JSON_OBJECT);
    json_set_string (f, "layer", json_get_string (rec, "layer"));
    session_event (r, rec, "queue.landed", f);
  }
  session = json_get_string (rec, "session");
  sid = json_get_string (rec, "session_id");
  if (!json_get_bool (rec, "discard", false) || session == NULL)
    return;
  /* publish --discard: the final publish ends the session once it is in
     (the very session that filed it, not one made later under its name).  */
  if (esbx_session_load (r->store, session, &s, &e) == 0 && sid && strcmp (s->id, sid) == 0
      && esbx_sandbox_discard (r->store, session, 0, &e) < 0)
    warn_err (&e);
  esbx_error_free (&e);
  esbx_session_free (s);
}

static void
rejected (struct runner *r, const char *id, json_t *why)
{
  _cleanup_json_ json_t *rec = NULL;
  _cleanup_free_ char *msg = xstrdup (json_get_string (why, "message"));
  esbx_error_t e = NULL;

  if (esbx_queue_reject (r->store, r->project, id, why, &e) < 0)
    warn_err (&e);
  rec = esbx_request_read (r->store, r->project, id, NULL);
  report (r, "rejected %s: %s", id, msg);
  if (rec)
    {
      json_t *f = json_new (JSON_OBJECT);
      json_set_string (f, "message", msg);
      session_event (r, rec, "queue.rejected", f);
    }
}

/* Land what passed at the front, in order.  */
static void
land_front (struct runner *r)
{
  while (r->n > 0 && r->v[0].passed)
    {
      esbx_error_t e = NULL;
      _cleanup_free_ char *id = xstrdup (r->v[0].id);
      int landed = esbx_queue_land (r->store, r->project, id, &e);

      if (landed < 0)
        {
          warn_err (&e);
          invalidate_from (r, 0);
          return;
        }
      if (landed == 0)
        {
          /* The head moved under the queue (pull-git, a squash...): every
             candidate is on a parent that will not be the head.  */
          invalidate_from (r, 0);
          return;
        }
      slot_remove (r, 0);
      after_land (r, id);
    }
}

struct check_result
{
  const char *command;
  int status;
  double seconds;
  bool timed_out;
};

static void
add_check (json_t *rec, void *arg)
{
  struct check_result *c = arg;
  json_t *checks = json_get (rec, "checks"), *o = json_new (JSON_OBJECT);
  _cleanup_free_ char *secs = xasprintf ("%.3f", c->seconds);

  if (checks == NULL || checks->type != JSON_ARRAY)
    {
      checks = json_new (JSON_ARRAY);
      json_set (rec, "checks", checks);
    }
  json_set_string (o, "command", c->command);
  json_set_int (o, "status", c->status);
  json_set_string (o, "seconds", secs);
  json_set (o, "timed_out", json_new_bool (c->timed_out));
  json_append (checks, o);
}

static void
set_passed (json_t *rec, void *arg)
{
  (void)arg;
  json_set_string (rec, "state", "passed");
}

/* Slot I's check ended with WSTATUS.  */
static void
check_ended (struct runner *r, size_t i, int wstatus)
{
  struct slot *s = &r->v[i];
  struct check_result c = { .command = r->gate.checks[s->cmd] };
  esbx_error_t e = NULL;

  c.status = WIFEXITED (wstatus) ? WEXITSTATUS (wstatus) : 128 + WTERMSIG (wstatus);
  c.seconds = (double)(now_ms () - s->started) / 1000.0;
  c.timed_out = s->timed_out;
  s->pid = 0;
  if (s->pidfd >= 0)
    close (s->pidfd);
  s->pidfd = -1;
  if (s->out >= 0)
    {
      char buf[65536];
      ssize_t n;
      while ((n = read (s->out, buf, sizeof buf)) > 0)
        esbx_request_log (r->store, r->project, s->id, buf, (size_t)n);
      close (s->out);
      s->out = -1;
    }
  log_text (r, s->id, "[exit %d after %.1f s%s]\n", c.status, c.seconds,
            c.timed_out ? ", timed out" : "");
  if (esbx_request_update (r->store, r->project, s->id, false, add_check, &c, &e) < 0)
    warn_err (&e);
  {
    _cleanup_close_ int lock = esbx_queue_lock (r->store, r->project, &e);
    if (lock >= 0)
      {
        esbx_queue_count (r->store, r->project, "check_runs", NULL, 1);
        esbx_queue_count (r->store, r->project, "check_seconds", NULL, c.seconds);
      }
    warn_err (&e);
  }
  if (c.status == 0 && !c.timed_out)
    {
      if (r->gate.checks[s->cmd + 1])
        {
          s->cmd++;
          if (start_check (r, s, &e) == 0)
            return;
          s->cmd--;
        }
      if (r->gate.checks[s->cmd + 1] == NULL)
        {
          s->passed = true;
          discard_session (r, s->session);
          if (esbx_request_update (r->store, r->project, s->id, false, set_passed, NULL, &e) < 0)
            warn_err (&e);
          return;
        }
      warn_err (&e);
    }
  {
    json_t *why = json_new (JSON_OBJECT);
    _cleanup_free_ char *msg = NULL, *id = xstrdup (s->id);

    if (c.timed_out)
      msg = xasprintf ("check `%s` timed out after %lld s", c.command,
                       (long long)r->gate.check_timeout);
    else
      msg = xasprintf ("check `%s` exited %d", c.command, c.status);
    json_set_string (why, "kind", c.timed_out ? "timeout" : "check");
    json_set_string (why, "message", msg);
    json_set_string (why, "command", c.command);
    json_set_int (why, "status", c.status);
    /* The requests behind it were tested on top of it.  */
    invalidate_from (r, i + 1);
    slot_remove (r, i);
    rejected (r, id, why);
  }
}

static bool
in_flight (struct runner *r, const char *id)
{
  for (size_t i = 0; i < r->n; i++)
    if (strcmp (r->v[i].id, id) == 0)
      return true;
  return false;
}

/* Requests in flight that a reviewer rejected or someone withdrew.  */
static void
drop_ended (struct runner *r, const json_t *recs)
{
  for (size_t i = 0; i < r->n; i++)
    {
      bool waiting = false;

      for (size_t k = 0; k < json_len (recs); k++)
        if (strcmp (json_get_string (json_at (recs, k), "id"), r->v[i].id) == 0)
          waiting = true;
      if (!waiting)
        {
          esbx_error_t e = NULL;
          invalidate_from (r, i + 1);
          kill_check (r, &r->v[i]);
          if (esbx_queue_drop (r->store, r->project, r->v[i].id, "queued", &e) < 0)
            warn_err (&e);
          slot_remove (r, i);
          return;
        }
    }
}

static unsigned
parallel (struct runner *r)
{
  long cpus;

  if (r->gate.parallel)
    return r->gate.parallel;
  cpus = sysconf (_SC_NPROCESSORS_ONLN);
  return cpus > 0 ? (unsigned)cpus : 1;
}

/* Start what the queue has ready, up to PARALLEL in flight.  */
static int
fill (struct runner *r, const json_t *recs, esbx_error_t *err)
{
  for (size_t k = 0; k < json_len (recs) && r->n < parallel (r) && !r->draining; k++)
    {
      const json_t *rec = json_at (recs, k);
      const char *id = json_get_string (rec, "id"), *state = json_get_string (rec, "state");
      _cleanup_free_ char *target = NULL, *cand = NULL;
      _cleanup_json_ json_t *refused = NULL;
      struct slot s = { .pidfd = -1, .out = -1 };

      if (strcmp (state, "queued") != 0 || in_flight (r, id))
        continue;
      if (r->n > 0)
        target = xstrdup (r->v[r->n - 1].candidate);
      else
        {
          _cleanup_strv_ char **ids = NULL;
          size_t n;
          if (esbx_project_stack (r->store, r->project, &ids, &n, err) < 0)
            return -1;
          target = xstrdup (ids[n - 1]);
        }
      if (esbx_queue_candidate (r->store, r->project, id, target, &cand, &refused, err) < 0)
        return -1;
      if (refused)
        {
          /* On requests that may not land, a refusal may not hold: wait
             for them.  On the head it does.  */
          if (r->n > 0)
            return 0;
          rejected (r, id, steal_pointer (&refused));
          continue;
        }
      if (cand == NULL)
        {
          after_land (r, id);
          continue;
        }
      s.id = xstrdup (id);
      s.candidate = steal_pointer (&cand);
      r->v = xrealloc (r->v, (r->n + 1) * sizeof *r->v);
      r->v[r->n++] = s;
      {
        struct slot *sp = &r->v[r->n - 1];
        esbx_error_t e = NULL;

        if (r->gate.checks == NULL || r->gate.checks[0] == NULL)
          sp->passed = true;
        else if (make_check_session (r, sp, &e) < 0 || start_check (r, sp, &e) < 0)
          {
            json_t *why = json_new (JSON_OBJECT);
            json_set_string (why, "kind", "check");
            json_set_string (why, "message", e->msg);
            esbx_error_free (&e);
            slot_remove (r, r->n - 1);
            rejected (r, id, why);
          }
      }
    }
  return 0;
}

/* Wait for the checks in flight: their output, their end, their
   deadline, or TICK_MS.  */
static void
wait_checks (struct runner *r)
{
  struct pollfd *fds = xmalloc0 ((2 * r->n + 1) * sizeof *fds);
  int64_t now = now_ms (), timeout = TICK_MS;
  size_t nfds = 0, i;

  for (i = 0; i < r->n; i++)
    {
      struct slot *s = &r->v[i];
      if (s->pid <= 0)
        continue;
      if (s->deadline - now < timeout)
        timeout = s->deadline - now > 0 ? s->deadline - now : 0;
      fds[nfds++] = (struct pollfd){ .fd = s->pidfd, .events = POLLIN };
      if (s->out >= 0)
        fds[nfds++] = (struct pollfd){ .fd = s->out, .events = POLLIN };
    }
  if (poll (fds, nfds, (int)timeout) < 0 && errno != EINTR)
    esbx_warn ("queue: poll: %s", strerror (errno));
  free (fds);
  now = now_ms ();
  for (i = 0; i < r->n; i++)
    {
      struct slot *s = &r->v[i];
      char buf[65536];
      ssize_t n;
      int wstatus;

      if (s->pid <= 0)
        continue;
      while (s->out >= 0 && (n = read (s->out, buf, sizeof buf)) > 0)
        esbx_request_log (r->store, r->project, s->id, buf, (size_t)n);
      if (s->deadline <= now && !s->timed_out)
        {
          esbx_error_t e = NULL;
          s->timed_out = true;
          /* Everything in the session goes: the command and whatever it
             started.  */
          if (esbx_sandbox_stop (r->store, s->session, &e) < 0)
            esbx_error_free (&e);
          kill (s->pid, SIGKILL);
        }
      if (waitpid (s->pid, &wstatus, WNOHANG) == s->pid)
        {
          check_ended (r, i, wstatus);
          return; /* the slots may have moved */
        }
    }
}

/* A runner killed left requests testing, maybe landed, and its sessions.  */
static void
recover (struct runner *r, const json_t *recs)
{
  for (size_t k = 0; k < json_len (recs); k++)
    {
      const json_t *rec = json_at (recs, k);
      const char *id = json_get_string (rec, "id");
      _cleanup_free_ char *m = esbx_request_session (id, "merge");
      _cleanup_free_ char *c = esbx_request_session (id, "check");
      esbx_error_t e = NULL;
      int landed;

      discard_session (r, m);
      discard_session (r, c);
      if (json_get_string (rec, "candidate") == NULL)
        continue;
      landed = esbx_queue_drop (r->store, r->project, id, "queued", &e);
      if (landed < 0)
        warn_err (&e);
      else if (landed == 1)
        after_land (r, id);
      else
        log_text (r, id, "[esbx: tested again: the runner testing it stopped]\n");
    }
}

static bool
final_now (struct runner *r, const char *id)
{
  _cleanup_json_ json_t *rec = esbx_request_read (r->store, r->project, id, NULL);

  return rec == NULL || esbx_request_is_final (rec);
}

int
esbx_queue_run (esbx_store_t *store, const char *project, const struct esbx_queue_run_opts *o,
                esbx_error_t *err)
{
  struct runner r = { .store = store, .project = project, .o = o };
  _cleanup_free_ char *q = esbx_queue_rel (project), *lockrel = NULL;
  _cleanup_close_ int lock = -1;
  _cleanup_json_ json_t *first = NULL;
  esbx_error_t e = NULL;
  int ret = -1;

  if (esbx_check_name ("project", project, err) < 0)
    return -1;
  {
    _cleanup_close_ int ql = esbx_queue_lock (store, project, err);
    if (ql < 0)
      return -1;
  }
  lockrel = xasprintf ("%s/run.lock", q);
  lock = esbx_lock_at (store->rootfd, lockrel, true, false, &e);
  if (lock < 0)
    {
      if (e->status == EWOULDBLOCK || e->kind == ESBX_ERR_BUSY)
        {
          esbx_error_free (&e);
          return 1;
        }
      *err = e;
      return -1;
    }
  first = esbx_queue_list (store, project, false, err);
  if (first == NULL)
    return -1;
  recover (&r, first);
  for (;;)
    {
      _cleanup_json_ json_t *recs = NULL;

      if (o && o->stop && o->stop (o->arg))
        break;
      esbx_gate_clear (&r.gate);
      if (esbx_gate_load (store, project, &r.gate, err) < 0)
        goto out;
      recs = esbx_queue_list (store, project, false, err);
      if (recs == NULL)
        goto out;
      drop_ended (&r, recs);
      land_front (&r);
      if (o && o->until && !r.draining && final_now (&r, o->until))
        r.draining = true;
      if (fill (&r, recs, err) < 0)
        goto out;
      if (r.n == 0)
        {
          bool ready = false;
          _cleanup_json_ json_t *now = esbx_queue_list (store, project, false, err);

          if (now == NULL)
            goto out;
          for (size_t k = 0; k < json_len (now); k++)
            if (strcmp (json_get_string (json_at (now, k), "state"), "queued") == 0)
              ready = true;
          if (!ready || r.draining)
            break;
          continue;
        }
      if (r.v[0].passed)
        continue;
      wait_checks (&r);
    }
  ret = 0;
out:
  /* Stopped (or failed): what flies goes back to the queue.  */
  invalidate_from (&r, 0);
  free (r.v);
  esbx_gate_clear (&r.gate);
  return ret;
}

bool
esbx_queue_has_work (esbx_store_t *store, const char *project)
{
  _cleanup_json_ json_t *recs = esbx_queue_list (store, project, false, NULL);

  for (size_t k = 0; k < json_len (recs); k++)
    {
      const char *s = json_get_string (json_at (recs, k), "state");
      if (s
          && (strcmp (s, "queued") == 0 || strcmp (s, "testing") == 0 || strcmp (s, "passed") == 0))
        return true;
    }
  return false;
}

int
esbx_queue_wait (esbx_store_t *store, const char *id, int64_t timeout_ms, json_t **out,
                 esbx_error_t *err)
{
  int64_t until = timeout_ms > 0 ? now_ms () + timeout_ms : 0;
  struct esbx_queue_run_opts o = { .until = id };

  *out = NULL;
  for (;;)
    {
      _cleanup_free_ char *project = NULL;
      json_t *rec = esbx_request_load (store, id, &project, err);
      int ran;

      if (rec == NULL)
        return -1;
      if (esbx_request_is_final (rec))
        {
          *out = rec;
          return 0;
        }
      json_free (rec);
      if (until && now_ms () >= until)
        return esbx_make_error_kind (err, ESBX_ERR_BUSY, 0,
                                     "request `%s`: still waiting when the time was up", id);
      ran = esbx_queue_has_work (store, project) ? esbx_queue_run (store, project, &o, err) : 1;
      if (ran < 0)
        return -1;
      if (ran == 1)
        {
          /* Another runner has it, or it waits for a review.  */
          struct timespec ts = { 0, TICK_MS * 1000000L };
          nanosleep (&ts, NULL);
        }
    }
}
