/* esbxd's queue thread (README, "The gate"): while esbxd runs, it runs the
   merge queue of every project that has requests ready, each on a thread
   of its own (shim/lib/queue.h: esbx_queue_run), so that a project's long
   checks never hold up another's.  A queue a CLI runner holds (`publish
   --wait`) is left to it.  */
#ifndef ESBX_QUEUE_WORKER_H
#define ESBX_QUEUE_WORKER_H

#include "layerstore.h"

struct esbx_queue_worker;

/* Start the thread; INTERVAL_MS between two looks at the queues.  */
int esbx_queue_worker_start (esbx_store_t *store, long interval_ms, struct esbx_queue_worker **out,
                             esbx_error_t *err);
/* Stop it and every runner (their checks go back to their queues), and
   wait for them (NULL: nothing to do).  */
void esbx_queue_worker_stop (struct esbx_queue_worker *q);

#endif
