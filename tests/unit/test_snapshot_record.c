/* Unit tests of layerstore/snapshot_record.c: where a snapshot's record
   is, which project holds it, its base, and the chain of diffs a session
   made from a snapshot of a fork mounts.  Snapshots are taken of real
   sessions; the hostile records (no base, a chain too deep, a loop) are
   written by hand, as a damaged store would have them.  */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs.h"
#include "internal.h"
#include "store_fixture.h"
#include "text.h"
#include "utils.h"

/* Session NAME of PROJECT (from SNAPSHOT when not NULL) with FILE
   written in it.  */
static void
session_with (const char *project, const char *name, const char *snapshot, const char *file)
{
  struct esbx_session_opts o = { .name = name, .snapshot = snapshot };
  _cleanup_free_ char *made = NULL, *p = NULL;
  esbx_error_t err = NULL;
  FILE *f;

  fixture_ok (esbx_session_create (store, project, &o, &made, &err), &err);
  p = xasprintf ("%s/sessions/%s/merged/%s", store->root, name, file);
  f = fopen (p, "we");
  assert_non_null (f);
  fprintf (f, "%s\n", name);
  fclose (f);
}

static void
snapshot (const char *session, const char *name)
{
  _cleanup_free_ char *out = NULL;
  esbx_error_t err = NULL;

  bool moved = false;

  fixture_ok (esbx_snapshot_create (store, session, name, 0, &out, &moved, &err), &err);
  /* No holder, nothing in its view: the upper is moved, not copied.  */
  assert_true (moved);
  assert_string_equal (out, name);
}

static char *
head (const char *project)
{
  _cleanup_strv_ char **ids = NULL;
  esbx_error_t err = NULL;
  size_t n;

  fixture_ok (esbx_project_stack (store, project, &ids, &n, &err), &err);
  return xstrdup (ids[n - 1]);
}

/* A record written by hand: snapshots/NAME/record.json of PROJECT.  */
static void
record (const char *project, const char *name, const char *json)
{
  _cleanup_free_ char *dir = xasprintf ("%s/projects/%s/snapshots/%s", store->root, project, name);
  _cleanup_free_ char *p = xasprintf ("%s/record.json", dir);
  _cleanup_free_ char *parent = xasprintf ("%s/projects/%s/snapshots", store->root, project);
  FILE *f;

  assert_true (mkdir (parent, 0755) == 0 || errno == EEXIST);
  assert_int_equal (mkdir (dir, 0755), 0);
  f = fopen (p, "we");
  assert_non_null (f);
  fputs (json, f);
  fclose (f);
}

static void
test_rel (void **state)
{
  _cleanup_free_ char *rel = esbx_snapshot_rel ("web", "s1-snap");

  (void)state;
  assert_string_equal (rel, "projects/web/snapshots/s1-snap");
}

static void
test_find_and_resolve (void **state)
{
  _cleanup_free_ char *project = NULL, *base = NULL, *top = NULL;
  _cleanup_json_ json_t *rec = NULL;
  esbx_error_t err = NULL;

  (void)state;
  fixture_ok (esbx_project_create (store, "p", NULL, &err), &err);
  fixture_ok (esbx_project_create (store, "q", NULL, &err), &err);
  session_with ("q", "q1", NULL, "a.txt");
  snapshot ("q1", "qsnap");
  top = head ("q");

  fixture_ok (esbx_snapshot_find_project (store, "qsnap", &project, &err), &err);
  assert_string_equal (project, "q");
  fixture_ok (esbx_snapshot_resolve (store, "q", "qsnap", &base, &err), &err);
  assert_string_equal (base, top);
  rec = esbx_snapshot_load_record (store, "q", "qsnap", &err);
  assert_non_null (rec);
  assert_string_equal (json_get_string (rec, "base"), top);

  /* Not there, in another project, or not a name.  */
  assert_int_equal (esbx_snapshot_find_project (store, "nosuch", &project, &err), -1);
  assert_int_equal (err->kind, ESBX_ERR_NOT_FOUND);
  assert_string_equal (err->msg, "snapshot `nosuch` does not exist");
  esbx_error_free (&err);
  assert_null (esbx_snapshot_load_record (store, "p", "qsnap", &err));
  assert_int_equal (err->kind, ESBX_ERR_NOT_FOUND);
  assert_string_equal (err->msg, "snapshot `qsnap` of project `p` does not exist");
  esbx_error_free (&err);
  assert_int_equal (esbx_snapshot_resolve (store, "q", "../q1", &base, &err), -1);
  assert_non_null (strstr (err->msg, "../q1"));
  esbx_error_free (&err);
  assert_int_equal (esbx_snapshot_find_project (store, "a/b", &project, &err), -1);
  esbx_error_free (&err);
}

