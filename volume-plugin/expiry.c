/* The expiry thread of esbxd (README, "Lifetimes").  */
#include "expiry.h"
#include "log.h"
#include "sandbox.h"
#include "utils.h"
#include "worker.h"

#include <stdbool.h>

struct esbx_expiry
{
  esbx_store_t *store;
  struct esbx_metrics *metrics;
  long interval_ms;
  struct esbx_worker w;
};

static void *
expiry_main (void *arg)
{
  struct esbx_expiry *x = arg;

  pthread_mutex_lock (&x->w.lock);
  while (!x->w.stop)
    {
      struct esbx_expire_result r = { 0 };
      esbx_error_t e = NULL;

      pthread_mutex_unlock (&x->w.lock);
      /* A failed session is tried again one interval later, then twice as
         long each time (sandbox_expire.c); each failure is logged there.  */
      if (esbx_sandbox_expire (x->store, x->interval_ms, NULL, &r, &e) < 0)
        {
          esbx_warn ("%s", e->msg);
          esbx_error_free (&e);
        }
      if (r.retired)
        esbx_info ("retired %zu session%s at the end of their lifetime", r.retired,
                   r.retired == 1 ? "" : "s");
      esbx_metrics_expired (x->metrics, r.retired, r.failed);
      pthread_mutex_lock (&x->w.lock);
      esbx_worker_pause_locked (&x->w, x->interval_ms);
    }
  pthread_mutex_unlock (&x->w.lock);
  return NULL;
}

int
esbx_expiry_start (esbx_store_t *store, struct esbx_metrics *metrics, long interval_ms,
                   struct esbx_expiry **out, esbx_error_t *err)
{
  struct esbx_expiry *x = xmalloc0 (sizeof *x);

  x->store = store;
  x->metrics = metrics;
  x->interval_ms = interval_ms > 0 ? interval_ms : 1000;
  if (esbx_worker_start (&x->w, expiry_main, x, "expiry", err) < 0)
    {
      free (x);
      return -1;
    }
  *out = x;
  return 0;
}

void
esbx_expiry_stop (struct esbx_expiry *x)
{
  if (x == NULL)
    return;
  esbx_worker_stop (&x->w);
  free (x);
}
