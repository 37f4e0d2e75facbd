/* esbxd's snapshot pusher: every second, an automatic snapshot of each
   session whose project pushes every N seconds and which is due
   (esbx_sandbox_push_due; docs/SCALE-OUT.md, "Sessions that outlive their
   host").  */
#ifndef ESBX_PUSHER_H
#define ESBX_PUSHER_H

#include "layerstore.h"

struct esbx_pusher;

int esbx_pusher_start (esbx_store_t *store, struct esbx_pusher **out, esbx_error_t *err);
/* Stop it and wait for it (NULL: nothing to do).  */
void esbx_pusher_stop (struct esbx_pusher *p);

#endif
