/* Unit tests of layerstore/lookup.c: what a path is in a stack of layer
   directories read the way overlayfs merges them (whiteouts, opaque
   directories, a non-directory above hiding what is below, symlinks never
   followed), whatever the order of the lookups on one open stack.  */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

#include "fs.h"
#include "internal.h"
#include "utils.h"

static char tmp[] = "/tmp/esbx-lookup-XXXXXX";

#define NLAYERS 3

static void
mk (const char *layer, const char *rel)
{
  _cleanup_free_ char *p = xasprintf ("%s/%s/%s", tmp, layer, rel);
  assert_int_equal (mkdir (p, 0755), 0);
}

static void
put (const char *layer, const char *rel)
{
  _cleanup_free_ char *p = xasprintf ("%s/%s/%s", tmp, layer, rel);
  int fd = open (p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);

  assert_true (fd >= 0);
  assert_int_equal (esbx_write_all (fd, layer, strlen (layer)), 0);
  close (fd);
}

static void
whiteout (const char *layer, const char *rel)
{
  _cleanup_free_ char *p = xasprintf ("%s/%s/%s", tmp, layer, rel);
  assert_int_equal (mknod (p, S_IFCHR | 0, makedev (0, 0)), 0);
}

static void
opaque (const char *layer, const char *rel)
{
  _cleanup_free_ char *p = xasprintf ("%s/%s/%s", tmp, layer, rel);
  assert_int_equal (setxattr (p, "trusted.overlay.opaque", "y", 1, 0), 0);
}

static void
link_to (const char *layer, const char *rel, const char *target)
{
  _cleanup_free_ char *p = xasprintf ("%s/%s/%s", tmp, layer, rel);
  assert_int_equal (symlink (target, p), 0);
}

/* L0 at the bottom, L2 on top.  */
static int
setup (void **state)
{
  if (mkdtemp (tmp) == NULL)
    return -1;
  mk ("", "L0");
  mk ("", "L1");
  mk ("", "L2");

  /* A whiteout above, a sibling below.  */
  mk ("L0", "a");
  mk ("L0", "a/b");
  put ("L0", "a/b/x");
  put ("L0", "a/b/y");
  put ("L0", "a/b/w");
  mk ("L0", "a/bc"); /* after a/b/w: not below a/b */
  put ("L0", "a/bc/x");
  mk ("L1", "a");
  mk ("L1", "a/b");
  whiteout ("L1", "a/b/x");
  put ("L1", "a/b/z");
  mk ("L2", "a");
  put ("L2", "a/top");

  /* An opaque directory: nothing of L0's o/ shows.  */
  mk ("L0", "o");
  put ("L0", "o/p");
  put ("L0", "o/q");
  mk ("L0", "o/sub");
  put ("L0", "o/sub/deep");
  mk ("L0", "o/gone");
  put ("L0", "o/gone/f");
  mk ("L1", "o");
  opaque ("L1", "o");
  put ("L1", "o/r");
  mk ("L1", "o/gonex"); /* after o/gone/f: not below the failed o/gone */
  put ("L1", "o/gonex/f");
  mk ("L1", "o/sub");

  /* A file below replaced by a directory above, and the reverse.  */
  put ("L0", "fd");
  mk ("L1", "fd");
  put ("L1", "fd/in");
  mk ("L0", "df");
  put ("L0", "df/in");
  put ("L2", "df");

  /* A whiteout of a directory, a symlink where a directory was.  */
  mk ("L0", "w");
  put ("L0", "w/x");
  whiteout ("L2", "w");
  mk ("L0", "s");
  put ("L0", "s/x");
  link_to ("L1", "s", "a");

  /* Deep in one layer, shallow in another.  */
  mk ("L0", "c");
  mk ("L0", "c/d");
  mk ("L0", "c/d/e");
  mk ("L0", "c/d/e/f");
  put ("L0", "c/d/e/f/g");
  put ("L0", "c/d/e/f/h");
  mk ("L2", "c");
  put ("L2", "c/top");
  return 0;
}

static int
teardown (void **state)
{
  esbx_error_t err = NULL;
  if (esbx_rm_rf_at (AT_FDCWD, tmp, &err) < 0)
    esbx_error_free (&err);
  return 0;
}

static void
open_stack (struct esbx_stack *st)
{
  esbx_error_t err = NULL;
  size_t i;

  memset (st, 0, sizeof *st);
  st->n = NLAYERS;
  st->fds = xmalloc (NLAYERS * sizeof (int));
  st->ids = xmalloc0 ((NLAYERS + 1) * sizeof (char *));
  st->records = xmalloc0 (NLAYERS * sizeof (struct esbx_layer *));
  st->record_failed = xmalloc0 (NLAYERS * sizeof (bool));
  for (i = 0; i < NLAYERS; i++)
    {
      _cleanup_free_ char *p = xasprintf ("%s/L%zu", tmp, i);
      st->ids[i] = xasprintf ("L%zu", i);
      st->fds[i] = esbx_open_dir_at (AT_FDCWD, p, &err);
      assert_true (st->fds[i] >= 0);
    }
}

struct want
{
  const char *rel;
  int layer; /* -1: not in the view */
  mode_t type;
};

