/* esbxd's background threads (worker.h).  */
#include "worker.h"

#include <errno.h>
#include <time.h>

int
esbx_worker_start (struct esbx_worker *w, void *(*main) (void *), void *arg, const char *what,
                   esbx_error_t *err)
{
  w->stop = false;
  w->wake = false;
  pthread_mutex_init (&w->lock, NULL);
  pthread_cond_init (&w->cond, NULL);
  if (esbx_thread_start (&w->thread, main, arg, what, err) < 0)
    {
      pthread_mutex_destroy (&w->lock);
      pthread_cond_destroy (&w->cond);
      return -1;
    }
  return 0;
}

static void
set (struct esbx_worker *w, bool *flag)
{
  pthread_mutex_lock (&w->lock);
  *flag = true;
  pthread_cond_signal (&w->cond);
  pthread_mutex_unlock (&w->lock);
}

void
esbx_worker_wake (struct esbx_worker *w)
{
  set (w, &w->wake);
}

void
esbx_worker_stop (struct esbx_worker *w)
{
  set (w, &w->stop);
  esbx_thread_join (&w->thread);
  pthread_mutex_destroy (&w->lock);
  pthread_cond_destroy (&w->cond);
}

void
esbx_worker_pause_locked (struct esbx_worker *w, long ms)
{
  struct timespec until;

  clock_gettime (CLOCK_REALTIME, &until);
  until.tv_sec += ms / 1000;
  until.tv_nsec += (ms % 1000) * 1000000L;
  if (until.tv_nsec >= 1000000000L)
    {
      until.tv_sec++;
      until.tv_nsec -= 1000000000L;
    }
  while (!w->stop && !w->wake && pthread_cond_timedwait (&w->cond, &w->lock, &until) != ETIMEDOUT)
    ;
}

bool
esbx_worker_interrupted (struct esbx_worker *w)
{
  bool r;

  pthread_mutex_lock (&w->lock);
  r = w->stop || w->wake;
  pthread_mutex_unlock (&w->lock);
  return r;
}
