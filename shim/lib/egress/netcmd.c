/* Running the network programs of egress sessions (common/run.h): setns
   into the session's net namespace when asked, execv by absolute path (the
   caller's PATH may lack the sbin directories).  Output goes to memfds,
   read after the child exits, so no pipe can fill up.  */
#include "netcmd.h"
#include "egress.h"
#include "fs.h"
#include "run.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define OUTPUT_MAX (4u << 20)

static const char *const search_dirs[] = { "/usr/sbin", "/sbin", "/usr/bin", "/bin", NULL };

static char *
read_memfd (int fd)
{
  struct stat st;
  size_t n;
  char *buf;
  ssize_t r;

  if (fstat (fd, &st) < 0 || lseek (fd, 0, SEEK_SET) < 0)
    return xstrdup ("");
  n = (size_t)st.st_size < OUTPUT_MAX ? (size_t)st.st_size : OUTPUT_MAX;
  buf = xmalloc0 (n + 1);
  r = pread (fd, buf, n, 0);
  buf[r > 0 ? r : 0] = '\0';
  return buf;
}

static int
new_memfd (const char *name, const char *data, esbx_error_t *err)
{
  int fd = memfd_create (name, MFD_CLOEXEC);

  if (fd < 0)
    return esbx_make_error (err, errno, "memfd_create");
  if (data && esbx_write_all (fd, data, strlen (data)) < 0)
    {
      close (fd);
      return esbx_make_error (err, errno, "write to a memfd");
    }
  lseek (fd, 0, SEEK_SET);
  return fd;
}

int
esbx_netcmd (char *const *argv, int netns_fd, const char *input, char **out, esbx_error_t *err)
{
  return esbx_netcmd_limited (argv, netns_fd, input, out, 0, err);
}

/* One nft at a time on the host, among esbx's: each reads the whole
   ruleset before it acts, and a change by another in the meantime makes
   it read again, so that with a thousand tables a few at once could go on
   reading for minutes.  */
static int
nft_lock (char *const *argv)
{
  esbx_error_t e = NULL;
  int fd;

  if (strcmp (argv[0], "nft") != 0 || esbx_mkdir_p (ESBX_EGRESS_RUN, 0700, &e) < 0)
    {
      esbx_error_free (&e);
      return -1;
    }
  fd = esbx_lock_at (AT_FDCWD, ESBX_EGRESS_RUN "/.nft.lock", true, true, &e);
  esbx_error_free (&e);
  return fd;
}

int
esbx_netcmd_limited (char *const *argv, int netns_fd, const char *input, char **out,
                     unsigned long long fsize, esbx_error_t *err)
{
  _cleanup_close_ int lock = -1, in = -1, outfd = -1, errfd = -1;
  _cleanup_free_ char *stderr_text = NULL;
  struct esbx_run r = { .argv = argv, .dirs = search_dirs, .netns = netns_fd, .fsize = fsize };
  int status;
  char *nl;
  int ret = 0;

  lock = nft_lock (argv);
  if ((in = new_memfd ("stdin", input, err)) < 0 || (outfd = new_memfd ("stdout", NULL, err)) < 0
      || (errfd = new_memfd ("stderr", NULL, err)) < 0)
    return -1;
  r.in = in;
  r.out = outfd;
  r.err = errfd;
  if (esbx_run (&r, &status, err) < 0)
    return -1;
  if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
    {
      stderr_text = read_memfd (errfd);
      if ((nl = strchr (stderr_text, '\n')) != NULL)
        *nl = '\0';
      if (WIFEXITED (status) && WEXITSTATUS (status) == 127)
        ret = esbx_make_error (err, ENOENT, "`%s` is not installed", argv[0]);
      else
        ret = esbx_make_error (err, 0, "`%s %s` failed: %s", argv[0], argv[1] ? argv[1] : "",
                               *stderr_text ? stderr_text : "no message");
      goto out;
    }
  if (out)
    *out = read_memfd (outfd);
out:
  return ret;
}
