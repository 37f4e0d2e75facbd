/* esbxd's samples of its sessions' resource use (the dashboard's small
   charts): every interval, each session whose holder runs has its memory,
   CPU time and pids read from its cgroup (esbx_sandbox_status) and kept,
   the last SAMPLES_KEPT of each, in memory only.  */
#ifndef ESBX_SAMPLES_H
#define ESBX_SAMPLES_H

#include "json.h"
#include "layerstore.h"

struct esbx_samples;

int esbx_samples_start (esbx_store_t *store, long interval_ms, struct esbx_samples **out,
                        esbx_error_t *err);
void esbx_samples_stop (struct esbx_samples *s);
/* Session NAME's samples, oldest first: [{"t" (ms since the epoch),
   "memory" (bytes), "cpu" (per mille of one CPU since the sample before),
   "pids"}]; [] when there are none (S may be NULL).  */
json_t *esbx_samples_json (struct esbx_samples *s, const char *name);

#endif
