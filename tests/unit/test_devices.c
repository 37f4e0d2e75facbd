/* The device policy of a session cgroup (shim/lib/devices.c), applied for
   real: a child in a cgroup with the policy can open /dev/null but not
   /dev/kmsg, and can mknod a block device but not open it.  v2 runs where
   a cgroup2 hierarchy is mounted (also beside v1 controllers), v1 where
   the devices controller is.  Needs root; skipped otherwise.  */
#include "devices.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#define CGROUP2_MAGIC 0x63677270

static char *
cgroup2_root (void)
{
  static const char *const roots[] = { "/sys/fs/cgroup", "/sys/fs/cgroup/unified" };
  struct statfs sfs;
  size_t i;

  for (i = 0; i < ARRAY_SIZE (roots); i++)
    if (statfs (roots[i], &sfs) == 0 && sfs.f_type == CGROUP2_MAGIC)
      return xstrdup (roots[i]);
  return NULL;
}

static int
can_open (const char *path)
{
  int fd = open (path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);

  if (fd < 0)
    return -errno;
  close (fd);
  return 0;
}

/* In a child moved into DIR: 0 when /dev/null opens, /dev/kmsg does not,
   and a block node made in a tmp dir cannot be opened.  */
static int
check_in (const char *dir)
{
  _cleanup_free_ char *procs = xasprintf ("%s/cgroup.procs", dir);
  char tmpl[] = "/tmp/esbx-devtest.XXXXXX";
  int status;
  pid_t pid = fork ();

  if (pid == 0)
    {
      FILE *f = fopen (procs, "w");
      char *node;

      if (f == NULL || fprintf (f, "0\n") < 0 || fclose (f) != 0)
        _exit (10);
      if (can_open ("/dev/null") != 0)
        _exit (11);
      if (can_open ("/dev/kmsg") != -EPERM)
        _exit (12);
      if (mkdtemp (tmpl) == NULL)
        _exit (13);
      node = xasprintf ("%s/blk", tmpl);
      if (mknod (node, S_IFBLK | 0600, makedev (7, 0)) != 0)
        _exit (14);
      status = can_open (node);
      unlink (node);
      rmdir (tmpl);
      _exit (status == -EPERM ? 0 : 15);
    }
  if (waitpid (pid, &status, 0) != pid || !WIFEXITED (status))
    return -1;
  return WEXITSTATUS (status);
}

static void
test_v2 (void **state)
{
  _cleanup_free_ char *root = cgroup2_root (), *dir = NULL;
  esbx_error_t err = NULL;

  (void)state;
  if (root == NULL || geteuid () != 0)
    skip ();
  dir = xasprintf ("%s/esbx-devtest-%d", root, (int)getpid ());
  assert_int_equal (mkdir (dir, 0755), 0);
  assert_int_equal (esbx_devices_apply_v2 (dir, &err), 0);
  /* Idempotent: applied again, still one program.  */
  assert_int_equal (esbx_devices_apply_v2 (dir, &err), 0);
  assert_int_equal (check_in (dir), 0);
  assert_int_equal (rmdir (dir), 0);
}

static void
test_v1 (void **state)
{
  _cleanup_free_ char *dir = xasprintf ("/sys/fs/cgroup/devices/esbx-devtest-%d", (int)getpid ());
  esbx_error_t err = NULL;

  (void)state;
  if (access ("/sys/fs/cgroup/devices/devices.allow", F_OK) != 0 || geteuid () != 0)
    skip ();
  assert_int_equal (mkdir (dir, 0755), 0);
  assert_int_equal (esbx_devices_apply_v1 (dir, &err), 0);
  assert_int_equal (check_in (dir), 0);
  assert_int_equal (rmdir (dir), 0);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_v2),
    cmocka_unit_test (test_v1),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
