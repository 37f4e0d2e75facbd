#include "nskeeper.h"
#include "fs.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

pid_t
esbx_nskeeper_start (int flags, esbx_error_t *err)
{
  pid_t parent = getpid (), child;
  char byte = 0;
  int p[2];

  if (pipe2 (p, O_CLOEXEC) < 0)
    return esbx_make_error (err, errno, "pipe");
  child = fork ();
  if (child < 0)
    {
      int saved = errno;
      close (p[0]);
      close (p[1]);
      return esbx_make_error (err, saved, "fork");
    }
  if (child == 0)
    {
      sigset_t none;

      sigemptyset (&none);
      sigprocmask (SIG_SETMASK, &none, NULL);
      if (prctl (PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid () != parent)
        _exit (1);
      esbx_close_fds_except (p[1], -1);
      byte = unshare (flags) == 0 ? 'k' : 'e';
      if (write (p[1], &byte, 1) != 1 || byte != 'k')
        _exit (1);
      close (p[1]);
      for (;;)
        pause ();
    }
  close (p[1]);
  if (TEMP_FAILURE_RETRY (read (p[0], &byte, 1)) != 1 || byte != 'k')
    {
      close (p[0]);
      esbx_nskeeper_stop (child);
      return esbx_make_error (err, EPERM, "unshare in a child");
    }
  close (p[0]);
  return child;
}

void
esbx_nskeeper_stop (pid_t pid)
{
  kill (pid, SIGKILL);
  TEMP_FAILURE_RETRY (waitpid (pid, NULL, 0));
}
