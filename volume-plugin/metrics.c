#include "metrics.h"
#include "holder.h"
#include "http.h"
#include "listen.h"
#include "log.h"
#include "utils.h"

#include <inttypes.h>
#include <stdlib.h>
#include <pthread.h>
#include <stdarg.h>
#include <string.h>

static const double buckets[] = { 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30 };
#define N_BUCKETS ARRAY_SIZE (buckets)

struct counter
{
  char *endpoint, *method;
  unsigned status;
  uint64_t n;
};

struct histogram
{
  char *endpoint;
  uint64_t bucket[N_BUCKETS];
  uint64_t count;
  double sum;
};

struct esbx_metrics
{
  esbx_store_t *store;
  pthread_mutex_t lock;
  struct counter *counters;
  size_t n_counters;
  struct histogram *hists;
  size_t n_hists;
  uint64_t auth_failures;
  uint64_t expiries;
  uint64_t expiry_failures;
  uint64_t prefetched;
  struct esbx_http_server *server;
};

struct esbx_metrics *
esbx_metrics_new (esbx_store_t *store)
{
  struct esbx_metrics *m = xmalloc0 (sizeof *m);
  m->store = store;
  pthread_mutex_init (&m->lock, NULL);
  return m;
}

void
esbx_metrics_free (struct esbx_metrics *m)
{
  size_t i;

  if (m == NULL)
    return;
  esbx_metrics_stop (m);
  for (i = 0; i < m->n_counters; i++)
    {
      free (m->counters[i].endpoint);
      free (m->counters[i].method);
    }
  for (i = 0; i < m->n_hists; i++)
    free (m->hists[i].endpoint);
  free (m->counters);
  free (m->hists);
  pthread_mutex_destroy (&m->lock);
  free (m);
}

void
esbx_metrics_request (struct esbx_metrics *m, const char *endpoint, const char *method,
                      unsigned status, double seconds)
{
  struct counter *c = NULL;
  struct histogram *h = NULL;
  size_t i;

  if (m == NULL)
    return;
  pthread_mutex_lock (&m->lock);
  for (i = 0; i < m->n_counters && c == NULL; i++)
    if (m->counters[i].status == status && strcmp (m->counters[i].endpoint, endpoint) == 0
        && strcmp (m->counters[i].method, method) == 0)
      c = &m->counters[i];
  if (c == NULL)
    {
      m->counters = xrealloc (m->counters, (m->n_counters + 1) * sizeof *m->counters);
      c = &m->counters[m->n_counters++];
      c->endpoint = xstrdup (endpoint);
      c->method = xstrdup (method);
      c->status = status;
      c->n = 0;
    }
  c->n++;
  for (i = 0; i < m->n_hists && h == NULL; i++)
    if (strcmp (m->hists[i].endpoint, endpoint) == 0)
      h = &m->hists[i];
  if (h == NULL)
    {
      m->hists = xrealloc (m->hists, (m->n_hists + 1) * sizeof *m->hists);
      h = &m->hists[m->n_hists++];
      memset (h, 0, sizeof *h);
      h->endpoint = xstrdup (endpoint);
    }
  for (i = 0; i < N_BUCKETS; i++)
    if (seconds <= buckets[i])
      h->bucket[i]++;
  h->count++;
  h->sum += seconds;
  pthread_mutex_unlock (&m->lock);
}

void
esbx_metrics_auth_failure (struct esbx_metrics *m)
{
  if (m == NULL)
    return;
  pthread_mutex_lock (&m->lock);
  m->auth_failures++;
  pthread_mutex_unlock (&m->lock);
}

void
esbx_metrics_expired (struct esbx_metrics *m, size_t n, size_t failed)
{
  if (m == NULL || (n == 0 && failed == 0))
    return;
  pthread_mutex_lock (&m->lock);
  m->expiries += n;
  m->expiry_failures += failed;
  pthread_mutex_unlock (&m->lock);
}

void
esbx_metrics_prefetched (struct esbx_metrics *m, size_t n)
{
  if (m == NULL || n == 0)
    return;
  pthread_mutex_lock (&m->lock);
  m->prefetched += n;
  pthread_mutex_unlock (&m->lock);
}

