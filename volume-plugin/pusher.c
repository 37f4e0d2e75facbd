/* The snapshot pusher thread of esbxd (pusher.h).  */
#include "pusher.h"
#include "log.h"
#include "sandbox.h"
#include "utils.h"
#include "worker.h"

#define ROUND_MS 1000

struct esbx_pusher
{
  esbx_store_t *store;
  struct esbx_worker w;
};

static void *
pusher_main (void *arg)
{
  struct esbx_pusher *p = arg;

  pthread_mutex_lock (&p->w.lock);
  while (!p->w.stop)
    {
      size_t pushed = 0, failed = 0;
      esbx_error_t e = NULL;

      pthread_mutex_unlock (&p->w.lock);
      /* Each push and each failure is logged there; a session that failed
         is due again next round.  */
      if (esbx_sandbox_push_due (p->store, &pushed, &failed, &e) < 0)
        {
          esbx_warn ("%s", e->msg);
          esbx_error_free (&e);
        }
      pthread_mutex_lock (&p->w.lock);
      esbx_worker_pause_locked (&p->w, ROUND_MS);
    }
  pthread_mutex_unlock (&p->w.lock);
  return NULL;
}

int
esbx_pusher_start (esbx_store_t *store, struct esbx_pusher **out, esbx_error_t *err)
{
  struct esbx_pusher *p = xmalloc0 (sizeof *p);

  p->store = store;
  if (esbx_worker_start (&p->w, pusher_main, p, "snapshot pusher", err) < 0)
    {
      free (p);
      return -1;
    }
  *out = p;
  return 0;
}

void
esbx_pusher_stop (struct esbx_pusher *p)
{
  if (p == NULL)
    return;
  esbx_worker_stop (&p->w);
  free (p);
}
