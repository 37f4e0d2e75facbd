/* esbxd's queue thread and its runners (queue_worker.h).  */
#include "queue_worker.h"
#include "log.h"
#include "queue.h"
#include "thread.h"
#include "utils.h"
#include "worker.h"

#include <stdatomic.h>
#include <string.h>

struct runner
{
  struct esbx_queue_worker *q;
  char *project;
  struct esbx_thread thread;
  atomic_bool done;
};

struct esbx_queue_worker
{
  esbx_store_t *store;
  long interval_ms;
  struct esbx_worker w;
  struct runner **runners; /* touched by the queue thread only */
  size_t n;
};

static bool
stopping (void *arg)
{
  struct esbx_queue_worker *q = arg;
  bool stop;

  pthread_mutex_lock (&q->w.lock);
  stop = q->w.stop;
  pthread_mutex_unlock (&q->w.lock);
  return stop;
}

static void *
runner_main (void *arg)
{
  struct runner *r = arg;
  struct esbx_queue_run_opts o = { .stop = stopping, .arg = r->q };
  esbx_error_t e = NULL;

  if (esbx_queue_run (r->q->store, r->project, &o, &e) < 0)
    {
      esbx_warn ("queue of project `%s`: %s", r->project, e->msg);
      esbx_error_free (&e);
    }
  atomic_store (&r->done, true);
  return NULL;
}

/* Join the runners that ended.  */
static void
reap (struct esbx_queue_worker *q, bool all)
{
  size_t i = 0;

  while (i < q->n)
    {
      struct runner *r = q->runners[i];

      if (!all && !atomic_load (&r->done))
        {
          i++;
          continue;
        }
      esbx_thread_join (&r->thread);
      free (r->project);
      free (r);
      memmove (&q->runners[i], &q->runners[i + 1], (q->n - i - 1) * sizeof *q->runners);
      q->n--;
    }
}

static bool
running (struct esbx_queue_worker *q, const char *project)
{
  for (size_t i = 0; i < q->n; i++)
    if (strcmp (q->runners[i]->project, project) == 0)
      return true;
  return false;
}

static void
look (struct esbx_queue_worker *q)
{
  _cleanup_strv_ char **projects = NULL;
  esbx_error_t e = NULL;

  reap (q, false);
  projects = esbx_project_list (q->store, &e);
  if (projects == NULL)
    {
      esbx_error_free (&e);
      return;
    }
  for (size_t i = 0; projects[i]; i++)
    {
      struct runner *r;

      if (running (q, projects[i]) || !esbx_queue_has_work (q->store, projects[i]))
        continue;
      r = xmalloc0 (sizeof *r);
      r->q = q;
      r->project = xstrdup (projects[i]);
      atomic_init (&r->done, false);
      if (esbx_thread_start (&r->thread, runner_main, r, "queue runner", &e) < 0)
        {
          esbx_warn ("%s", e->msg);
          esbx_error_free (&e);
          free (r->project);
          free (r);
          continue;
        }
      q->runners = xrealloc (q->runners, (q->n + 1) * sizeof *q->runners);
      q->runners[q->n++] = r;
    }
}

static void *
queue_main (void *arg)
{
  struct esbx_queue_worker *q = arg;

  pthread_mutex_lock (&q->w.lock);
  while (!q->w.stop)
    {
      pthread_mutex_unlock (&q->w.lock);
      look (q);
      pthread_mutex_lock (&q->w.lock);
      q->w.wake = false;
      esbx_worker_pause_locked (&q->w, q->interval_ms);
    }
  pthread_mutex_unlock (&q->w.lock);
  reap (q, true);
  return NULL;
}

int
esbx_queue_worker_start (esbx_store_t *store, long interval_ms, struct esbx_queue_worker **out,
                         esbx_error_t *err)
{
  struct esbx_queue_worker *q = xmalloc0 (sizeof *q);

  q->store = store;
  q->interval_ms = interval_ms > 0 ? interval_ms : 500;
  if (esbx_worker_start (&q->w, queue_main, q, "queue", err) < 0)
    {
      free (q);
      return -1;
    }
  *out = q;
  return 0;
}

void
esbx_queue_worker_stop (struct esbx_queue_worker *q)
{
  if (q == NULL)
    return;
  esbx_worker_stop (&q->w);
  free (q->runners);
  free (q);
}