static void
test_record_without_base (void **state)
{
  _cleanup_free_ char *base = NULL;
  esbx_error_t err = NULL;

  (void)state;
  record ("p", "nobase", "{\"parent\": null}\n");
  assert_int_equal (esbx_snapshot_resolve (store, "p", "nobase", &base, &err), -1);
  assert_string_equal (err->msg, "snapshot `nobase`: record without base");
  esbx_error_free (&err);
  record ("p", "broken", "{\"base\": \n");
  assert_null (esbx_snapshot_load_record (store, "p", "broken", &err));
  assert_non_null (strstr (err->msg, "snapshot `broken`"));
  esbx_error_free (&err);
}

static void
test_lowers_of_a_fork (void **state)
{
  struct strv v = { 0 }, top = { 0 };
  esbx_error_t err = NULL;

  (void)state;
  /* qsnap of session q1; fork q2 made from it; q2's own snapshot.  */
  session_with ("q", "q2", "qsnap", "b.txt");
  snapshot ("q2", "q2snap");
  fixture_ok (esbx_snapshot_lowers (store, "q", "qsnap", &top, &err), &err);
  assert_int_equal (top.n, 1);
  assert_non_null (strstr (top.v[0], "/projects/q/frozen/"));
  fixture_ok (esbx_snapshot_lowers (store, "q", "q2snap", &v, &err), &err);
  /* Bottom to top: the layer of qsnap below q2's own, shared.  */
  assert_int_equal (v.n, 2);
  assert_string_equal (v.v[0], top.v[0]);
  assert_non_null (strstr (v.v[1], "/projects/q/frozen/"));
  assert_string_not_equal (v.v[1], v.v[0]);
  strv_free (&v);
  strv_free (&top);
}

static void
test_lowers_refused (void **state)
{
  struct strv v = { 0 };
  esbx_error_t err = NULL;
  char name[32], parent[64];
  int i;

  (void)state;
  /* A parent that is gone.  */
  record ("p", "orphan", "{\"base\": \"b\", \"parent\": \"gone\"}\n");
  assert_int_equal (esbx_snapshot_lowers (store, "p", "orphan", &v, &err), -1);
  assert_int_equal (err->kind, ESBX_ERR_NOT_FOUND);
  assert_string_equal (err->msg, "snapshot `gone` of project `p` does not exist");
  assert_int_equal (v.n, 0);
  esbx_error_free (&err);

  /* A loop never ends the walk by itself.  */
  record ("p", "loop-a", "{\"base\": \"b\", \"parent\": \"loop-b\"}\n");
  record ("p", "loop-b", "{\"base\": \"b\", \"parent\": \"loop-a\"}\n");
  assert_int_equal (esbx_snapshot_lowers (store, "p", "loop-a", &v, &err), -1);
  assert_string_equal (err->msg, "snapshot `loop-a`: chain of parents deeper than 64");
  assert_int_equal (v.n, 0);
  esbx_error_free (&err);

  /* 64 snapshots deep is the most; one more is refused.  */
  for (i = 0; i < 65; i++)
    {
      _cleanup_free_ char *json = NULL;

      snprintf (name, sizeof name, "deep%d", i);
      snprintf (parent, sizeof parent, "\"deep%d\"", i - 1);
      json = xasprintf ("{\"base\": \"b\", \"parent\": %s}\n", i == 0 ? "null" : parent);
      record ("p", name, json);
    }
  fixture_ok (esbx_snapshot_lowers (store, "p", "deep63", &v, &err), &err);
  assert_int_equal (v.n, 64);
  assert_non_null (strstr (v.v[0], "/snapshots/deep0/diff"));
  assert_non_null (strstr (v.v[63], "/snapshots/deep63/diff"));
  strv_free (&v);
  assert_int_equal (esbx_snapshot_lowers (store, "p", "deep64", &v, &err), -1);
  assert_string_equal (err->msg, "snapshot `deep64`: chain of parents deeper than 64");
  esbx_error_free (&err);
}

/* The sessions go before the store, pass or fail: they are mounts.  */
static int
teardown (void **state)
{
  static const char *const sessions[] = { "q2", "q1" };
  size_t i;

  for (i = 0; i < ARRAY_SIZE (sessions); i++)
    {
      esbx_error_t err = NULL;

      if (esbx_session_exists (store, sessions[i])
          && esbx_session_discard (store, sessions[i], ESBX_DISCARD_FORCE, &err) < 0)
        esbx_error_free (&err);
    }
  return fixture_teardown (state);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_rel),
    cmocka_unit_test (test_find_and_resolve),
    cmocka_unit_test (test_record_without_base),
    cmocka_unit_test (test_lowers_of_a_fork),
    cmocka_unit_test (test_lowers_refused),
  };
  return cmocka_run_group_tests (tests, fixture_setup, teardown);
}
