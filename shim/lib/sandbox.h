/* esbx shim: the lifecycle API of a session, the one the CLI, the gateway
   and the Docker volume driver call: the store's private state plus the
   holder that keeps the session's namespaces and processes alive.
   sandbox.c holds the verbs, sandbox_status.c the runtime state,
   sandbox_gc.c the crash cleanup.  */
#ifndef ESBX_SANDBOX_H
#define ESBX_SANDBOX_H

#include "layerstore.h"

#include <stdbool.h>
#include <stdio.h>

/* A new session of PROJECT (esbx_session_create); *NAME is its name.  */
int esbx_sandbox_create (esbx_store_t *store, const char *project,
                         const struct esbx_session_opts *opts, char **name, esbx_error_t *err);

/* The final publish of a session ends it: discarded once its layer is in
   the stack (or when it had nothing to publish).  */
#define ESBX_PUBLISH_DISCARD 1u
/* Publish build outputs and whatever else the session's ignore rules leave
   out (ESBX_CHANGES_INCLUDE_IGNORED).  */
#define ESBX_PUBLISH_INCLUDE_IGNORED 2u

/* Publish session NAME (layerstore.h, esbx_publish_open and the steps
   after it) through the store or, for a shared project, its remote; then
   what FLAGS ask.  ALLOW names secrets whose values may be published.  On
   a conflict nothing else happens: the session stays as it was.  When the
   publish took place but the discard failed, the result says so
   (RESULT->published) and the return is -1 with the discard's error.  */
int esbx_sandbox_publish_allow (esbx_store_t *store, const char *name, const char *message,
                                unsigned int flags, char *const *allow,
                                struct esbx_publish_result *result, esbx_error_t *err);

/* The same, through the project's gate: BY names the caller ("token:ID"
   over the gateway; NULL: "uid:N" of this process).  When the gate is not
   auto and the session has changes, nothing lands now: they are filed as a
   request of the merge queue, *REQUEST (owned) names it, RESULT says
   nothing was published and ESBX_PUBLISH_DISCARD waits for the landing.  */
int esbx_sandbox_publish_as (esbx_store_t *store, const char *name, const char *message,
                             unsigned int flags, char *const *allow, const char *by,
                             struct esbx_publish_result *result, char **request, esbx_error_t *err);

/* Stop the session's holder and every process in it; its files and its
   merged view stay (`esbx session stop`).  A stopped session is at rest.  */
int esbx_sandbox_stop (esbx_store_t *store, const char *name, esbx_error_t *err);

/* Rebase even when processes besides the holder run: they are ended.  */
#define ESBX_REBASE_RESTART 1u
/* What a rebase did to the session's processes (*DID).  */
#define ESBX_REBASE_DID_STOP_HOLDER    1u /* only the holder ran: stopped */
#define ESBX_REBASE_DID_STOP_PROCESSES 2u /* --restart: holder and processes stopped */
#define ESBX_REBASE_DID_RESTART_HOLDER 4u /* and a new holder started after */

/* esbx_session_rebase (merging text files both sides changed).  Rebase
   remounts the session, which the holder's mount namespace would not see:
   a running holder is stopped before and started again after, whatever
   the rebase's outcome; while other processes run in the session it is
   refused (busy) unless FLAGS has ESBX_REBASE_RESTART.  */
int esbx_sandbox_rebase (esbx_store_t *store, const char *name, unsigned int flags,
                         struct esbx_publish_result *result, unsigned int *did, esbx_error_t *err);

/* Stop the holder (ending every process of the session), remove its cgroup,
   unmount and delete the session; unpublished changes go to the trash
   unless FLAGS has ESBX_DISCARD_FORCE (esbx_session_discard).  */
int esbx_sandbox_discard (esbx_store_t *store, const char *name, unsigned int flags,
                          esbx_error_t *err);

