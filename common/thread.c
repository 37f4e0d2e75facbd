/* esbx: threads: see thread.h.  */
#include "thread.h"
#include "utils.h"

#include <stdlib.h>

static unsigned running;
static pthread_mutex_t count_lock = PTHREAD_MUTEX_INITIALIZER;

static void
count (int delta)
{
  pthread_mutex_lock (&count_lock);
  running = (unsigned)((int)running + delta);
  pthread_mutex_unlock (&count_lock);
}

int
esbx_thread_start (struct esbx_thread *t, void *(*fn) (void *), void *arg, const char *what,
                   esbx_error_t *err)
{
  int r;

  t->started = false;
  count (1);
  r = pthread_create (&t->id, NULL, fn, arg);
  if (r != 0)
    {
      count (-1);
      return esbx_make_error (err, r, "start the %s thread", what);
    }
  t->started = true;
  return 0;
}

void
esbx_thread_start_or_run (struct esbx_thread *t, void *(*fn) (void *), void *arg)
{
  esbx_error_t ignored = NULL;

  if (esbx_thread_start (t, fn, arg, "", &ignored) < 0)
    {
      esbx_error_free (&ignored);
      fn (arg);
    }
}

void
esbx_thread_join (struct esbx_thread *t)
{
  if (!t->started)
    return;
  pthread_join (t->id, NULL);
  t->started = false;
  count (-1);
}

unsigned
esbx_threads_running (void)
{
  unsigned n;

  pthread_mutex_lock (&count_lock);
  n = running;
  pthread_mutex_unlock (&count_lock);
  return n;
}

void
esbx_threads_foreign (void)
{
  count (1);
}

struct detached
{
  void *(*fn) (void *);
  void *arg;
};

static void *
run_detached (void *p)
{
  struct detached d = *(struct detached *)p;

  free (p);
  d.fn (d.arg);
  count (-1);
  return NULL;
}

int
esbx_thread_detached (void *(*fn) (void *), void *arg, size_t stack, const char *what,
                      esbx_error_t *err)
{
  struct detached *d = xmalloc (sizeof *d);
  pthread_attr_t attr;
  pthread_t id;
  int r;

  d->fn = fn;
  d->arg = arg;
  pthread_attr_init (&attr);
  pthread_attr_setdetachstate (&attr, PTHREAD_CREATE_DETACHED);
  if (stack)
    pthread_attr_setstacksize (&attr, stack);
  count (1);
  r = pthread_create (&id, &attr, run_detached, d);
  pthread_attr_destroy (&attr);
  if (r != 0)
    {
      count (-1);
      free (d);
      return esbx_make_error (err, r, "start the %s thread", what);
    }
  return 0;
}
