/* esbx shim: the three processes of one `esbx exec`.
 *
 *   caller   esbx_exec_run (exec.c): prepares, relays stdin, forwards
 *            signals, waits for the monitor's verdict;
 *   monitor  (exec_monitor.c) in a session of its own, outside the
 *            session's pid namespace and cgroup: forks the command, copies
 *            its output to the caller's stdout/stderr and the logs, waits
 *            for it and writes the "exec" event;
 *   command  (exec_child.c) born in the holder's pid namespace: joins the
 *            session and becomes the program.
 *
 * Each tells its parent on a pipe with common/sync.h: the command sends an
 * error when setup or execve failed, EXEC_DETACHED with the pid of a
 * detached command; the monitor sends EXEC_FORKED with the command's host
 * pid (for signals), then EXEC_STATUS with its exit status or an error.  */
#ifndef ESBX_EXEC_INTERNAL_H
#define ESBX_EXEC_INTERNAL_H

#include "exec.h"
#include "holder.h"
#include "sandbox_session.h"

#include <stdint.h>
#include <sys/types.h>

#define EXEC_FORKED   'C'
#define EXEC_STATUS   'S'
#define EXEC_DETACHED 'P'

struct exec_run
{
  const struct esbx_sandbox_session *ss;
  const struct esbx_exec_opts *opts;
  const struct esbx_holder_info *info;
  int holder_pidfd;
  char *cwd; /* inside the session */
  char **env;
  struct esbx_secret *secrets; /* of the session: its env, and what output redacts */
  size_t n_secrets;
  bool set_user; /* --user, parsed once by esbx_exec_run */
  uid_t uid;
  gid_t gid;

  unsigned long seq;
  char *outname, *errname; /* relative to the session directory */
  int outlog, errlog;
  uint64_t log_limit;
  char *started;

  /* The command's side of its stdio: pipes, or the pty's slave (in);
     -1 where /dev/null (detached stdin) or unused.  */
  int in, out, err;
  /* The other side, read by the monitor: pipes or the pty's master (out_r).  */
  int in_w, out_r, err_r;
  int verdict_w; /* monitor -> caller */
};

/* exec_child.c: between fork and exec; never returns.  REPORT is a
   close-on-exec pipe to the monitor.  */
void __attribute__ ((noreturn)) exec_child (const struct exec_run *r, int report);

/* exec_monitor.c: the monitor; never returns.  */
void __attribute__ ((noreturn)) exec_monitor (struct exec_run *r);

/* exec_pty.c: a pty of the session's own devpts (the holder's /dev/pts),
   its master and slave; the slave is never looked up by path.  */
int exec_pty_open (pid_t holder, int *master, int *slave, esbx_error_t *err);

#endif
