/* esbx shim: run a command inside a session (`esbx exec`).
 *
 * The command joins the holder's namespaces (setns), the session cgroup,
 * gives up privileges (confine.h, syscall_filter.h) and runs with the
 * session's root, the workspace as its default directory and a clean
 * environment: PATH, HOME (/root for uid 0, else /tmp), HOSTNAME, TERM
 * (when set), ESBX_SESSION, then the session's env (session create --env),
 * then --env, each replacing what came before.  It is the leader of a
 * session (setsid) of its own and never holds the caller's terminal or
 * descriptors: stdin is relayed through a pipe, stdout and stderr come
 * back through pipes, or all three through a pty of the session's own
 * devpts with `tty`.  What it writes passes through and is kept, up to
 * LOG_LIMIT bytes per stream, in ROOT/sessions/S/logs/N.out and N.err.
 *
 * A monitor process (the conmon of a command: in its own session, outside
 * the session's pid namespace and cgroup) forks the command, copies its
 * output, waits for it and writes the "exec" event, so the event and the
 * logs are complete even when the caller dies first.  */
#ifndef ESBX_EXEC_H
#define ESBX_EXEC_H

#include "layerstore.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct esbx_exec_opts
{
  char *const *argv;  /* NULL-terminated, at least one */
  const char *cwd;    /* NULL: the workspace; relative: beneath it */
  char *const *env;   /* "K=V", NULL-terminated, may be NULL */
  const char *user;   /* "UID[:GID]" or NULL */
  bool detach;        /* run in the background; survives this call */
  bool tty;           /* a pty of the session's own for stdin, stdout and stderr */
  uint64_t log_limit; /* bytes kept per stream in the logs; 0: ESBX_EXEC_LOG_LIMIT */
  /* Called in the caller once the command runs, with its pid as the
     caller sees it: the command leads a session and a process group of its
     own, so -PID reaches what it started too (exec_capture.c ends a
     cancelled command that way).  NULL: nothing is called.  */
  void (*started) (pid_t pid, void *data);
  void *started_data;
};

/* The default of log_limit: $ESBX_EXEC_LOG_LIMIT (bytes) or 16 MiB.  */
#define ESBX_EXEC_LOG_LIMIT_DEFAULT (16u << 20)

/* *status receives the command's exit status, 128+N when signal N killed
   it; 0 for a detached command that started.  Returns < 0 when the command
   could not be started (kind ESBX_ERR_USAGE for bad options).  */
int esbx_exec_run (esbx_store_t *store, const char *session, const struct esbx_exec_opts *opts,
                   int *status, esbx_error_t *err);

/* Validation that needs no session, for the CLI's usage errors.  */
int esbx_exec_check_env (const char *kv, esbx_error_t *err);
int esbx_exec_parse_user (const char *s, uid_t *uid, gid_t *gid, esbx_error_t *err);

#endif
