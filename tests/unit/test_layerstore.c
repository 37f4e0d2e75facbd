/* Unit tests of liblayerstore's rules: change sets of an upper directory
   against a base, the conflict rules, and the crash-safe head update.  */
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
#include "lookup_cache.h"
#include "utils.h"

static char tmp[] = "/tmp/esbx-unit-XXXXXX";

static int
setup (void **state)
{
  return mkdtemp (tmp) ? 0 : -1;
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
put (const char *dir, const char *rel, const char *content, mode_t mode)
{
  _cleanup_free_ char *p = xasprintf ("%s/%s/%s", tmp, dir, rel);
  int fd = open (p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);

  assert_true (fd >= 0);
  assert_int_equal (esbx_write_all (fd, content, strlen (content)), 0);
  fchmod (fd, mode);
  close (fd);
}

static void
mk (const char *dir, const char *rel)
{
  _cleanup_free_ char *p = xasprintf ("%s/%s/%s", tmp, dir, rel);
  assert_int_equal (mkdir (p, 0755), 0);
}

static const struct esbx_change *
find (const struct esbx_changeset *cs, const char *path)
{
  return esbx_changeset_find (cs, path);
}

static void
test_changeset (void **state)
{
  struct esbx_stack st = { 0 };
  struct esbx_changeset cs = { 0 }, same = { 0 };
  esbx_error_t err = NULL;
  _cleanup_free_ char *lower = xasprintf ("%s/lower", tmp);
  _cleanup_free_ char *p = NULL;
  _cleanup_close_ int ufd = -1;
  int lfd;
  const struct esbx_change *c;

  mk ("", "lower");
  mk ("", "upper");
  put ("lower", "same", "x\n", 0644);
  put ("lower", "edit", "old\n", 0644);
  put ("lower", "gone", "bye\n", 0644);
  mk ("lower", "dir");
  put ("lower", "dir/keep", "k\n", 0644);
  put ("lower", "dir/old", "o\n", 0644);
  mk ("lower", "opq");
  put ("lower", "opq/a", "a\n", 0644);
  p = xasprintf ("%s/lower/link", tmp);
  assert_int_equal (symlink ("same", p), 0);

  put ("upper", "same", "x\n", 0644);   /* copy-up, identical */
  put ("upper", "edit", "new\n", 0644); /* modified */
  put ("upper", "added", "n\n", 04755); /* added, setuid */
  free (p);
  p = xasprintf ("%s/upper/gone", tmp);
  assert_int_equal (mknod (p, S_IFCHR | 0, makedev (0, 0)), 0); /* deleted */
  mk ("upper", "dir");                                          /* only a parent */
  free (p);
  p = xasprintf ("%s/upper/dir/old", tmp);
  assert_int_equal (mknod (p, S_IFCHR | 0, makedev (0, 0)), 0);
  mk ("upper", "opq"); /* rm -rf + mkdir */
  free (p);
  p = xasprintf ("%s/upper/opq", tmp);
  assert_int_equal (setxattr (p, "trusted.overlay.opaque", "y", 1, 0), 0);
  put ("upper", "opq/b", "b\n", 0644);
  free (p);
  p = xasprintf ("%s/upper/link", tmp);
  assert_int_equal (symlink ("edit", p), 0); /* retargeted */

  lfd = esbx_open_dir_at (AT_FDCWD, lower, &err);
  assert_true (lfd >= 0);
  st.n = 1;
  st.fds = &lfd;
  st.ids = (char *[]){ (char *)"L0", NULL };
  st.records = (struct esbx_layer *[]){ NULL };
  st.record_failed = (bool[]){ false };
  free (p);
  p = xasprintf ("%s/upper", tmp);
  ufd = esbx_open_dir_at (AT_FDCWD, p, &err);
  assert_int_equal (esbx_scan_upper (&st, ufd, "unit", 0, &cs, &same, NULL, &err), 0);
  esbx_stack_cache_free (st.cache);
  close (lfd);

  assert_null (find (&cs, "/same"));
  assert_non_null (find (&same, "/same"));
  c = find (&cs, "/edit");
  assert_non_null (c);
  assert_int_equal (c->kind, ESBX_MODIFIED);
  assert_string_equal (c->sha256,
                       "7aa7a5359173d05b63cfd682e3c38487f3cb4f7f1d60659fe59fab1505977d4c");
  c = find (&cs, "/added");
  assert_int_equal (c->kind, ESBX_ADDED);
  assert_true (c->stripped);
  assert_int_equal (c->mode, 0755);
  c = find (&cs, "/gone");
  assert_int_equal (c->kind, ESBX_DELETED);
  assert_int_equal (c->type, ESBX_TYPE_FILE);
  assert_null (find (&cs, "/dir"));
  assert_int_equal (find (&cs, "/dir/old")->kind, ESBX_DELETED);
  assert_null (find (&cs, "/dir/keep"));
  assert_int_equal (find (&cs, "/opq/a")->kind, ESBX_DELETED);
  assert_int_equal (find (&cs, "/opq/b")->kind, ESBX_ADDED);
  c = find (&cs, "/link");
  assert_int_equal (c->type, ESBX_TYPE_SYMLINK);
  assert_string_equal (c->target, "edit");
  assert_int_equal (cs.n, 7);
  esbx_changeset_free (&cs);
  esbx_changeset_free (&same);
}

static struct esbx_layer *
layer (const char *id, int64_t index, const char *session)
{
  struct esbx_layer *l = xmalloc0 (sizeof *l);
  l->id = xstrdup (id);
  l->index = index;
  l->session = xstrdup (session);
  return l;
}

static void
change (struct esbx_changeset *cs, const char *path, enum esbx_change_kind kind,
        enum esbx_file_type type, const char *sha)
{
  struct esbx_change c = { .kind = kind, .type = type, .mode = 0644 };
  c.path = xstrdup (path);
  if (sha)
    snprintf (c.sha256, sizeof c.sha256, "%064d", atoi (sha));
  esbx_changeset_push (cs, &c);
  esbx_changeset_sort (cs);
}

static size_t
conflicts (struct esbx_upstream *u, struct esbx_changeset *ours, const char **first)
{
  struct esbx_publish_result r = { 0 };
  static char path[256];
  size_t n;

  esbx_conflicts_find (ours, u, &r);
  n = r.n_conflicts;
  if (n && first)
    {
      snprintf (path, sizeof path, "%s@%s", r.conflicts[0].path, r.conflicts[0].layer);
      *first = path;
    }
  esbx_publish_result_free (&r);
  return n;
}

static void
test_conflicts (void **state)
{
  struct esbx_upstream u = { 0 };
  struct esbx_changeset ours = { 0 };
  const char *first = NULL;

  u.layers = xmalloc0 (3 * sizeof *u.layers);
  u.layers[0] = layer ("L1", 1, "a");
  u.layers[1] = layer ("L2", 2, "b");
  u.n_layers = 2;
  change (&u.layers[0]->changes, "/f", ESBX_MODIFIED, ESBX_TYPE_FILE, "1");
  change (&u.layers[1]->changes, "/f", ESBX_MODIFIED, ESBX_TYPE_FILE, "2");
  change (&u.layers[0]->changes, "/gone", ESBX_DELETED, ESBX_TYPE_DIR, NULL);
  change (&u.layers[1]->changes, "/dir/nested/x", ESBX_ADDED, ESBX_TYPE_FILE, "3");
  change (&u.layers[1]->changes, "/same", ESBX_ADDED, ESBX_TYPE_FILE, "4");
  esbx_upstream_index (&u);

  /* Same final state as the newest upstream layer: no conflict.  */
  change (&ours, "/f", ESBX_MODIFIED, ESBX_TYPE_FILE, "2");
  change (&ours, "/same", ESBX_ADDED, ESBX_TYPE_FILE, "4");
  change (&ours, "/other", ESBX_ADDED, ESBX_TYPE_FILE, "5");
  assert_int_equal (conflicts (&u, &ours, NULL), 0);
  esbx_changeset_free (&ours);

  /* Same path, different state: reported with the newest layer.  */
  change (&ours, "/f", ESBX_MODIFIED, ESBX_TYPE_FILE, "1");
  assert_int_equal (conflicts (&u, &ours, &first), 1);
  assert_string_equal (first, "/f@L2");
  esbx_changeset_free (&ours);

  /* Upstream deleted a directory under which we changed something.  */
  change (&ours, "/gone/inner", ESBX_ADDED, ESBX_TYPE_FILE, "6");
  assert_int_equal (conflicts (&u, &ours, &first), 1);
  assert_string_equal (first, "/gone/inner@L1");
  esbx_changeset_free (&ours);

  /* We deleted (or replaced by a file) a directory upstream changed under.  */
  change (&ours, "/dir", ESBX_DELETED, ESBX_TYPE_DIR, NULL);
  assert_int_equal (conflicts (&u, &ours, &first), 1);
  assert_string_equal (first, "/dir@L2");
  esbx_changeset_free (&ours);
  change (&ours, "/dir", ESBX_MODIFIED, ESBX_TYPE_FILE, "7");
  assert_int_equal (conflicts (&u, &ours, NULL), 1);
  esbx_changeset_free (&ours);

  /* A sibling whose name shares the prefix is not beneath it.  */
  change (&ours, "/di", ESBX_DELETED, ESBX_TYPE_DIR, NULL);
  change (&ours, "/dir.bak", ESBX_DELETED, ESBX_TYPE_DIR, NULL);
  assert_int_equal (conflicts (&u, &ours, NULL), 0);
  esbx_changeset_free (&ours);

  /* Both deleted the same path: identical.  */
  change (&ours, "/gone", ESBX_DELETED, ESBX_TYPE_DIR, NULL);
  assert_int_equal (conflicts (&u, &ours, NULL), 0);
  esbx_changeset_free (&ours);

  esbx_upstream_free (&u);
}

static void
test_head_update (void **state)
{
  _cleanup_free_ char *root = xasprintf ("%s/store", tmp);
  esbx_store_t *store = NULL;
  esbx_error_t err = NULL;
  _cleanup_strv_ char **ids = NULL;
  _cleanup_strv_ char **names = NULL;
  char *next[] = { (char *)"aaaa", (char *)"bbbb", NULL };
  size_t n;

  assert_int_equal (esbx_store_open (root, &store, &err), 0);
  assert_int_equal (esbx_project_create (store, "p", NULL, &err), 0);
  assert_int_equal (esbx_project_stack (store, "p", &ids, &n, &err), 0);
  assert_int_equal (n, 1);
  assert_int_equal (esbx_project_write_stack (store, "p", next, 2, &err), 0);
  cleanup_strvp (&ids);
  assert_int_equal (esbx_project_stack (store, "p", &ids, &n, &err), 0);
  assert_int_equal (n, 2);
  assert_string_equal (ids[1], "bbbb");
  /* No temp file of the atomic replace is left behind.  */
  names = esbx_list_dir_at (store->rootfd, "projects/p", &err);
  for (size_t i = 0; names[i]; i++)
    assert_null (strstr (names[i], ".tmp-"));
  esbx_store_close (store);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_changeset),
    cmocka_unit_test (test_conflicts),
    cmocka_unit_test (test_head_update),
  };
  return cmocka_run_group_tests (tests, setup, teardown);
}
