/* esbx shim: a session's event log, ROOT/sessions/S/events.jsonl: one JSON
   object per line, each with "time" (RFC 3339) and "type", appended under a
   lock so that concurrent writers never interleave.  */
#ifndef ESBX_EVENTS_H
#define ESBX_EVENTS_H

#include "json.h"
#include "layerstore.h"
#include "sandbox_session.h"

#include <sys/types.h>

/* FIELDS (owned, may be NULL) are merged after "time" and "type".  */
int esbx_event_append (esbx_store_t *store, const char *session, const char *type, json_t *fields,
                       esbx_error_t *err);
/* The same, to the session SS holds.  */
int esbx_event_append_to (const struct esbx_sandbox_session *ss, const char *type, json_t *fields,
                          esbx_error_t *err);

/* Called for each event; a return < 0 stops the walk.  */
typedef int (*esbx_event_fn) (const json_t *event, void *data);

/* Call FN for every complete line from *OFFSET on and advance *OFFSET past
   them.  A session without events yields none.  */
int esbx_events_read (esbx_store_t *store, const char *session, off_t *offset, esbx_event_fn fn,
                      void *data, esbx_error_t *err);

#endif
