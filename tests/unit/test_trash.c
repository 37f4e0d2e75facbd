/* Unit tests of layerstore/trash.c: the keeping time and how it is
   written, a discarded session's unpublished work kept as an entry, listed,
   restored (under its name or another), purged and expired, and the
   refusals that change nothing.  Sessions are real (mounted) ones.  */
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

#include "fs.h"
#include "internal.h"
#include "store_fixture.h"
#include "text.h"
#include "utils.h"

static void
new_session (const char *name, const char *file)
{
  struct esbx_session_opts o = { .name = name };
  _cleanup_free_ char *made = NULL, *p = NULL;
  esbx_error_t err = NULL;
  FILE *f;

  if (!esbx_project_exists (store, "p"))
    fixture_ok (esbx_project_create (store, "p", NULL, &err), &err);
  fixture_ok (esbx_session_create (store, "p", &o, &made, &err), &err);
  if (file == NULL)
    return;
  p = xasprintf ("%s/sessions/%s/merged/%s", store->root, name, file);
  f = fopen (p, "we");
  assert_non_null (f);
  fprintf (f, "work of %s\n", name);
  fclose (f);
}

static char *
read_merged (const char *session, const char *file)
{
  _cleanup_free_ char *p = xasprintf ("%s/sessions/%s/merged/%s", store->root, session, file);
  char buf[256] = "";
  FILE *f = fopen (p, "re");

  if (f == NULL)
    return NULL;
  if (fgets (buf, sizeof buf, f) == NULL)
    buf[0] = '\0';
  fclose (f);
  return xstrdup (buf);
}

/* The trash's entries now, as esbx_trash_list gives them.  */
static json_t *
list (void)
{
  esbx_error_t err = NULL;
  json_t *arr = esbx_trash_list (store, &err);

  if (arr == NULL)
    fail_msg ("%s", err->msg);
  return arr;
}

static char *
only_entry (void)
{
  _cleanup_json_ json_t *arr = list ();

  assert_int_equal (json_len (arr), 1);
  return xstrdup (json_get_string (json_at (arr, 0), "entry"));
}

static void
test_ttl_string (void **state)
{
  static const struct
  {
    int64_t s;
    const char *want;
  } cases[] = {
    { 86400, "1d" }, { 7 * 86400, "7d" }, { 7200, "2h" }, { 90 * 60, "90m" },
    { 45, "45s" },   { 3601, "3601s" },   { 0, "0s" },
  };
  size_t i;

  (void)state;
  for (i = 0; i < ARRAY_SIZE (cases); i++)
    {
      _cleanup_free_ char *s = esbx_trash_ttl_string (cases[i].s);
      assert_string_equal (s, cases[i].want);
    }
}

static void
test_ttl (void **state)
{
  _cleanup_free_ char *text = NULL, *p = NULL;
  esbx_error_t err = NULL;
  int64_t s = -1;
  FILE *f;

  (void)state;
  unsetenv ("ESBX_TRASH_TTL");
  fixture_ok (esbx_trash_ttl (store, &s, &err), &err);
  assert_int_equal (s, ESBX_TRASH_DEFAULT_TTL);

  fixture_ok (esbx_trash_set_ttl (store, "2h", &err), &err);
  fixture_ok (esbx_trash_ttl (store, &s, &err), &err);
  assert_int_equal (s, 7200);
  assert_int_equal (esbx_trash_set_ttl (store, "soon", &err), -1);
  esbx_error_free (&err);
  fixture_ok (esbx_trash_ttl (store, &s, &err), &err);
  assert_int_equal (s, 7200);

  /* The environment wins, and a bad value there is its own error.  */
  setenv ("ESBX_TRASH_TTL", "30m", 1);
  fixture_ok (esbx_trash_ttl (store, &s, &err), &err);
  assert_int_equal (s, 1800);
  setenv ("ESBX_TRASH_TTL", "forever", 1);
  assert_int_equal (esbx_trash_ttl (store, &s, &err), -1);
  assert_string_equal (err->msg, "ESBX_TRASH_TTL: invalid duration `forever`: expected e.g. 30s, "
                                 "15m, 2h, 7d or 0");
  esbx_error_free (&err);
  unsetenv ("ESBX_TRASH_TTL");

  /* A file someone broke is named.  */
  p = xasprintf ("%s/trash/ttl", store->root);
  f = fopen (p, "we");
  assert_non_null (f);
  fputs ("tomorrow\n", f);
  fclose (f);
  assert_int_equal (esbx_trash_ttl (store, &s, &err), -1);
  text = xasprintf ("%s/trash/ttl: invalid duration `tomorrow`", store->root);
  assert_string_equal (err->msg, text);
  esbx_error_free (&err);
  fixture_ok (esbx_trash_set_ttl (store, "1d", &err), &err);
}

