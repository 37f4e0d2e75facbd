/* esbxd's expiry thread: every interval, the sessions past their time to
   live or idle time to live are retired (esbx_sandbox_expire) and counted
   in the metrics.  */
#ifndef ESBX_EXPIRY_H
#define ESBX_EXPIRY_H

#include "layerstore.h"
#include "metrics.h"

struct esbx_expiry;

/* Start the thread; INTERVAL_MS between two checks.  */
int esbx_expiry_start (esbx_store_t *store, struct esbx_metrics *metrics, long interval_ms,
                       struct esbx_expiry **out, esbx_error_t *err);
/* Stop it and wait for it (NULL: nothing to do).  */
void esbx_expiry_stop (struct esbx_expiry *x);

#endif
