/* Unit tests of layerstore/merge.c: which files a rebase may merge, the
   three-way line merge through diff3(1) (run for real), and the search for
   conflict markers beneath a session's upper directory.  */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs.h"
#include "internal.h"
#include "utils.h"

static char tmp[] = "/tmp/esbx-unit-merge-XXXXXX";

static int
setup (void **state)
{
  (void)state;
  return mkdtemp (tmp) ? 0 : -1;
}

static int
teardown (void **state)
{
  esbx_error_t err = NULL;

  (void)state;
  if (esbx_rm_rf_at (AT_FDCWD, tmp, &err) < 0)
    esbx_error_free (&err);
  return 0;
}

/* A file REL under tmp with CONTENT (LEN bytes), open for reading.  */
static int
file_with (const char *rel, const char *content, size_t len)
{
  _cleanup_free_ char *p = xasprintf ("%s/%s", tmp, rel);
  int fd = open (p, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

  assert_true (fd >= 0);
  assert_int_equal (esbx_write_all (fd, content, len), 0);
  assert_int_equal (lseek (fd, 0, SEEK_SET), 0);
  return fd;
}

static int
text_file (const char *rel, const char *content)
{
  return file_with (rel, content, strlen (content));
}

/* Everything FD holds, from its start.  */
static char *
contents (int fd)
{
  struct stat st;
  char *buf;

  assert_int_equal (fstat (fd, &st), 0);
  buf = xmalloc0 ((size_t)st.st_size + 1);
  assert_int_equal (pread (fd, buf, (size_t)st.st_size, 0), st.st_size);
  return buf;
}

static void
test_mergeable (void **state)
{
  _cleanup_close_ int text = text_file ("text", "one\ntwo\n");
  _cleanup_close_ int empty = text_file ("empty", "");
  _cleanup_close_ int binary = file_with ("binary", "a\0b\n", 4);
  _cleanup_close_ int late_nul = -1, big = -1, dir = -1;
  _cleanup_free_ char *dirpath = xasprintf ("%s/dir", tmp);
  char block[8192 + 16];

  (void)state;
  assert_true (esbx_mergeable_fd (text));
  assert_true (esbx_mergeable_fd (empty));
  assert_false (esbx_mergeable_fd (binary));

  /* Only the first 8 KiB are looked at, as git and diff do.  */
  memset (block, 'x', sizeof block);
  block[8192 + 4] = '\0';
  late_nul = file_with ("late-nul", block, sizeof block);
  assert_true (esbx_mergeable_fd (late_nul));

  /* At the limit and one byte over (sparse beyond its first 8 KiB of
     text, which are all that is read).  */
  memset (block, 'x', sizeof block);
  big = file_with ("big", block, sizeof block);
  assert_int_equal (ftruncate (big, ESBX_MERGE_MAX_BYTES), 0);
  assert_true (esbx_mergeable_fd (big));
  assert_int_equal (ftruncate (big, ESBX_MERGE_MAX_BYTES + 1), 0);
  assert_false (esbx_mergeable_fd (big));

  assert_int_equal (mkdir (dirpath, 0755), 0);
  dir = open (dirpath, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  assert_true (dir >= 0);
  assert_false (esbx_mergeable_fd (dir));
  assert_false (esbx_mergeable_fd (-1));
}

static const char *const labels[3] = { "session s1", "base", "head L2" };

static void
test_merge_clean (void **state)
{
  _cleanup_close_ int base = text_file ("c-base", "1\n2\n3\n4\n5\n6\n7\n8\n9\n");
  _cleanup_close_ int ours = text_file ("c-ours", "1 ours\n2\n3\n4\n5\n6\n7\n8\n9\n");
  _cleanup_close_ int theirs = text_file ("c-theirs", "1\n2\n3\n4\n5\n6\n7\n8\n9 theirs\n");
  _cleanup_close_ int out = text_file ("c-out", "");
  _cleanup_free_ char *merged = NULL;
  esbx_error_t err = NULL;
  bool markers = true;

  (void)state;
  assert_int_equal (esbx_merge_text (ours, base, theirs, out, labels, &markers, &err), 0);
  assert_false (markers);
  merged = contents (out);
  assert_string_equal (merged, "1 ours\n2\n3\n4\n5\n6\n7\n8\n9 theirs\n");
}

static void
test_merge_same_change_once (void **state)
{
  _cleanup_close_ int base = text_file ("s-base", "a\nb\nc\n");
  _cleanup_close_ int ours = text_file ("s-ours", "a\nB\nc\n");
  _cleanup_close_ int theirs = text_file ("s-theirs", "a\nB\nc\n");
  _cleanup_close_ int out = text_file ("s-out", "");
  _cleanup_free_ char *merged = NULL;
  esbx_error_t err = NULL;
  bool markers = true;

  (void)state;
  /* -E: a change both sides made alike is taken once, not bracketed.  */
  assert_int_equal (esbx_merge_text (ours, base, theirs, out, labels, &markers, &err), 0);
  assert_false (markers);
  merged = contents (out);
  assert_string_equal (merged, "a\nB\nc\n");
}

static void
test_merge_overlap (void **state)
{
  _cleanup_close_ int base = text_file ("o-base", "a\nb\nc\n");
  _cleanup_close_ int ours = text_file ("o-ours", "a\nours\nc\n");
  _cleanup_close_ int theirs = text_file ("o-theirs", "a\ntheirs\nc\n");
  _cleanup_close_ int out = text_file ("o-out", "");
  _cleanup_free_ char *merged = NULL;
  esbx_error_t err = NULL;
  bool markers = false;

  (void)state;
  assert_int_equal (esbx_merge_text (ours, base, theirs, out, labels, &markers, &err), 0);
  assert_true (markers);
  merged = contents (out);
  assert_string_equal (merged,
                       "a\n<<<<<<< session s1\nours\n=======\ntheirs\n>>>>>>> head L2\nc\n");
}

static void
test_merge_no_base (void **state)
{
  _cleanup_close_ int ours = text_file ("n-ours", "mine\n");
  _cleanup_close_ int theirs = text_file ("n-theirs", "mine\n");
  _cleanup_close_ int other = text_file ("n-other", "yours\n");
  _cleanup_close_ int out = text_file ("n-out", "");
  _cleanup_close_ int out2 = text_file ("n-out2", "");
  _cleanup_free_ char *merged = NULL;
  esbx_error_t err = NULL;
  bool markers = true;

  (void)state;
  /* Both sides added the file (BASE -1: /dev/null): the same content
     merges, another does not.  */
  assert_int_equal (esbx_merge_text (ours, -1, theirs, out, labels, &markers, &err), 0);
  assert_false (markers);
  merged = contents (out);
  assert_string_equal (merged, "mine\n");
  assert_int_equal (lseek (ours, 0, SEEK_SET), 0);
  assert_int_equal (esbx_merge_text (ours, -1, other, out2, labels, &markers, &err), 0);
  assert_true (markers);
}

static void
test_merge_fails (void **state)
{
  _cleanup_close_ int ours = text_file ("f-ours", "a\n");
  _cleanup_close_ int out = text_file ("f-out", "");
  esbx_error_t err = NULL;
  bool markers = false;
  int closed;

  (void)state;
  /* A descriptor diff3 cannot read: its status 2 is an error, not a merge.  */
  closed = text_file ("f-closed", "a\n");
  close (closed);
  assert_int_equal (esbx_merge_text (ours, closed, ours, out, labels, &markers, &err), -1);
  assert_non_null (err);
  assert_non_null (strstr (err->msg, "diff3(1) failed (status 2)"));
  esbx_error_free (&err);
}

static void
test_conflict_markers (void **state)
{
  _cleanup_free_ char *upper = xasprintf ("%s/upper", tmp);
  _cleanup_free_ char *p = NULL;
  _cleanup_close_ int ufd = -1;
  int fd;

  (void)state;
  assert_int_equal (mkdir (upper, 0755), 0);
  p = xasprintf ("%s/upper/sub", tmp);
  assert_int_equal (mkdir (p, 0755), 0);
  close (text_file ("upper/sub/marked", "x\n<<<<<<< session s1\nours\n=======\ntheirs\n"));
  close (text_file ("upper/closing", "x\n>>>>>>> head L2\n"));
  close (text_file ("upper/clean", "x\n<<<<<<<no space\n=======\n"));
  close (text_file ("upper/indented", "  <<<<<<< session s1\n"));
  free (p);
  p = xasprintf ("%s/upper/link", tmp);
  assert_int_equal (symlink ("sub/marked", p), 0);
  ufd = open (upper, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  assert_true (ufd >= 0);

  assert_int_equal (esbx_has_conflict_markers (ufd, "/sub/marked"), 1);
  assert_int_equal (esbx_has_conflict_markers (ufd, "/closing"), 1);
  assert_int_equal (esbx_has_conflict_markers (ufd, "/clean"), 0);
  assert_int_equal (esbx_has_conflict_markers (ufd, "/indented"), 0);
  assert_int_equal (esbx_has_conflict_markers (ufd, "/missing"), 0);
  /* Paths are resolved beneath the upper: a symlink is not followed, and
     nothing outside is read.  */
  assert_int_equal (esbx_has_conflict_markers (ufd, "/link"), 0);
  assert_int_equal (esbx_has_conflict_markers (ufd, "/../upper/sub/marked"), 0);
  fd = text_file ("outside", "<<<<<<< session s1\n");
  close (fd);
  assert_int_equal (esbx_has_conflict_markers (ufd, "/../outside"), 0);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_mergeable),
    cmocka_unit_test (test_merge_clean),
    cmocka_unit_test (test_merge_same_change_once),
    cmocka_unit_test (test_merge_overlap),
    cmocka_unit_test (test_merge_no_base),
    cmocka_unit_test (test_merge_fails),
    cmocka_unit_test (test_conflict_markers),
  };
  return cmocka_run_group_tests (tests, setup, teardown);
}
