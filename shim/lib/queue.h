/* esbx shim: the merge queue's runner (queue_run.c; README, "The gate").
   One runner at a time per project (the flock ROOT/projects/P/queue/run.lock):
   esbxd's queue thread whenever it runs, else the CLI (`esbx publish
   --wait`, `esbx queue run`).  It takes the requests in the order they
   became ready, builds each one's candidate layer on the head or on the
   candidate of the request ahead of it (layerstore's esbx_queue_candidate),
   runs the project's checks in a throwaway session of that layer, and
   lands the candidates in order, each only on the parent it was checked
   on.  */
#ifndef ESBX_QUEUE_H
#define ESBX_QUEUE_H

#include "layerstore.h"

#include <stdbool.h>
#include <stdio.h>

struct esbx_queue_run_opts
{
  /* Stop once request UNTIL is final (the requests being tested then
     finish first); NULL: once the queue has nothing ready.  */
  const char *until;
  /* Asked between steps: true ends the run (checks under way are killed,
     their requests go back to the queue).  */
  bool (*stop) (void *arg);
  void *arg;
  FILE *report; /* a line per request that lands or is rejected; may be NULL */
};

/* Run PROJECT's queue as described above.  1 when another runner holds
   the queue (nothing done), 0 when the run ended, < 0 on an error.  */
int esbx_queue_run (esbx_store_t *store, const char *project, const struct esbx_queue_run_opts *o,
                    esbx_error_t *err);

/* Whether PROJECT has requests ready to run (queued, or left testing by a
   runner that was killed).  */
bool esbx_queue_has_work (esbx_store_t *store, const char *project);

/* Block until request ID is final, running its project's queue whenever no
   other runner does; TIMEOUT_MS > 0 bounds the wait (ESBX_ERR_BUSY).
   *OUT: the final record.  */
int esbx_queue_wait (esbx_store_t *store, const char *id, int64_t timeout_ms, json_t **out,
                     esbx_error_t *err);

#endif
