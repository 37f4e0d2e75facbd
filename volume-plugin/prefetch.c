/* The prefetch thread of esbxd (prefetch.h).  */
#include "prefetch.h"
#include "log.h"
#include "utils.h"
#include "worker.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Between two attempts to reach etcd: doubling from the first to the
   last.  */
#define BACKOFF_FIRST_MS 200L
#define BACKOFF_MAX_MS   8000L

struct esbx_prefetch
{
  esbx_store_t *store;
  struct esbx_metrics *metrics;
  struct esbx_worker w; /* WAKE: read the remote's settings again */
  bool connected;       /* the watch was created since the last failure */
  time_t connected_at;  /* when (CLOCK_MONOTONIC seconds) */
  bool warned;          /* this outage was logged */
  bool said_watching;   /* "watching" was logged since the last warning */
};

/* A watch that was created and failed sooner than this is not a
   recovery: an etcd (or something in its place) that creates watches and
   then sends garbage would otherwise be asked again every
   BACKOFF_FIRST_MS, with two log lines each time.  */
#define HEALTHY_S (BACKOFF_MAX_MS / 1000)

static time_t
monotonic_s (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec;
}

/* False when PROJECT is shared here and could not be synced.  */
static bool
sync_project (struct esbx_prefetch *p, const char *project)
{
  esbx_error_t e = NULL;
  size_t fetched = 0;

  if (!esbx_project_exists (p->store, project) || !esbx_project_is_shared (p->store, project))
    return true;
  if (esbx_remote_sync (p->store, project, &fetched, &e) < 0)
    {
      esbx_warn ("prefetch: %s", e->msg);
      esbx_error_free (&e);
      return false;
    }
  if (fetched == 0)
    return true;
  esbx_info ("prefetched %zu layer%s of project `%s`", fetched, fetched == 1 ? "" : "s", project);
  esbx_metrics_prefetched (p->metrics, fetched);
  return true;
}

static bool
sync_all (struct esbx_prefetch *p)
{
  esbx_error_t e = NULL;
  _cleanup_strv_ char **projects = esbx_project_list (p->store, &e);
  bool ok = true;
  size_t i;

  if (projects == NULL)
    {
      esbx_warn ("prefetch: %s", e->msg);
      esbx_error_free (&e);
      return false;
    }
  for (i = 0; projects[i]; i++)
    ok = sync_project (p, projects[i]) && ok;
  return ok;
}

/* Whether this store shares any project: without one (most stores have
   no remote) nothing is watched and nothing logged.  */
static bool
any_shared (struct esbx_prefetch *p)
{
  esbx_error_t e = NULL;
  _cleanup_strv_ char **projects = esbx_project_list (p->store, &e);
  size_t i;

  esbx_error_free (&e);
  for (i = 0; projects && projects[i]; i++)
    if (esbx_project_is_shared (p->store, projects[i]))
      return true;
  return false;
}

static bool
should_stop (void *arg)
{
  struct esbx_prefetch *p = arg;
  return esbx_worker_interrupted (&p->w);
}

static bool
on_created (const char *etcd, void *arg)
{
  struct esbx_prefetch *p = arg;

  pthread_mutex_lock (&p->w.lock);
  if (!p->said_watching)
    esbx_info ("watching the heads in etcd `%s`%s", etcd, p->warned ? " again" : "");
  p->said_watching = true;
  p->connected = true;
  p->connected_at = monotonic_s ();
  pthread_mutex_unlock (&p->w.lock);
  return sync_all (p);
}

static bool
on_head (const char *project, void *arg)
{
  return sync_project (arg, project);
}

static void *
prefetch_main (void *arg)
{
  struct esbx_prefetch *p = arg;
  const struct esbx_remote_watch_ops ops
      = { .created = on_created, .head = on_head, .stop = should_stop, .arg = p };
  int64_t next = 0;
  long backoff = 0;

  pthread_mutex_lock (&p->w.lock);
  while (!p->w.stop)
    {
      esbx_error_t e = NULL;
      int r;

      if (p->w.wake)
        {
          /* Everything again from the remote as configured now.  */
          p->w.wake = false;
          p->warned = false;
          p->said_watching = false;
          next = 0;
          backoff = 0;
        }
      p->connected = false;
      pthread_mutex_unlock (&p->w.lock);
      if (!any_shared (p))
        {
          pthread_mutex_lock (&p->w.lock);
          next = 0; /* a project shared later is synced when the watch starts */
          esbx_worker_pause_locked (&p->w, BACKOFF_MAX_MS);
          continue;
        }
      r = esbx_remote_watch (p->store, &next, &ops, &e);
      pthread_mutex_lock (&p->w.lock);
      if (r == 0 || p->w.stop || p->w.wake)
        {
          esbx_error_free (&e);
          continue;
        }
      if (p->connected && monotonic_s () - p->connected_at >= HEALTHY_S)
        {
          /* A new outage after a watch that worked.  */
          backoff = 0;
          p->warned = false;
        }
      if (!p->warned)
        {
          esbx_warn ("etcd watch: %s; trying again", e->msg);
          p->warned = true;
          p->said_watching = false;
        }
      esbx_error_free (&e);
      backoff = backoff ? backoff * 2 : BACKOFF_FIRST_MS;
      if (backoff > BACKOFF_MAX_MS)
        backoff = BACKOFF_MAX_MS;
      esbx_worker_pause_locked (&p->w, backoff);
    }
  pthread_mutex_unlock (&p->w.lock);
  return NULL;
}

int
esbx_prefetch_start (esbx_store_t *store, struct esbx_metrics *metrics, struct esbx_prefetch **out,
                     esbx_error_t *err)
{
  struct esbx_prefetch *p = xmalloc0 (sizeof *p);

  p->store = store;
  p->metrics = metrics;
  if (esbx_worker_start (&p->w, prefetch_main, p, "prefetch", err) < 0)
    {
      free (p);
      return -1;
    }
  *out = p;
  return 0;
}

void
esbx_prefetch_reload (struct esbx_prefetch *p)
{
  if (p)
    esbx_worker_wake (&p->w);
}

void
esbx_prefetch_stop (struct esbx_prefetch *p)
{
  if (p == NULL)
    return;
  esbx_worker_stop (&p->w);
  free (p);
}