/* The merged view, mounted on demand (after a reboot, say); *MERGED (when
   not NULL) is its path.  Counts as use of the session (--idle-ttl).  */
int esbx_sandbox_view_acquire (esbx_store_t *store, const char *name, char **merged,
                               esbx_error_t *err);
/* A front end no longer needs the merged view (Docker's last Unmount): it
   is unmounted unless the holder runs, whose processes use it too.  */
int esbx_sandbox_view_release (esbx_store_t *store, const char *name, esbx_error_t *err);

/* The answer to a rebase: esbx_rebase_result_json plus "holder"
   ("untouched", "restarted", or "stopped" when it did not start again)
   and "processes_stopped".  */
json_t *esbx_sandbox_rebase_json (const struct esbx_publish_result *r, unsigned int did);

/* Whether the session's holder is alive.  */
bool esbx_sandbox_holder_running (esbx_store_t *store, const char *name);

/* Runtime status of a session for `session inspect` and the plugin's Get:
   an object with at least "holder" (pid or null); resource use when a
   holder runs.  Never fails: unknown parts are null.  */
json_t *esbx_sandbox_status (esbx_store_t *store, const char *name);

/* The sessions (of PROJECT when not NULL) as an array of session views,
   only those VISIBLE accepts when it is not NULL.  */
typedef bool (*esbx_sandbox_filter_t) (const struct esbx_session *s, const void *data);
json_t *esbx_sandbox_list (esbx_store_t *store, const char *project, esbx_sandbox_filter_t visible,
                           const void *data, esbx_error_t *err);

/* One session's view with its runtime status (`session inspect`).  */
json_t *esbx_sandbox_inspect (esbx_store_t *store, const char *name, esbx_error_t *err);

/* Snapshot SESSION (esbx_snapshot_create) as NAME (NULL: generated) while
   its processes are frozen; *OUT is the snapshot's name.  */
int esbx_sandbox_snapshot (esbx_store_t *store, const char *session, const char *name, char **out,
                           esbx_error_t *err);
/* Snapshot SESSION, then create a session of its project from that
   snapshot with OPTS (its base and snapshot must be unset); *SNAPSHOT
   (when not NULL) and *NAME name them.  */
int esbx_sandbox_fork (esbx_store_t *store, const char *session,
                       const struct esbx_session_opts *opts, char **snapshot, char **name,
                       esbx_error_t *err);
/* Thaw SESSION when a snapshot that did not finish left it frozen (gc).  */
void esbx_sandbox_thaw_abandoned (esbx_store_t *store, const char *session, FILE *report);
/* Retire every session past its time to live or idle time to live: holder
   and processes stopped, an "expired" event, then a snapshot first when
   its on_expiry says so, and the discard (to the trash when it has
   unpublished work and no snapshot was made).  A session that fails is
   reported (REPORT, else the log) and tried again RETRY_MS later, twice as
   long after each failure (RETRY_MS 0: `esbx gc`, which tries at once);
   after ESBX_EXPIRY_ATTEMPTS failures it is discarded without the
   snapshot.  Fails only when the sessions cannot be listed; *RES counts
   the sessions retired and the attempts that failed.  */
#define ESBX_EXPIRY_ATTEMPTS 5
struct esbx_expire_result
{
  size_t retired, failed;
};
int esbx_sandbox_expire (esbx_store_t *store, long retry_ms, FILE *report,
                         struct esbx_expire_result *res, esbx_error_t *err);

/* What gc does besides (flags of esbx_sandbox_gc_flags: esbx_gc plus the
   sessions whose holder died or whose owner crashed).  */
#define ESBX_GC_SNAPSHOTS 1u /* remove the snapshots nothing uses */
#define ESBX_GC_CACHE     2u /* and the copies of shared projects nothing uses (esbx_gc_cache) */
int esbx_sandbox_gc_flags (esbx_store_t *store, unsigned int flags, FILE *report,
                           esbx_error_t *err);

#endif
