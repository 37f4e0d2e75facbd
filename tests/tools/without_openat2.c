/* without-openat2 COMMAND [ARG...]: run COMMAND as on a kernel without
   openat2(2): a seccomp filter makes it fail with ENOSYS for COMMAND and
   everything it starts, so that the openat walk of common/path.c runs for
   real (hack/test runs the core suites this way once).  */
#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int
main (int argc, char **argv)
{
  scmp_filter_ctx ctx;
  int r;

  if (argc < 2)
    {
      fputs ("usage: without-openat2 COMMAND [ARG...]\n", stderr);
      return 2;
    }
  ctx = seccomp_init (SCMP_ACT_ALLOW);
  if (ctx == NULL)
    return 125;
  r = seccomp_rule_add (ctx, SCMP_ACT_ERRNO (ENOSYS), SCMP_SYS (openat2), 0);
  if (r == 0)
    r = seccomp_load (ctx);
  seccomp_release (ctx);
  if (r < 0)
    {
      fprintf (stderr, "without-openat2: seccomp: %s\n", strerror (-r));
      return 125;
    }
  execvp (argv[1], argv + 1);
  fprintf (stderr, "without-openat2: exec `%s`: %s\n", argv[1], strerror (errno));
  return 127;
}
