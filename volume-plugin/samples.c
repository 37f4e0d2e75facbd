/* The samples of sessions' resource use (samples.h).  */
#include "samples.h"
#include "sandbox.h"
#include "utils.h"
#include "worker.h"

#include <string.h>
#include <time.h>

#define SAMPLES_KEPT 60

struct sample
{
  int64_t t, memory, cpu, pids;
};

struct series
{
  char *name;
  struct sample v[SAMPLES_KEPT];
  size_t n, next;
  int64_t last_usec, last_t;
  bool seen; /* in the last round */
};

struct esbx_samples
{
  esbx_store_t *store;
  long interval_ms;
  struct esbx_worker w;
  pthread_mutex_t lock; /* guards SERIES */
  struct series *series;
  size_t n;
};

static int64_t
now_ms (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t
field (const json_t *o, const char *a, const char *b)
{
  int64_t v = -1;

  json_get_int (json_get (o, a), b, &v);
  return v;
}

static struct series *
find (struct esbx_samples *s, const char *name)
{
  for (size_t i = 0; i < s->n; i++)
    if (strcmp (s->series[i].name, name) == 0)
      return &s->series[i];
  return NULL;
}

static void
round_once (struct esbx_samples *s)
{
  _cleanup_strv_ char **names = NULL;
  esbx_error_t e = NULL;
  size_t i;

  names = esbx_session_list (s->store, NULL, &e);
  esbx_error_free (&e);
  pthread_mutex_lock (&s->lock);
  for (i = 0; i < s->n; i++)
    s->series[i].seen = false;
  pthread_mutex_unlock (&s->lock);
  for (i = 0; names && names[i]; i++)
    {
      _cleanup_json_ json_t *st = NULL;
      struct series *x;
      struct sample smp;
      int64_t usec, pid = -1;

      st = esbx_sandbox_status (s->store, names[i]);
      if (!json_get_int (st, "holder", &pid) || pid <= 0)
        continue;
      smp.t = now_ms ();
      smp.memory = field (st, "memory", "current");
      smp.pids = field (st, "pids", "current");
      usec = field (st, "cpu", "usage_usec");
      pthread_mutex_lock (&s->lock);
      x = find (s, names[i]);
      if (x == NULL)
        {
          s->series = xrealloc (s->series, (s->n + 1) * sizeof *s->series);
          x = &s->series[s->n++];
          memset (x, 0, sizeof *x);
          x->name = xstrdup (names[i]);
          x->last_usec = -1;
        }
      smp.cpu = -1;
      if (usec >= 0 && x->last_usec >= 0 && smp.t > x->last_t)
        smp.cpu = (usec - x->last_usec) / (smp.t - x->last_t);
      x->last_usec = usec;
      x->last_t = smp.t;
      x->v[x->next] = smp;
      x->next = (x->next + 1) % SAMPLES_KEPT;
      if (x->n < SAMPLES_KEPT)
        x->n++;
      x->seen = true;
      pthread_mutex_unlock (&s->lock);
    }
  /* Sessions gone or stopped lose their samples.  */
  pthread_mutex_lock (&s->lock);
  for (i = 0; i < s->n;)
    if (!s->series[i].seen)
      {
        free (s->series[i].name);
        s->series[i] = s->series[--s->n];
      }
    else
      i++;
  pthread_mutex_unlock (&s->lock);
}

static void *
samples_main (void *arg)
{
  struct esbx_samples *s = arg;

  pthread_mutex_lock (&s->w.lock);
  while (!s->w.stop)
    {
      pthread_mutex_unlock (&s->w.lock);
      round_once (s);
      pthread_mutex_lock (&s->w.lock);
      esbx_worker_pause_locked (&s->w, s->interval_ms);
    }
  pthread_mutex_unlock (&s->w.lock);
  return NULL;
}

int
esbx_samples_start (esbx_store_t *store, long interval_ms, struct esbx_samples **out,
                    esbx_error_t *err)
{
  struct esbx_samples *s = xmalloc0 (sizeof *s);

  s->store = store;
  s->interval_ms = interval_ms > 0 ? interval_ms : 2000;
  pthread_mutex_init (&s->lock, NULL);
  if (esbx_worker_start (&s->w, samples_main, s, "samples", err) < 0)
    {
      pthread_mutex_destroy (&s->lock);
      free (s);
      return -1;
    }
  *out = s;
  return 0;
}

void
esbx_samples_stop (struct esbx_samples *s)
{
  if (s == NULL)
    return;
  esbx_worker_stop (&s->w);
  for (size_t i = 0; i < s->n; i++)
    free (s->series[i].name);
  free (s->series);
  pthread_mutex_destroy (&s->lock);
  free (s);
}

json_t *
esbx_samples_json (struct esbx_samples *s, const char *name)
{
  json_t *arr = json_new (JSON_ARRAY);
  struct series *x;

  if (s == NULL)
    return arr;
  pthread_mutex_lock (&s->lock);
  x = find (s, name);
  for (size_t k = 0; x && k < x->n; k++)
    {
      const struct sample *smp = &x->v[(x->next + SAMPLES_KEPT - x->n + k) % SAMPLES_KEPT];
      json_t *o = json_new (JSON_OBJECT);

      json_set_int (o, "t", smp->t);
      json_set_int (o, "memory", smp->memory);
      json_set_int (o, "cpu", smp->cpu);
      json_set_int (o, "pids", smp->pids);
      json_append (arr, o);
    }
  pthread_mutex_unlock (&s->lock);
  return arr;
}
