/* liblayerstore: the progress sink of the calling thread.  Thread-local
 * rather than a parameter of every long operation: esbxd's gateway shares
 * one store among its request threads, and each request that asks for
 * progress streams its own.  The hot loops only add to counters; the time
 * is read from CLOCK_MONOTONIC_COARSE, which the vDSO answers without a
 * system call.  */
#include "layerstore.h"

#include <stdlib.h>
#include <time.h>

static __thread struct esbx_progress *current;

static uint64_t
now_ns (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC_COARSE, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* A sink that leaves the interval to the library gets 100 ms, or
   $ESBX_PROGRESS_INTERVAL_MS (1 to 60000; tests make it short).  Read at
   each report only, never per item.  */
static uint64_t
interval_ns (const struct esbx_progress *p)
{
  const char *env;
  unsigned long ms = p->interval_ms;
  char *end;

  if (ms == 0 && (env = getenv ("ESBX_PROGRESS_INTERVAL_MS")) && *env)
    {
      ms = strtoul (env, &end, 10);
      if (*end || ms > 60000)
        ms = 0;
    }
  return (uint64_t)(ms ? ms : 100) * 1000000ULL;
}

void
esbx_progress_set (struct esbx_progress *p)
{
  current = p;
}

struct esbx_progress *
esbx_progress_get (void)
{
  return current;
}

struct esbx_progress *
esbx_progress_begin (const char *phase, const char *unit, uint64_t total)
{
  struct esbx_progress *p = current;

  if (p == NULL)
    return NULL;
  p->phase = phase;
  p->unit = unit;
  p->done = p->bytes = p->in = p->in_total = 0;
  p->total = total;
  p->final = false;
  p->start_ns = now_ns ();
  p->elapsed_ns = 0;
  p->next_ns = p->start_ns + interval_ns (p);
  return p;
}

void
esbx_progress_tick (struct esbx_progress *p)
{
  uint64_t t;

  if (p == NULL)
    return;
  t = now_ns ();
  if (t < p->next_ns)
    return;
  p->next_ns = t + interval_ns (p);
  p->elapsed_ns = t - p->start_ns;
  p->report (p, p->data);
}

void
esbx_progress_end (struct esbx_progress *p)
{
  if (p == NULL)
    return;
  p->final = true;
  p->elapsed_ns = now_ns () - p->start_ns;
  p->report (p, p->data);
  p->final = false;
}
