/* esbx shim: the whole lifecycle of a session's sandbox, as the CLI and
   esbxd need it: the store's private state plus the holder that keeps the
   session's namespaces and processes alive.  */
#ifndef ESBX_SANDBOX_H
#define ESBX_SANDBOX_H

#include "layerstore.h"

#include <stdio.h>

/* Stop the holder (ending every process of the session), remove its cgroup,
   unmount and delete the session.  */
int esbx_sandbox_discard (esbx_store_t *store, const char *name, esbx_error_t *err);

/* esbx_session_rebase, refused (EBUSY) while the session's holder runs:
   rebase remounts the session, and the holder's mount namespace would keep
   the old overlay on the same upper directory.  */
int esbx_sandbox_rebase (esbx_store_t *store, const char *name, struct esbx_publish_result *result,
                         esbx_error_t *err);

/* esbx_gc plus the sessions whose holder died or whose owner crashed.  */
int esbx_sandbox_gc (esbx_store_t *store, FILE *report, esbx_error_t *err);

/* Runtime status of a session for `session inspect` and the plugin's Get:
   an object with at least "holder" (pid or null); resource use when a
   holder runs.  Never fails: unknown parts are null.  */
json_t *esbx_sandbox_status (esbx_store_t *store, const char *name);

#endif