static void
test_discard_keeps_and_restores (void **state)
{
  _cleanup_json_ json_t *arr = NULL;
  _cleanup_free_ char *entry = NULL, *restored = NULL, *back = NULL, *prefix = NULL;
  esbx_error_t err = NULL;
  const json_t *o;
  int64_t changes = 0;

  (void)state;
  new_session ("s1", "notes.txt");
  fixture_ok (esbx_session_discard (store, "s1", 0, &err), &err);
  assert_false (esbx_session_exists (store, "s1"));

  arr = list ();
  assert_int_equal (json_len (arr), 1);
  o = json_at (arr, 0);
  entry = xstrdup (json_get_string (o, "entry"));
  /* NAME.YYYYMMDDTHHMMSSZ */
  prefix = xstrdup ("s1.");
  assert_true (esbx_has_prefix (entry, prefix));
  assert_int_equal (strlen (entry), strlen ("s1.20250101T120000Z"));
  assert_string_equal (json_get_string (o, "session"), "s1");
  assert_string_equal (json_get_string (o, "project"), "p");
  assert_true (json_get_int (o, "changes", &changes));
  assert_int_equal (changes, 1);
  assert_non_null (json_get_string (o, "deleted"));
  assert_non_null (json_get_string (o, "expires"));

  /* Back under its own name, with its file.  */
  fixture_ok (esbx_trash_restore (store, entry, NULL, &restored, &err), &err);
  assert_string_equal (restored, "s1");
  assert_true (esbx_session_exists (store, "s1"));
  back = read_merged ("s1", "notes.txt");
  assert_non_null (back);
  assert_string_equal (back, "work of s1\n");
  json_free (arr);
  arr = list ();
  assert_int_equal (json_len (arr), 0);
}

static void
test_restore_refusals (void **state)
{
  _cleanup_free_ char *entry = NULL, *restored = NULL, *msg = NULL, *back = NULL;
  esbx_error_t err = NULL;

  (void)state;
  /* s1 is back from the test before; its work goes to the trash again and
     another s1 takes the name.  */
  fixture_ok (esbx_session_discard (store, "s1", 0, &err), &err);
  new_session ("s1", NULL);
  entry = only_entry ();

  assert_int_equal (esbx_trash_restore (store, entry, NULL, &restored, &err), -1);
  assert_int_equal (err->kind, ESBX_ERR_EXISTS);
  msg = xasprintf ("restore `%s`: session `s1` already exists (restore it with --name NEW)", entry);
  assert_string_equal (err->msg, msg);
  esbx_error_free (&err);
  assert_int_equal (esbx_trash_restore (store, entry, "a/b", &restored, &err), -1);
  esbx_error_free (&err);
  assert_int_equal (esbx_trash_restore (store, "nosuch.20250101T000000Z", NULL, &restored, &err),
                    -1);
  assert_int_equal (err->kind, ESBX_ERR_NOT_FOUND);
  assert_string_equal (err->msg, "trash entry `nosuch.20250101T000000Z` does not exist");
  esbx_error_free (&err);
  assert_int_equal (esbx_trash_restore (store, "../sessions/s1", NULL, &restored, &err), -1);
  assert_int_equal (err->kind, ESBX_ERR_NOT_FOUND);
  esbx_error_free (&err);
  /* Nothing of that changed the entry.  */
  free (only_entry ());

  /* Under another name it comes back, as a new session.  */
  fixture_ok (esbx_trash_restore (store, entry, "s2", &restored, &err), &err);
  assert_string_equal (restored, "s2");
  back = read_merged ("s2", "notes.txt");
  assert_non_null (back);
  assert_string_equal (back, "work of s1\n");
  fixture_ok (esbx_session_discard (store, "s1", ESBX_DISCARD_FORCE, &err), &err);
}

static void
test_no_trash_without_changes_or_forced (void **state)
{
  _cleanup_json_ json_t *arr = NULL;
  esbx_error_t err = NULL;

  (void)state;
  new_session ("clean", NULL);
  fixture_ok (esbx_session_discard (store, "clean", 0, &err), &err);
  fixture_ok (esbx_session_discard (store, "s2", ESBX_DISCARD_FORCE, &err), &err);
  arr = list ();
  assert_int_equal (json_len (arr), 0);
}

