/* Unit tests of common/copy.c: holes stay holes, the content and the hash
   of what is copied are the file's, with and without a sink, and a file
   that shrinks while it is copied keeps its first size.  */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "copy.h"
#include "hash.h"
#include "utils.h"

#define MIB (1024 * 1024)

static int
tmpfile_fd (void)
{
  char path[] = "/tmp/esbx-copy-XXXXXX";
  int fd = mkstemp (path);

  assert_true (fd >= 0);
  unlink (path);
  return fd;
}

/* 64 MiB with a few bytes at 0, 32 MiB and the end: holes between.  */
static int
sparse_file (void)
{
  int fd = tmpfile_fd ();

  assert_int_equal (pwrite (fd, "head", 4, 0), 4);
  assert_int_equal (pwrite (fd, "middle", 6, 32 * MIB), 6);
  assert_int_equal (ftruncate (fd, 64 * MIB - 4), 0);
  assert_int_equal (pwrite (fd, "tail", 4, 64 * MIB - 4), 4);
  return fd;
}

static long long
allocated (int fd)
{
  struct stat st;

  assert_int_equal (fstat (fd, &st), 0);
  return (long long)st.st_blocks * 512;
}

static void
same_content (int a, int b)
{
  char ha[ESBX_SHA256_HEX_LEN + 1], hb[ESBX_SHA256_HEX_LEN + 1];
  esbx_error_t err = NULL;
  off_t sa, sb;

  assert_int_equal (lseek (a, 0, SEEK_SET), 0);
  assert_int_equal (lseek (b, 0, SEEK_SET), 0);
  assert_int_equal (esbx_sha256_fd (a, ha, &sa, &err), 0);
  assert_int_equal (esbx_sha256_fd (b, hb, &sb, &err), 0);
  assert_int_equal (sa, sb);
  assert_string_equal (ha, hb);
}

static void
test_sparse_copy (void **state)
{
  _cleanup_close_ int in = sparse_file (), out = tmpfile_fd ();
  esbx_error_t err = NULL;
  off_t size = 0;

  (void)state;
  assert_int_equal (esbx_copy_file_data (in, out, NULL, NULL, &size, &err), 0);
  assert_int_equal (size, 64 * MIB);
  same_content (in, out);
  assert_true (allocated (out) < MIB);
}

static void
test_hash_while_copying (void **state)
{
  _cleanup_close_ int in = sparse_file (), out = tmpfile_fd ();
  char h1[ESBX_SHA256_HEX_LEN + 1], h2[ESBX_SHA256_HEX_LEN + 1];
  esbx_error_t err = NULL;
  off_t size = 0;

  (void)state;
  assert_int_equal (esbx_copy_hash_fd (in, out, h1, &size, &err), 0);
  assert_int_equal (size, 64 * MIB);
  assert_int_equal (lseek (in, 0, SEEK_SET), 0);
  assert_int_equal (esbx_sha256_fd (in, h2, NULL, &err), 0);
  assert_string_equal (h1, h2);
  same_content (in, out);
  assert_true (allocated (out) < MIB);
}

static void
test_dense_and_empty (void **state)
{
  _cleanup_close_ int in = tmpfile_fd (), out = tmpfile_fd (), e1 = tmpfile_fd (),
                      e2 = tmpfile_fd ();
  _cleanup_free_ char *buf = xmalloc (300000);
  char hex[ESBX_SHA256_HEX_LEN + 1];
  esbx_error_t err = NULL;
  off_t size = 1;
  size_t i;

  (void)state;
  for (i = 0; i < 300000; i++)
    buf[i] = (char)(i * 7);
  assert_int_equal (write (in, buf, 300000), 300000);
  assert_int_equal (esbx_copy_hash_fd (in, out, hex, &size, &err), 0);
  assert_int_equal (size, 300000);
  same_content (in, out);
  assert_int_equal (esbx_copy_file_data (e1, e2, NULL, NULL, &size, &err), 0);
  assert_int_equal (size, 0);
}

/* The sink sees the content in order; the first call shrinks the file:
   the copy keeps the first size, the rest zeros, and the hash agrees.  */
struct shrink
{
  int fd;
  off_t seen;
  bool zeros_after;
};

static int
shrink_sink (void *ctx, const void *data, size_t len)
{
  struct shrink *s = ctx;
  const unsigned char *p = data;
  size_t i;

  if (s->seen == 0)
    assert_int_equal (ftruncate (s->fd, 16), 0);
  for (i = 0; s->seen + (off_t)i >= 32 * MIB && i < len; i++)
    if (p[i] != 0)
      s->zeros_after = false;
  s->seen += (off_t)len;
  return 0;
}

static void
test_shrinking_source (void **state)
{
  _cleanup_close_ int in = sparse_file (), out = tmpfile_fd ();
  struct shrink s = { .fd = in, .zeros_after = true };
  esbx_error_t err = NULL;
  struct stat st;
  off_t size = 0;

  (void)state;
  assert_int_equal (esbx_copy_file_data (in, out, shrink_sink, &s, &size, &err), 0);
  assert_int_equal (size, 64 * MIB);
  assert_int_equal (s.seen, 64 * MIB);
  assert_true (s.zeros_after);
  assert_int_equal (fstat (out, &st), 0);
  assert_int_equal (st.st_size, 64 * MIB);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_sparse_copy),
    cmocka_unit_test (test_hash_while_copying),
    cmocka_unit_test (test_dense_and_empty),
    cmocka_unit_test (test_shrinking_source),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
