/* esbx shim: owner markers.  A process that changes a session's runtime
   state (starting a holder, running a command) leaves a marker in
   ROOT/sessions/S/owners/ named after its pid and start time, and removes it
   when done.  A marker whose process is gone means that process crashed
   mid-operation: `esbx gc` then cleans the whole session.  */
#ifndef ESBX_OWNER_H
#define ESBX_OWNER_H

#include "layerstore.h"

#include <stdbool.h>
#include <stddef.h>

/* *marker receives the marker's name for esbx_owner_end.  */
int esbx_owner_begin (esbx_store_t *store, const char *session, char **marker, esbx_error_t *err);
void esbx_owner_end (esbx_store_t *store, const char *session, const char *marker);
/* Count the markers of live and of gone processes; with REMOVE_DEAD, delete
   the latter.  */
void esbx_owner_scan (esbx_store_t *store, const char *session, size_t *alive, size_t *dead,
                      bool remove_dead);

#endif