/* Every path the setup makes or hides, with what the view has there.  */
static const struct want wants[] = {
  { "a", 2, S_IFDIR },
  { "a/top", 2, S_IFREG },
  { "a/b", 1, S_IFDIR },
  { "a/b/x", -1, 0 },
  { "a/b/y", 0, S_IFREG },
  { "a/b/z", 1, S_IFREG },
  { "a/b/w", 0, S_IFREG },
  { "a/bc/x", 0, S_IFREG },
  { "a/b/w", 0, S_IFREG },
  { "a/b/none", -1, 0 },
  { "a/none/x", -1, 0 },
  { "o", 1, S_IFDIR },
  { "o/p", -1, 0 },
  { "o/r", 1, S_IFREG },
  { "o/q", -1, 0 },
  { "o/sub", 1, S_IFDIR },
  { "o/sub/deep", -1, 0 },
  { "o/gone/f", -1, 0 },
  { "o/gone", -1, 0 },
  { "o/gone/f/x", -1, 0 },
  { "o/gonex/f", 1, S_IFREG },
  { "o/gone/f", -1, 0 },
  { "fd", 1, S_IFDIR },
  { "fd/in", 1, S_IFREG },
  { "fd/none", -1, 0 },
  { "df", 2, S_IFREG },
  { "df/in", -1, 0 },
  { "w", -1, 0 },
  { "w/x", -1, 0 },
  { "s", 1, S_IFLNK },
  { "s/x", -1, 0 },
  { "s/b", -1, 0 },
  { "s/b/y", -1, 0 },
  { "c/d/e/f/g", 0, S_IFREG },
  { "c/top", 2, S_IFREG },
  { "c/d/e/f/h", 0, S_IFREG },
  { "c/d", 0, S_IFDIR },
  { "c/d/e/f", 0, S_IFDIR },
  { "c/d/e/none/x", -1, 0 },
  { "c", 2, S_IFDIR },
  { "none", -1, 0 },
  { "none/x/y", -1, 0 },
};

static void
check (struct esbx_stack *st, const struct want *w)
{
  struct stat sb;
  size_t layer = 99;
  int r = esbx_stack_lookup (st, w->rel, &layer, &sb);

  if (w->layer < 0)
    {
      if (r != 0)
        fail_msg ("`%s`: found in L%zu, want absent", w->rel, layer);
      return;
    }
  if (r != 1)
    fail_msg ("`%s`: absent, want L%d", w->rel, w->layer);
  if (layer != (size_t)w->layer || (sb.st_mode & S_IFMT) != w->type)
    fail_msg ("`%s`: L%zu type %o, want L%d type %o", w->rel, layer, sb.st_mode & S_IFMT, w->layer,
              w->type);
}

static void
check_dir (struct esbx_stack *st, const char *rel, const char *want)
{
  esbx_error_t err = NULL;
  _cleanup_strv_ char **names = esbx_stack_readdir (st, rel, &err);
  _cleanup_free_ char *got = NULL;
  size_t i;

  assert_non_null (names);
  got = xstrdup ("");
  for (i = 0; names[i]; i++)
    {
      char *more = xasprintf ("%s%s%s", got, i ? " " : "", names[i]);
      free (got);
      got = more;
    }
  if (strcmp (got, want) != 0)
    fail_msg ("readdir `%s`: `%s`, want `%s`", rel, got, want);
}

static void
check_dirs (struct esbx_stack *st)
{
  check_dir (st, "", "a c df fd o s");
  check_dir (st, "a", "top b bc");
  check_dir (st, "a/b", "z w y");
  check_dir (st, "o", "gonex r sub");
  check_dir (st, "o/sub", "");
  check_dir (st, "o/gone", "");
  check_dir (st, "fd", "in");
  check_dir (st, "df", "");
  check_dir (st, "w", "");
  check_dir (st, "s", "");
  check_dir (st, "c/d/e/f", "g h");
  check_dir (st, "c", "top d");
  check_dir (st, "none/x", "");
}

static void
test_lookup_in_order (void **state)
{
  struct esbx_stack st;
  size_t i;

  open_stack (&st);
  for (i = 0; i < ARRAY_SIZE (wants); i++)
    check (&st, &wants[i]);
  check_dirs (&st);
  esbx_stack_close (&st);
}

/* Backwards, then every pair (each lookup after every other), then the
   directories listed between lookups: a lookup must not depend on the one
   before it.  */
static void
test_lookup_any_order (void **state)
{
  struct esbx_stack st;
  size_t i, j;

  open_stack (&st);
  for (i = ARRAY_SIZE (wants); i > 0; i--)
    check (&st, &wants[i - 1]);
  for (i = 0; i < ARRAY_SIZE (wants); i++)
    for (j = 0; j < ARRAY_SIZE (wants); j++)
      {
        check (&st, &wants[i]);
        check (&st, &wants[j]);
      }
  for (i = 0; i < ARRAY_SIZE (wants); i++)
    {
      check (&st, &wants[i]);
      check_dirs (&st);
      check (&st, &wants[ARRAY_SIZE (wants) - 1 - i]);
    }
  esbx_stack_close (&st);
}

/* Listing first, looking up after.  */
static void
test_readdir_then_lookup (void **state)
{
  struct esbx_stack st;
  size_t i;

  open_stack (&st);
  check_dirs (&st);
  for (i = 0; i < ARRAY_SIZE (wants); i++)
    check (&st, &wants[i]);
  esbx_stack_close (&st);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_lookup_in_order),
    cmocka_unit_test (test_lookup_any_order),
    cmocka_unit_test (test_readdir_then_lookup),
  };
  return cmocka_run_group_tests (tests, setup, teardown);
}
