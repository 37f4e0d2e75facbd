/* Unit tests of shim/lib/egress/egress_names.c: the names an egress session's
   resolver refused, read from a dnsmasq log (whole lines only, from where
   the last reading stopped; cut once read when large).  */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "egress.h"
#include "fs.h"
#include "utils.h"

#define LINE_PREFIX "Dec  1 22:49:50 dnsmasq[23770]: "

struct fixture
{
  char dir[64];
  int dfd;
};

static int
setup (void **state)
{
  struct fixture *f = xmalloc0 (sizeof *f);

  snprintf (f->dir, sizeof f->dir, "/tmp/esbx-egress-names.XXXXXX");
  assert_non_null (mkdtemp (f->dir));
  f->dfd = open (f->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  assert_true (f->dfd >= 0);
  *state = f;
  return 0;
}

static int
teardown (void **state)
{
  struct fixture *f = *state;
  esbx_error_t err = NULL;

  close (f->dfd);
  assert_int_equal (esbx_rm_rf_at (AT_FDCWD, f->dir, &err), 0);
  free (f);
  return 0;
}

static void
append_log (struct fixture *f, const char *text)
{
  int fd = openat (f->dfd, "7.log", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);

  assert_true (fd >= 0);
  assert_int_equal (esbx_write_all (fd, text, strlen (text)), 0);
  close (fd);
}

static int64_t
count_of (const json_t *names, const char *name)
{
  int64_t n = 0;

  json_get_int (names, name, &n);
  return n;
}

static void
test_refused_names (void **state)
{
  struct fixture *f = *state;
  int64_t offset = 0, other_queries;
  bool full;
  json_t *names;

  append_log (
      f, LINE_PREFIX
      "started, version 2.90 cachesize 150\n" LINE_PREFIX
      "query[A] b.test from 10.233.0.2\n" LINE_PREFIX "config b.test is NXDOMAIN\n" LINE_PREFIX
      "query[AAAA] b.test from 10.233.0.2\n" LINE_PREFIX "config b.test is NXDOMAIN\n" LINE_PREFIX
      "config Example.ORG is NXDOMAIN\n" LINE_PREFIX "config bad name is NXDOMAIN\n" LINE_PREFIX
      "forwarded a.test to 198.19.233.2\n" LINE_PREFIX "reply x.a.test is NXDOMAIN\n" LINE_PREFIX
      "config c.test is NX");
  names = esbx_egress_refused_names (f->dfd, 7, &offset, 16, &other_queries, &full);
  /* Lower-cased; no space in a name; only what the policy refused; the
     unfinished last line waits.  */
  assert_int_equal (json_len (names), 2);
  assert_int_equal (count_of (names, "b.test"), 2);
  assert_int_equal (count_of (names, "example.org"), 1);
  assert_int_equal (other_queries, 0);
  json_free (names);

  append_log (f, "DOMAIN\n");
  names = esbx_egress_refused_names (f->dfd, 7, &offset, 16, &other_queries, &full);
  assert_int_equal (json_len (names), 1);
  assert_int_equal (count_of (names, "c.test"), 1);
  json_free (names);

  /* Nothing new: nothing.  */
  names = esbx_egress_refused_names (f->dfd, 7, &offset, 16, &other_queries, &full);
  assert_int_equal (json_len (names), 0);
  json_free (names);
}

static void
test_refused_names_bounded_and_cut (void **state)
{
  struct fixture *f = *state;
  int64_t offset = 0, other_queries;
  struct stat st;
  json_t *names;
  bool full;
  int i;

  /* More than the cut size: read to its end, the log is emptied.  */
  for (i = 0; i < 20000; i++)
    {
      _cleanup_free_ char *line = xasprintf (LINE_PREFIX "config n%d.test is NXDOMAIN\n", i % 3);
      append_log (f, line);
    }
  names = esbx_egress_refused_names (f->dfd, 7, &offset, 2, &other_queries, &full);
  assert_int_equal (json_len (names), 2);
  assert_int_equal (count_of (names, "n0.test") + count_of (names, "n1.test"), 13334);
  assert_int_equal (other_queries, 6666);
  assert_false (full);
  json_free (names);
  assert_int_equal (offset, 0);
  assert_int_equal (fstatat (f->dfd, "7.log", &st, 0), 0);
  assert_int_equal (st.st_size, 0);

  /* dnsmasq appends: it goes on at the start.  */
  append_log (f, LINE_PREFIX "config d.test is NXDOMAIN\n");
  names = esbx_egress_refused_names (f->dfd, 7, &offset, 2, &other_queries, &full);
  assert_int_equal (count_of (names, "d.test"), 1);
  json_free (names);

  /* No log: no names.  */
  names = esbx_egress_refused_names (f->dfd, 8, &offset, 2, &other_queries, &full);
  assert_int_equal (json_len (names), 0);
  json_free (names);

  /* A log at its limit, its last line cut short, is said to be full, read
     and cut.  */
  offset = 0;
  while (fstatat (f->dfd, "7.log", &st, 0) == 0 && st.st_size < (off_t)ESBX_EGRESS_LOG_MAX)
    append_log (f, LINE_PREFIX "config full.test is NXDOMAIN\n");
  append_log (f, LINE_PREFIX "config cut");
  names = esbx_egress_refused_names (f->dfd, 7, &offset, 2, &other_queries, &full);
  assert_true (full);
  assert_true (count_of (names, "full.test") > 1000);
  json_free (names);
  assert_int_equal (fstatat (f->dfd, "7.log", &st, 0), 0);
  assert_int_equal (st.st_size, 0);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown (test_refused_names, setup, teardown),
    cmocka_unit_test_setup_teardown (test_refused_names_bounded_and_cut, setup, teardown),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
