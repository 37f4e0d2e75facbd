/* esbx shim: owner markers.  A process that changes a session's runtime
   state (starting a holder, running a command) leaves a marker in
   ROOT/sessions/S/owners/ named after its pid and start time, and removes it
   when done.  A marker whose process is gone means that process crashed
   mid-operation: `esbx gc` then cleans the whole session.  */
#ifndef ESBX_OWNER_H
#define ESBX_OWNER_H

#include "layerstore.h"
#include "sandbox_session.h"

#include <stdbool.h>
#include <stddef.h>

/* Leave the marker of SS.  Calls nest (an exec starts the holder it runs
   in): they share one marker, removed by the last esbx_owner_end or, after
   a failure between the two, by esbx_sandbox_session_close.  */
int esbx_owner_begin (struct esbx_sandbox_session *ss, esbx_error_t *err);
void esbx_owner_end (struct esbx_sandbox_session *ss);
/* Count the markers of live and of gone processes; with REMOVE_DEAD, delete
   the latter.  */
void esbx_owner_scan (esbx_store_t *store, const char *session, size_t *alive, size_t *dead,
                      bool remove_dead);

#endif
