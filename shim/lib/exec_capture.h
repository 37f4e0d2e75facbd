/* esbx shim: a command run in a session as `esbx exec` runs it
 * (esbx_exec_run: the holder, the monitor, the logs, the "exec" events,
 * the session's secrets redacted from what it writes), in a child of the
 * calling process, its output collected for a server that keeps serving
 * while it runs (the MCP server, mcp/).
 *
 * Each stream keeps its first and last KEEP/2 bytes and counts what it cut
 * between them.  A cancelled command, or one past its time, gets SIGTERM on
 * its whole process group, then SIGKILL on what is left of the group
 * EXEC_CAPTURE_GRACE_MS later: nothing it started stays behind unless it
 * left the group (setsid).  */
#ifndef ESBX_EXEC_CAPTURE_H
#define ESBX_EXEC_CAPTURE_H

#include "exec.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EXEC_CAPTURE_GRACE_MS 2000

struct esbx_exec_capture_opts
{
  size_t keep;        /* bytes kept of each stream, head and tail; 0: 64 KiB */
  int cancel_fd;      /* readable: end the command; -1: never */
  int64_t timeout_ms; /* end it after this long; 0: never */
  unsigned tick_ms;   /* call TICK this often while it runs; 0: never */
  /* TAIL is the last line the command wrote to stdout or stderr so far (at
     most 200 bytes, "" before any).  */
  void (*tick) (void *data, int64_t elapsed_ms, const uint64_t total[2], const char *tail);
  void *data;
};

struct esbx_exec_capture
{
  int status;        /* exit status, 128+N when signal N ended it */
  char *out[2];      /* stdout, stderr: the head, then the tail (owned) */
  size_t len[2];     /* bytes in OUT */
  size_t head[2];    /* where the cut is in OUT */
  uint64_t total[2]; /* bytes the stream carried */
  uint64_t cut[2];   /* bytes left out between head and tail */
  bool cancelled;    /* CANCEL_FD ended it */
  bool timed_out;    /* TIMEOUT_MS ended it */
  int64_t elapsed_ms;
};

/* Run O in SESSION and wait for its end, a cancellation or its timeout.
   Fails when the command could not be started (the error esbx_exec_run
   gave: kinds exec-not-found, exec-failed, usage, not-found...).  */
int esbx_exec_capture (esbx_store_t *store, const char *session, const struct esbx_exec_opts *o,
                       const struct esbx_exec_capture_opts *c, struct esbx_exec_capture *res,
                       esbx_error_t *err);
void esbx_exec_capture_free (struct esbx_exec_capture *res);

#endif
