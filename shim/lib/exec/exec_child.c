/* The command of `esbx exec`, from fork to execve.  It is born in the
 * holder's pid namespace (the monitor joined it for its children), enters
 * the session cgroup through the host's /sys, joins the holder's mnt, uts,
 * ipc and net namespaces, becomes the leader of a session of its own (so
 * `kill 0` or a hangup reach only the command's own processes) with its
 * pty as controlling terminal under --tty, gives up what it may not keep
 * (confine.c) and loads the syscall filter last.  It is not dumpable until
 * execve: a process of the session cannot attach to it while it still
 * holds what it is about to give up.  */
#include "confine.h"
#include "cgroup.h"
#include "exec_internal.h"
#include "fs.h"
#include "gvisor.h"
#include "sync.h"
#include "syscall_filter.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

extern char **environ;

static void __attribute__ ((noreturn)) child_fail (int report, esbx_error_t *err)
{
  esbx_error_send (report, err);
  _exit (127);
}

static int
setup_stdio (const struct exec_run *r, esbx_error_t *err)
{
  int in = r->in;

  if (in < 0)
    {
      /* Resolved in the session's root: its own /dev/null.  */
      in = TEMP_FAILURE_RETRY (open ("/dev/null", O_RDONLY | O_CLOEXEC));
      if (in < 0)
        return esbx_make_error (err, errno, "open /dev/null");
    }
  if (setsid () < 0)
    return esbx_make_error (err, errno, "setsid");
  if (r->opts->tty && ioctl (in, TIOCSCTTY, 0) < 0)
    return esbx_make_error (err, errno, "make the pty the controlling terminal");
  if (dup2 (in, 0) < 0 || dup2 (r->out, 1) < 0 || dup2 (r->err, 2) < 0)
    return esbx_make_error (err, errno, "dup2");
  return 0;
}

/* Returns in the grandchild, which becomes the command.  */
static void
detach (int report)
{
  esbx_error_t err = NULL;
  pid_t pid = fork ();

  if (pid < 0)
    {
      esbx_make_error (&err, errno, "fork");
      child_fail (report, &err);
    }
  if (pid == 0)
    return;
  esbx_sync_send (report, EXEC_DETACHED, (int)pid, NULL);
  _exit (0);
}

/* At the memory limit the cgroup's OOM killer picks the process of the
   session with the highest score, and the holder must not be that one:
   what a session keeps on its tmpfs is charged to no process, so a full
   tmpfs leaves every process small, the holder too.  It protects itself
   with -1000 where the host lets it (shim/holder/main.c); where it could
   not, the command raises its own score above it.  Best effort.  */
static void
shield_holder (pid_t holder)
{
  char path[64], buf[16] = "";
  _cleanup_close_ int in = -1, out = -1;
  ssize_t n;

  snprintf (path, sizeof path, "/proc/%d/oom_score_adj", (int)holder);
  in = TEMP_FAILURE_RETRY (open (path, O_RDONLY | O_CLOEXEC));
  if (in < 0 || (n = TEMP_FAILURE_RETRY (read (in, buf, sizeof buf - 1))) <= 0
      || strtol (buf, NULL, 10) <= -1000)
    return;
  out = TEMP_FAILURE_RETRY (open ("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC));
  if (out >= 0 && esbx_write_all (out, "500", 3) < 0)
    return;
}

/* The gVisor tier: the command runs in the sandbox's kernel through
   `runsc exec`, a host process of esbx's own, which gets none of the
   confinement above (gVisor is the boundary); it joins the session cgroup
   so that `esbx ps` and the limits count it.  */
static void __attribute__ ((noreturn)) exec_child_gvisor (const struct exec_run *r, int report)
{
  static char *const runsc_env[] = { (char *)"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL };
  esbx_error_t err = NULL;
  char **argv;

  if (esbx_cgroup_enter (r->info->cgroup, 0, &err) < 0)
    child_fail (report, &err);
  if (setup_stdio (r, &err) < 0)
    child_fail (report, &err);
  syscall (SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC);
  argv = esbx_gvisor_exec_argv (r->info, r->cwd, r->uid, r->gid, r->env, r->opts->argv);
  if (argv == NULL)
    {
      esbx_make_error (&err, errno, "write the process of `runsc exec`");
      child_fail (report, &err);
    }
  if (r->opts->detach)
    detach (report);
  execve (argv[0], argv, runsc_env);
  esbx_make_error_kind (&err, ESBX_ERR_EXEC_FAILED, errno, "exec `%s`", argv[0]);
  child_fail (report, &err);
}

void
exec_child (const struct exec_run *r, int report)
{
  esbx_error_t err = NULL;
  sigset_t none;

  prctl (PR_SET_DUMPABLE, 0, 0, 0, 0);
  sigemptyset (&none);
  sigprocmask (SIG_SETMASK, &none, NULL);
  signal (SIGPIPE, SIG_DFL);
  if (r->info->gvisor_id)
    exec_child_gvisor (r, report);
  /* The cgroup is written through the host's /sys: before the mount
     namespace changes.  */
  if (esbx_cgroup_enter (r->info->cgroup, 0, &err) < 0)
    child_fail (report, &err);
  shield_holder (r->info->pid);
  if (setns (r->holder_pidfd, CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWNET) < 0)
    {
      esbx_make_error (&err, errno, "join the namespaces of the holder");
      child_fail (report, &err);
    }
  /* Last, and alone: the namespaces above belong to the host's user
     namespace, which a process in the session's no longer may join.  */
  if (r->info->userns_uid && setns (r->holder_pidfd, CLONE_NEWUSER) < 0)
    {
      esbx_make_error (&err, errno, "join the user namespace of the holder");
      child_fail (report, &err);
    }
  if (chdir (r->cwd) < 0)
    {
      esbx_make_error (&err, errno, "--cwd `%s`", r->cwd);
      child_fail (report, &err);
    }
  if (setup_stdio (r, &err) < 0)
    child_fail (report, &err);
  /* Whatever the caller of esbx left open (bats keeps fd 3) must not leak
     into the session, nor keep that caller waiting on a detached command.  */
  syscall (SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC);
  /* In a user namespace host root has no id: always become one of it.  */
  if (esbx_confine_user (r->set_user || r->info->userns_uid, r->uid, r->gid, &err) < 0)
    child_fail (report, &err);
  environ = r->env;
  if (esbx_seccomp_load (&err) < 0)
    child_fail (report, &err);
  if (r->opts->detach)
    detach (report);
  execvp (r->opts->argv[0], r->opts->argv);
  {
    int saved = errno;
    esbx_make_error_kind (&err, saved == ENOENT ? ESBX_ERR_EXEC_NOT_FOUND : ESBX_ERR_EXEC_FAILED,
                          saved, "exec `%s`", r->opts->argv[0]);
    child_fail (report, &err);
  }
}