struct buf
{
  char *s;
  size_t len, cap;
};

static void __attribute__ ((format (printf, 2, 3))) bprintf (struct buf *b, const char *fmt, ...)
{
  va_list ap;
  int n;

  for (;;)
    {
      va_start (ap, fmt);
      n = vsnprintf (b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
      va_end (ap);
      if (n < 0)
        abort ();
      if (b->s && b->len + (size_t)n < b->cap)
        {
          b->len += n;
          return;
        }
      b->cap = (b->cap + n + 1) * 2;
      b->s = xrealloc (b->s, b->cap);
    }
}

/* Store state at scrape time.  Names come from the store and follow the
   name rule, so they need no escaping in label values.  */
static void
render_store (struct esbx_metrics *m, struct buf *b)
{
  _cleanup_strv_ char **sessions = NULL, **projects = NULL;
  uint64_t running = 0, mounted = 0, unmounted = 0;
  esbx_error_t e = NULL;
  size_t i;

  sessions = esbx_session_list (m->store, NULL, &e);
  esbx_error_free (&e);
  for (i = 0; sessions && sessions[i]; i++)
    {
      struct esbx_holder_info info = { 0 };

      if (esbx_holder_get (m->store, sessions[i], &info, &e) == 0)
        running++;
      else if (esbx_session_is_mounted (m->store, sessions[i]))
        mounted++;
      else
        unmounted++;
      esbx_error_free (&e);
      esbx_holder_info_free (&info);
    }
  bprintf (b, "# HELP esbx_sessions Sessions of the store by state.\n"
              "# TYPE esbx_sessions gauge\n");
  bprintf (b, "esbx_sessions{state=\"running\"} %" PRIu64 "\n", running);
  bprintf (b, "esbx_sessions{state=\"mounted\"} %" PRIu64 "\n", mounted);
  bprintf (b, "esbx_sessions{state=\"unmounted\"} %" PRIu64 "\n", unmounted);
  pthread_mutex_lock (&m->lock);
  bprintf (b,
           "# HELP esbx_session_expiries_total Sessions this esbxd retired at the end of "
           "their lifetime.\n"
           "# TYPE esbx_session_expiries_total counter\n"
           "esbx_session_expiries_total %" PRIu64 "\n"
           "# HELP esbx_session_expiry_failures_total Attempts of this esbxd to retire a "
           "session that failed (each is tried again later).\n"
           "# TYPE esbx_session_expiry_failures_total counter\n"
           "esbx_session_expiry_failures_total %" PRIu64 "\n",
           m->expiries, m->expiry_failures);
  bprintf (b,
           "# HELP esbx_remote_prefetched_layers_total Layers of shared projects this esbxd "
           "fetched when their head moved in etcd.\n"
           "# TYPE esbx_remote_prefetched_layers_total counter\n"
           "esbx_remote_prefetched_layers_total %" PRIu64 "\n",
           m->prefetched);
  pthread_mutex_unlock (&m->lock);
  bprintf (b,
           "# HELP esbx_holders Session holders running.\n"
           "# TYPE esbx_holders gauge\n"
           "esbx_holders %" PRIu64 "\n",
           running);

  projects = esbx_project_list (m->store, &e);
  esbx_error_free (&e);
  bprintf (b, "# HELP esbx_project_layers Layers in each project's stack.\n"
              "# TYPE esbx_project_layers gauge\n");
  for (i = 0; projects && projects[i]; i++)
    {
      _cleanup_strv_ char **ids = NULL;
      size_t n = 0;

      if (esbx_project_stack (m->store, projects[i], &ids, &n, &e) < 0)
        {
          esbx_error_free (&e);
          continue;
        }
      bprintf (b, "esbx_project_layers{project=\"%s\"} %zu\n", projects[i], n);
    }
}

static double
stat_of (const json_t *o, const char *key)
{
  const char *s = json_get_string (o, key);
  return s ? strtod (s, NULL) : 0;
}

/* The merge queues (README, "The gate"), read from the store: whoever ran
   them (this esbxd, a CLI's publish --wait) counted in queue/stats.json.  */
static void
render_queues (struct esbx_metrics *m, struct buf *b)
{
  _cleanup_strv_ char **projects = NULL;
  esbx_error_t e = NULL;
  size_t i, k;

  projects = esbx_project_list (m->store, &e);
  esbx_error_free (&e);
  bprintf (b, "# HELP esbx_queue_depth Requests of each project's merge queue not yet landed or "
              "rejected.\n# TYPE esbx_queue_depth gauge\n");
  for (i = 0; projects && projects[i]; i++)
    {
      _cleanup_json_ json_t *recs = esbx_queue_list (m->store, projects[i], false, NULL);
      bprintf (b, "esbx_queue_depth{project=\"%s\"} %zu\n", projects[i], json_len (recs));
    }
  bprintf (b, "# HELP esbx_queue_landed_total Requests the merge queue landed.\n"
              "# TYPE esbx_queue_landed_total counter\n");
  for (i = 0; projects && projects[i]; i++)
    {
      _cleanup_json_ json_t *st = esbx_queue_stats (m->store, projects[i]);
      bprintf (b, "esbx_queue_landed_total{project=\"%s\"} %.0f\n", projects[i],
               stat_of (st, "landed"));
    }
  bprintf (b, "# HELP esbx_queue_rejections_total Requests rejected, by reason (check, timeout, "
              "review, conflict, unmerged, base).\n# TYPE esbx_queue_rejections_total counter\n");
  for (i = 0; projects && projects[i]; i++)
    {
      _cleanup_json_ json_t *st = esbx_queue_stats (m->store, projects[i]);
      const json_t *rej = json_get (st, "rejected");
      for (k = 0; k < json_len (rej); k++)
        bprintf (b, "esbx_queue_rejections_total{project=\"%s\",reason=\"%s\"} %.0f\n", projects[i],
                 json_key_at (rej, k), stat_of (rej, json_key_at (rej, k)));
    }
  bprintf (b, "# HELP esbx_queue_check_seconds Time the merge queue's checks ran (each check "
              "command of each request).\n# TYPE esbx_queue_check_seconds summary\n");
  for (i = 0; projects && projects[i]; i++)
    {
      _cleanup_json_ json_t *st = esbx_queue_stats (m->store, projects[i]);
      bprintf (b, "esbx_queue_check_seconds_sum{project=\"%s\"} %.3f\n", projects[i],
               stat_of (st, "check_seconds"));
      bprintf (b, "esbx_queue_check_seconds_count{project=\"%s\"} %.0f\n", projects[i],
               stat_of (st, "check_runs"));
    }
  bprintf (b, "# HELP esbx_queue_wait_seconds Time from filing to landing of the requests "
              "landed.\n# TYPE esbx_queue_wait_seconds summary\n");
  for (i = 0; projects && projects[i]; i++)
    {
      _cleanup_json_ json_t *st = esbx_queue_stats (m->store, projects[i]);
      bprintf (b, "esbx_queue_wait_seconds_sum{project=\"%s\"} %.3f\n", projects[i],
               stat_of (st, "wait_seconds"));
      bprintf (b, "esbx_queue_wait_seconds_count{project=\"%s\"} %.0f\n", projects[i],
               stat_of (st, "waited"));
    }
}

char *
esbx_metrics_render (struct esbx_metrics *m)
{
  struct buf b = { 0 };
  uint64_t ok = 0, conflicts = 0;
  esbx_error_t e = NULL;
  size_t i, k;

  render_store (m, &b);
  render_queues (m, &b);
  /* Every publish on the store, the CLI's too: the store counts them.  */
  if (esbx_counters_publishes (m->store, &ok, &conflicts, &e) < 0)
    esbx_error_free (&e);
  bprintf (&b,
           "# HELP esbx_publishes_total Publishes on the store by result, whatever front end "
           "made them.\n"
           "# TYPE esbx_publishes_total counter\n"
           "esbx_publishes_total{result=\"ok\"} %" PRIu64 "\n"
           "esbx_publishes_total{result=\"conflict\"} %" PRIu64 "\n",
           ok, conflicts);
  pthread_mutex_lock (&m->lock);
  bprintf (&b,
           "# HELP esbx_gateway_auth_failures_total Gateway requests refused for a missing, "
           "bad, revoked or expired token.\n"
           "# TYPE esbx_gateway_auth_failures_total counter\n"
           "esbx_gateway_auth_failures_total %" PRIu64 "\n",
           m->auth_failures);
  bprintf (&b, "# HELP esbx_gateway_requests_total Gateway requests by endpoint, method and "
               "status.\n"
               "# TYPE esbx_gateway_requests_total counter\n");
  for (i = 0; i < m->n_counters; i++)
    bprintf (
        &b, "esbx_gateway_requests_total{endpoint=\"%s\",method=\"%s\",code=\"%u\"} %" PRIu64 "\n",
        m->counters[i].endpoint, m->counters[i].method, m->counters[i].status, m->counters[i].n);
  bprintf (&b, "# HELP esbx_gateway_request_duration_seconds Gateway request latency by "
               "endpoint.\n"
               "# TYPE esbx_gateway_request_duration_seconds histogram\n");
  for (i = 0; i < m->n_hists; i++)
    {
      const struct histogram *h = &m->hists[i];
      for (k = 0; k < N_BUCKETS; k++)
        bprintf (&b,
                 "esbx_gateway_request_duration_seconds_bucket{endpoint=\"%s\",le=\"%g\"} "
                 "%" PRIu64 "\n",
                 h->endpoint, buckets[k], h->bucket[k]);
      bprintf (&b,
               "esbx_gateway_request_duration_seconds_bucket{endpoint=\"%s\",le=\"+Inf\"} "
               "%" PRIu64 "\n",
               h->endpoint, h->count);
      bprintf (&b, "esbx_gateway_request_duration_seconds_sum{endpoint=\"%s\"} %.6f\n", h->endpoint,
               h->sum);
      bprintf (&b, "esbx_gateway_request_duration_seconds_count{endpoint=\"%s\"} %" PRIu64 "\n",
               h->endpoint, h->count);
    }
  pthread_mutex_unlock (&m->lock);
  return b.s;
}

static void
serve (void *data, const struct esbx_http_request *req, struct esbx_http_answer *answer)
{
  struct esbx_metrics *m = data;

  answer->content_type = "text/plain; charset=utf-8";
  if (req->refused)
    {
      answer->status = req->refused;
      answer->body = xasprintf ("%s\n", req->why);
    }
  else if (strcmp (req->method, "GET") != 0 && strcmp (req->method, "HEAD") != 0)
    {
      answer->status = MHD_HTTP_METHOD_NOT_ALLOWED;
      answer->body = xstrdup ("only GET\n");
    }
  else if (strcmp (req->url, "/healthz") == 0)
    answer->body = xstrdup ("ok\n");
  else if (strcmp (req->url, "/metrics") == 0)
    {
      answer->body = esbx_metrics_render (m);
      answer->content_type = "text/plain; version=0.0.4; charset=utf-8";
    }
  else
    {
      answer->status = MHD_HTTP_NOT_FOUND;
      answer->body = xstrdup ("not found: try /healthz or /metrics\n");
    }
  answer->len = strlen (answer->body);
}

int
esbx_metrics_serve (struct esbx_metrics *m, const char *addr, esbx_error_t *err)
{
  /* Scrapes and health checks have no body.  */
  struct esbx_http_config cfg = {
    .name = "metrics",
    .max_body = 0,
    .timeout = 30,
    .head_timeout = 10,
    .max_connections = ESBX_METRICS_MAX_CONNECTIONS,
    .handler = serve,
    .data = m,
  };
  int fd = esbx_listen_loopback ("--metrics", addr, err);

  if (fd < 0)
    return -1;
  if (esbx_http_start (fd, &cfg, &m->server, err) < 0)
    return esbx_error_wrap (err, "start the metrics server on `%s`", addr);
  return 0;
}

void
esbx_metrics_stop (struct esbx_metrics *m)
{
  if (m)
    {
      esbx_http_stop (m->server);
      m->server = NULL;
    }
}
