/* esbxd: Prometheus metrics and the health check, served without
   authentication on a loopback-only listener (listen.h).  Request counters
   and latency histograms are kept in memory; the store's state (sessions,
   holders, layers, the publish counters of counters.c) is read at each
   scrape.  */
#ifndef ESBX_PLUGIN_METRICS_H
#define ESBX_PLUGIN_METRICS_H

#include "error.h"
#include "layerstore.h"

#include <stdbool.h>

struct esbx_metrics;

struct esbx_metrics *esbx_metrics_new (esbx_store_t *store);
void esbx_metrics_free (struct esbx_metrics *m);

/* One gateway request to ENDPOINT (a route name such as "session_publish").  */
void esbx_metrics_request (struct esbx_metrics *m, const char *endpoint, const char *method,
                           unsigned status, double seconds);
void esbx_metrics_auth_failure (struct esbx_metrics *m);
/* N sessions retired at the end of their lifetime, FAILED attempts that
   failed (expiry.c).  */
void esbx_metrics_expired (struct esbx_metrics *m, size_t n, size_t failed);
/* N layers of shared projects fetched by the prefetch thread.  */
void esbx_metrics_prefetched (struct esbx_metrics *m, size_t n);

/* The Prometheus text exposition (owned).  */
char *esbx_metrics_render (struct esbx_metrics *m);

/* Connections open at once on the metrics listener.  */
#define ESBX_METRICS_MAX_CONNECTIONS 32

/* Serve /healthz and /metrics on the loopback address ADDR.  */
int esbx_metrics_serve (struct esbx_metrics *m, const char *addr, esbx_error_t *err);
void esbx_metrics_stop (struct esbx_metrics *m);

#endif
