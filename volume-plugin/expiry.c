/* The expiry thread of esbxd (README, "Lifetimes").  */
#include "expiry.h"
#include "log.h"
#include "sandbox.h"
#include "utils.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

struct esbx_expiry
{
  esbx_store_t *store;
  struct esbx_metrics *metrics;
  long interval_ms;
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  bool stop;
};

static void *
expiry_main (void *arg)
{
  struct esbx_expiry *x = arg;

  pthread_mutex_lock (&x->lock);
  while (!x->stop)
    {
      struct timespec until;
      size_t retired = 0;
      esbx_error_t e = NULL;

      pthread_mutex_unlock (&x->lock);
      if (esbx_sandbox_expire (x->store, NULL, &retired, &e) < 0)
        {
          esbx_warn ("%s", e->msg);
          esbx_error_free (&e);
        }
      if (retired)
        esbx_info ("retired %zu session%s at the end of their lifetime", retired,
                   retired == 1 ? "" : "s");
      esbx_metrics_expired (x->metrics, retired);
      clock_gettime (CLOCK_REALTIME, &until);
      until.tv_sec += x->interval_ms / 1000;
      until.tv_nsec += (x->interval_ms % 1000) * 1000000L;
      if (until.tv_nsec >= 1000000000L)
        {
          until.tv_sec++;
          until.tv_nsec -= 1000000000L;
        }
      pthread_mutex_lock (&x->lock);
      while (!x->stop && pthread_cond_timedwait (&x->cond, &x->lock, &until) != ETIMEDOUT)
        ;
    }
  pthread_mutex_unlock (&x->lock);
  return NULL;
}

int
esbx_expiry_start (esbx_store_t *store, struct esbx_metrics *metrics, long interval_ms,
                   struct esbx_expiry **out, esbx_error_t *err)
{
  struct esbx_expiry *x = xmalloc0 (sizeof *x);
  int r;

  x->store = store;
  x->metrics = metrics;
  x->interval_ms = interval_ms > 0 ? interval_ms : 1000;
  pthread_mutex_init (&x->lock, NULL);
  pthread_cond_init (&x->cond, NULL);
  r = pthread_create (&x->thread, NULL, expiry_main, x);
  if (r != 0)
    {
      free (x);
      return esbx_make_error (err, r, "start the expiry thread");
    }
  *out = x;
  return 0;
}

void
esbx_expiry_stop (struct esbx_expiry *x)
{
  if (x == NULL)
    return;
  pthread_mutex_lock (&x->lock);
  x->stop = true;
  pthread_cond_signal (&x->cond);
  pthread_mutex_unlock (&x->lock);
  pthread_join (x->thread, NULL);
  pthread_mutex_destroy (&x->lock);
  pthread_cond_destroy (&x->cond);
  free (x);
}
