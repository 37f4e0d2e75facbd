/* Unit tests of safe path resolution, with openat2 and with the openat
   walk fallback: nothing resolves out of the root or through a symlink.  */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "error.h"
#include "fs.h"
#include "path.h"
#include "utils.h"

static char root[] = "/tmp/esbx-path-XXXXXX";
static int rootfd = -1;

static int
setup (void **state)
{
  char buf[512];

  if (mkdtemp (root) == NULL)
    return -1;
  snprintf (buf, sizeof buf, "%s/dir", root);
  mkdir (buf, 0755);
  snprintf (buf, sizeof buf, "%s/dir/file", root);
  close (open (buf, O_CREAT | O_WRONLY, 0644));
  snprintf (buf, sizeof buf, "%s/escape", root);
  symlink ("/etc", buf);
  snprintf (buf, sizeof buf, "%s/inner", root);
  symlink ("dir", buf);
  snprintf (buf, sizeof buf, "%s/abs", root);
  symlink ("/etc/passwd", buf);
  rootfd = open (root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  return rootfd < 0 ? -1 : 0;
}

static int
teardown (void **state)
{
  esbx_error_t err = NULL;

  close (rootfd);
  if (esbx_rm_rf_at (AT_FDCWD, root, &err) < 0)
    esbx_error_free (&err);
  return 0;
}

static void
check_all (bool fallback)
{
  static const char *const refused[] = { "escape/passwd",        "abs",
                                         "inner/file",           "../etc/passwd",
                                         "dir/../../etc/passwd", "/escape" };
  esbx_error_t err = NULL;
  size_t i;
  int fd;

  esbx_path_force_fallback (fallback);
  fd = esbx_open_beneath (rootfd, "dir/file", O_RDONLY, 0, &err);
  assert_true (fd >= 0);
  close (fd);
  fd = esbx_open_beneath (rootfd, "/dir//file", O_RDONLY, 0, &err);
  assert_true (fd >= 0);
  close (fd);
  for (i = 0; i < ARRAY_SIZE (refused); i++)
    {
      fd = esbx_open_beneath (rootfd, refused[i], O_RDONLY, 0, &err);
      assert_int_equal (fd, -1);
      assert_non_null (err);
      esbx_error_free (&err);
    }
  esbx_path_force_fallback (false);
}

static void
test_openat2 (void **state)
{
  check_all (false);
}

static void
test_fallback (void **state)
{
  check_all (true);
}

static void
test_parent (void **state)
{
  esbx_error_t err = NULL;
  _cleanup_free_ char *base = NULL;
  int fd;

  fd = esbx_open_parent_beneath (rootfd, "dir/file", &base, &err);
  assert_true (fd >= 0);
  assert_string_equal (base, "file");
  close (fd);
  free (base);
  base = NULL;
  /* The last component may be a symlink: it is not followed.  */
  fd = esbx_open_parent_beneath (rootfd, "escape", &base, &err);
  assert_true (fd >= 0);
  close (fd);
  free (base);
  base = NULL;
  fd = esbx_open_parent_beneath (rootfd, "escape/passwd", &base, &err);
  assert_int_equal (fd, -1);
  esbx_error_free (&err);
  fd = esbx_open_parent_beneath (rootfd, "/", &base, &err);
  assert_int_equal (fd, -1);
  esbx_error_free (&err);
}

/* Only regular files open for reading: a FIFO, a device, a directory or a
   symlink fails at once (never blocks), with /proc and without.  */
static void
check_regular (bool no_proc, bool fallback)
{
  static const char *const refused[]
      = { "dir/fifo", "dir/null", "dir", "inner", "escape", "inner/file" };
  esbx_error_t err = NULL;
  char buf[8];
  size_t i;
  int fd, dfd;

  esbx_fs_force_no_proc (no_proc);
  esbx_path_force_fallback (fallback);
  fd = esbx_open_regular_beneath (rootfd, "dir/file", &err);
  assert_true (fd >= 0);
  assert_int_equal (fcntl (fd, F_GETFL) & (O_NONBLOCK | O_ACCMODE), O_RDONLY);
  assert_int_equal (read (fd, buf, sizeof buf), 0);
  close (fd);
  for (i = 0; i < ARRAY_SIZE (refused); i++)
    {
      fd = esbx_open_regular_beneath (rootfd, refused[i], &err);
      assert_int_equal (fd, -1);
      assert_non_null (err);
      esbx_error_free (&err);
    }
  fd = esbx_open_regular_beneath (rootfd, "dir/fifo", &err);
  assert_int_equal (fd, -1);
  assert_non_null (strstr (err->msg, "is a fifo, not a regular file"));
  esbx_error_free (&err);

  dfd = open (root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  fd = esbx_open_regular_at (dfd, "dir/file", &err);
  assert_true (fd >= 0);
  close (fd);
  /* The _at variant resolves like openat: only the last component is
     never followed.  */
  for (i = 0; i < ARRAY_SIZE (refused) - 1; i++)
    {
      fd = esbx_open_regular_at (dfd, refused[i], &err);
      assert_int_equal (fd, -1);
      esbx_error_free (&err);
    }
  close (dfd);
  esbx_path_force_fallback (false);
  esbx_fs_force_no_proc (false);
}

static void
test_regular (void **state)
{
  char buf[512];

  snprintf (buf, sizeof buf, "%s/dir/fifo", root);
  assert_int_equal (mkfifo (buf, 0600), 0);
  snprintf (buf, sizeof buf, "%s/dir/null", root);
  assert_int_equal (mknod (buf, S_IFCHR | 0600, makedev (1, 3)), 0);
  check_regular (false, false);
  check_regular (true, false);
  check_regular (false, true);
  check_regular (true, true);
}

static void
test_clean (void **state)
{
  esbx_error_t err = NULL;
  _cleanup_free_ char *out = NULL;

  assert_int_equal (esbx_clean_relpath ("//a/./b///c/", false, &out, &err), 0);
  assert_string_equal (out, "a/b/c");
  assert_int_equal (esbx_clean_relpath ("a/../b", false, &out, &err), -1);
  esbx_error_free (&err);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_openat2), cmocka_unit_test (test_fallback),
    cmocka_unit_test (test_parent),  cmocka_unit_test (test_clean),
    cmocka_unit_test (test_regular),
  };
  return cmocka_run_group_tests (tests, setup, teardown);
}
