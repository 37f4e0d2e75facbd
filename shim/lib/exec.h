/* esbx shim: run a command inside a session (`esbx exec`).
 *
 * The command joins the holder's namespaces (setns), the session cgroup,
 * gives up privileges (confine.h) and runs with the session's root, the
 * workspace as its default directory and a clean environment:
 * PATH, HOME=/tmp, HOSTNAME, TERM (when set), ESBX_SESSION, then --env.
 * Its stdout and stderr pass through and are kept in ROOT/sessions/S/logs/
 * N.out and N.err; stdin passes through.  Each run is an "exec" event.  */
#ifndef ESBX_EXEC_H
#define ESBX_EXEC_H

#include "layerstore.h"

#include <stdbool.h>
#include <sys/types.h>

struct esbx_exec_opts
{
  char *const *argv; /* NULL-terminated, at least one */
  const char *cwd;   /* NULL: the workspace; relative: beneath it */
  char *const *env;  /* "K=V", NULL-terminated, may be NULL */
  const char *user;  /* "UID[:GID]" or NULL */
  bool detach;       /* run in the background; survives this call */
};

/* *status receives the command's exit status, 128+N when signal N killed
   it; 0 for a detached command that started.  Returns < 0 when the command
   could not be started (err->code 2 for bad options).  */
int esbx_exec_run (esbx_store_t *store, const char *session, const struct esbx_exec_opts *opts,
                   int *status, esbx_error_t *err);

/* Validation that needs no session, for the CLI's usage errors.  */
int esbx_exec_check_env (const char *kv, esbx_error_t *err);
int esbx_exec_parse_user (const char *s, uid_t *uid, gid_t *gid, esbx_error_t *err);

#endif
