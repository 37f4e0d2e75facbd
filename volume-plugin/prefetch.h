/* esbxd's prefetch thread (docs/SCALE-OUT.md, "esbxd"): it watches the
   heads in the store's etcd and, when the head of a project this store
   shares moves, fetches the new layers from the registry and writes the
   local stack, so that the next session create on this host downloads
   nothing.  Every shared project is synced once when the watch starts
   (at start, after SIGHUP, after etcd compacted the revision it was at);
   a lost connection is retried with backoff and resumes from the last
   revision seen.  */
#ifndef ESBX_PREFETCH_H
#define ESBX_PREFETCH_H

#include "layerstore.h"
#include "metrics.h"

struct esbx_prefetch;

int esbx_prefetch_start (esbx_store_t *store, struct esbx_metrics *metrics,
                         struct esbx_prefetch **out, esbx_error_t *err);
/* Connect again with the remote as configured now, and sync everything
   (SIGHUP).  */
void esbx_prefetch_reload (struct esbx_prefetch *p);
/* Stop it and wait for it (NULL: nothing to do).  */
void esbx_prefetch_stop (struct esbx_prefetch *p);

#endif
