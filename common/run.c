/* esbx: running a helper program: see run.h.  */
#include "run.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* Runs in the child: only async-signal-safe calls.  */
static void __attribute__ ((noreturn)) child (const struct esbx_run *r, char *const *paths)
{
  sigset_t none;

  sigemptyset (&none);
  sigprocmask (SIG_SETMASK, &none, NULL);
  if (r->sigpipe)
    signal (SIGPIPE, SIG_DFL);
  if (r->fsize)
    {
      struct rlimit rl = { .rlim_cur = (rlim_t)r->fsize, .rlim_max = (rlim_t)r->fsize };
      if (signal (SIGXFSZ, SIG_IGN) == SIG_ERR || setrlimit (RLIMIT_FSIZE, &rl) < 0)
        _exit (126);
    }
  if (r->netns >= 0 && setns (r->netns, CLONE_NEWNET) < 0)
    _exit (126);
  if ((r->in >= 0 && dup2 (r->in, 0) < 0) || (r->out >= 0 && dup2 (r->out, 1) < 0)
      || (r->err >= 0 && dup2 (r->err, 2) < 0))
    _exit (126);
  /* Everything else goes, but what is passed on (opened O_CLOEXEC, as
     every descriptor of esbx's is): closed a range at a time between
     the ones kept, in order.  */
  {
    int next = 3;

    for (;;)
      {
        int low = -1;

        for (size_t i = 0; i < r->n_keep; i++)
          if (r->keep[i] >= next && (low < 0 || r->keep[i] < low))
            low = r->keep[i];
        if (low < 0)
          break;
        if (low > next)
          syscall (SYS_close_range, (unsigned)next, (unsigned)low - 1, 0);
        /* One that is not open is the program's to find out.  */
        fcntl (low, F_SETFD, 0);
        next = low + 1;
      }
    syscall (SYS_close_range, (unsigned)next, ~0U, 0);
  }
  if (paths == NULL)
    execvp (r->argv[0], r->argv);
  else
    for (size_t i = 0; paths[i]; i++)
      execv (paths[i], r->argv);
  _exit (127);
}

int
esbx_run (const struct esbx_run *r, int *status, esbx_error_t *err)
{
  struct strv paths = { 0 };
  pid_t pid;
  int ret = 0;

  /* Made before the fork: the child may not allocate.  */
  for (size_t i = 0; r->dirs && r->dirs[i]; i++)
    strv_push (&paths, xasprintf ("%s/%s", r->dirs[i], r->argv[0]));
  pid = fork ();
  if (pid < 0)
    ret = esbx_make_error (err, errno, "`%s`: fork", r->argv[0]);
  else if (pid == 0)
    child (r, r->dirs ? paths.v : NULL);
  else if (TEMP_FAILURE_RETRY (waitpid (pid, status, 0)) < 0)
    ret = esbx_make_error (err, errno, "`%s`: wait", r->argv[0]);
  strv_free (&paths);
  return ret;
}