static void
test_purge (void **state)
{
  _cleanup_json_ json_t *arr = NULL;
  _cleanup_free_ char *entry = NULL;
  char *buf = NULL;
  size_t len = 0;
  esbx_error_t err = NULL;
  FILE *report;

  (void)state;
  new_session ("a", "a.txt");
  new_session ("b", "b.txt");
  new_session ("c", "c.txt");
  fixture_ok (esbx_session_discard (store, "a", 0, &err), &err);
  entry = only_entry ();
  fixture_ok (esbx_session_discard (store, "b", 0, &err), &err);
  fixture_ok (esbx_session_discard (store, "c", 0, &err), &err);

  report = open_memstream (&buf, &len);
  fixture_ok (esbx_trash_purge (store, entry, report, &err), &err);
  fflush (report);
  assert_non_null (strstr (buf, "purged trash entry `a."));
  arr = list ();
  assert_int_equal (json_len (arr), 2);
  assert_int_equal (esbx_trash_purge (store, entry, NULL, &err), -1);
  assert_int_equal (err->kind, ESBX_ERR_NOT_FOUND);
  esbx_error_free (&err);

  fixture_ok (esbx_trash_purge (store, NULL, report, &err), &err);
  fclose (report);
  assert_non_null (strstr (buf, "purged trash entry `b."));
  assert_non_null (strstr (buf, "purged trash entry `c."));
  free (buf);
  json_free (arr);
  arr = list ();
  assert_int_equal (json_len (arr), 0);
}

static void
test_expire (void **state)
{
  _cleanup_json_ json_t *arr = NULL;
  char *buf = NULL;
  size_t len = 0, failed = 0;
  esbx_error_t err = NULL;
  FILE *report;

  (void)state;
  new_session ("old", "old.txt");
  fixture_ok (esbx_trash_set_ttl (store, "3s", &err), &err);
  fixture_ok (esbx_session_discard (store, "old", 0, &err), &err);
  fixture_ok (esbx_trash_set_ttl (store, "1d", &err), &err);
  new_session ("young", "young.txt");
  fixture_ok (esbx_session_discard (store, "young", 0, &err), &err);
  arr = list ();
  assert_int_equal (json_len (arr), 2);
  json_free (arr);

  /* Before its time nothing goes (the entry's expiry is a whole second,
     2 to 3 s from now); after it, only the expired entry.  */
  fixture_ok (esbx_trash_expire (store, NULL, &failed, &err), &err);
  arr = list ();
  assert_int_equal (json_len (arr), 2);
  json_free (arr);
  sleep (4);
  report = open_memstream (&buf, &len);
  fixture_ok (esbx_trash_expire (store, report, &failed, &err), &err);
  fclose (report);
  assert_int_equal (failed, 0);
  assert_non_null (strstr (buf, "purged trash entry `old."));
  assert_non_null (strstr (buf, "(expired "));
  assert_null (strstr (buf, "young"));
  free (buf);
  arr = list ();
  assert_int_equal (json_len (arr), 1);
  assert_string_equal (json_get_string (json_at (arr, 0), "session"), "young");
}

static void
test_ttl_zero_turns_it_off (void **state)
{
  _cleanup_json_ json_t *arr = NULL;
  esbx_error_t err = NULL;

  (void)state;
  fixture_ok (esbx_trash_purge (store, NULL, NULL, &err), &err);
  fixture_ok (esbx_trash_set_ttl (store, "0", &err), &err);
  new_session ("gone", "gone.txt");
  fixture_ok (esbx_session_discard (store, "gone", 0, &err), &err);
  arr = list ();
  assert_int_equal (json_len (arr), 0);
}

/* The sessions go before the store, pass or fail: they are mounts.  */
static int
teardown (void **state)
{
  _cleanup_strv_ char **names = NULL;
  esbx_error_t err = NULL;
  size_t i;

  names = esbx_list_dir_at (store->rootfd, "sessions", &err);
  for (i = 0; names && names[i]; i++)
    if (esbx_session_discard (store, names[i], ESBX_DISCARD_FORCE, &err) < 0)
      esbx_error_free (&err);
  esbx_error_free (&err);
  return fixture_teardown (state);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_ttl_string),
    cmocka_unit_test (test_ttl),
    cmocka_unit_test (test_discard_keeps_and_restores),
    cmocka_unit_test (test_restore_refusals),
    cmocka_unit_test (test_no_trash_without_changes_or_forced),
    cmocka_unit_test (test_purge),
    cmocka_unit_test (test_expire),
    cmocka_unit_test (test_ttl_zero_turns_it_off),
  };
  return cmocka_run_group_tests (tests, fixture_setup, teardown);
}
