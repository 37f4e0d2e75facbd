/* The pty of `esbx exec --tty`: made in the session's own devpts instance,
 * so that the command's terminal is the session's and no host /dev/pts
 * entry ever appears inside it.  The master is opened through the holder's
 * root beneath which nothing may be a symlink; the slave comes from the
 * master (TIOCGPTPEER), never from a path the session could swap.  */
#include "exec_internal.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <termios.h>
#include <unistd.h>

#define PTMX_MAJOR 5
#define PTMX_MINOR 2

int
exec_pty_open (pid_t holder, int *master, int *slave, esbx_error_t *err)
{
  _cleanup_free_ char *rootpath = xasprintf ("/proc/%d/root", (int)holder);
  _cleanup_close_ int root = -1, m = -1;
  struct open_how how = {
    .flags = O_RDWR | O_NOCTTY | O_CLOEXEC,
    .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
  };
  struct stat st;
  int unlock = 0, s;

  root = TEMP_FAILURE_RETRY (open (rootpath, O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (root < 0)
    return esbx_make_error (err, errno, "open the session's root `%s`", rootpath);
  m = (int)TEMP_FAILURE_RETRY (syscall (SYS_openat2, root, "dev/pts/ptmx", &how, sizeof how));
  if (m < 0)
    return esbx_make_error (err, errno, "open the session's `/dev/pts/ptmx`");
  if (fstat (m, &st) < 0 || !S_ISCHR (st.st_mode) || major (st.st_rdev) != PTMX_MAJOR
      || minor (st.st_rdev) != PTMX_MINOR)
    return esbx_make_error (err, EINVAL, "the session's `/dev/pts/ptmx` is not a ptmx");
  if (ioctl (m, TIOCSPTLCK, &unlock) < 0)
    return esbx_make_error (err, errno, "unlock the pty");
  s = ioctl (m, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (s < 0)
    return esbx_make_error (err, errno, "open the pty's slave");
  *slave = s;
  *master = take_fd (&m);
  return 0;
}
