/* Unit tests of common/: JSON round trips, names, UTF-8, sizes, errors, and
   walks of trees deeper than the open-file limit.  */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conffile.h"
#include "error.h"
#include "fs.h"
#include "json.h"
#include "text.h"
#include "utils.h"

static void
test_json_roundtrip (void **state)
{
  const char *doc = "{\"a\":1,\"b\":[true,false,null,\"x\"],\"c\":{\"d\":1.5e3}}";
  esbx_error_t err = NULL;
  _cleanup_json_ json_t *j = json_parse (doc, strlen (doc), &err);
  _cleanup_free_ char *out = NULL;
  int64_t v;

  assert_non_null (j);
  assert_true (json_get_int (j, "a", &v));
  assert_int_equal (v, 1);
  assert_int_equal (json_len (json_get (j, "b")), 4);
  out = json_serialize (j, false, NULL);
  /* Numbers keep their literal: config.json rewriting must not reformat.  */
  assert_string_equal (out, doc);
}

static void
test_json_errors (void **state)
{
  esbx_error_t err = NULL;
  json_t *j;

  j = json_parse ("{\"a\":", 5, &err);
  assert_null (j);
  assert_non_null (err);
  assert_non_null (strstr (err->msg, "invalid JSON"));
  assert_null (strchr (err->msg, '\n'));
  esbx_error_free (&err);
  j = json_parse ("{\"a\":\0}", 7, &err);
  assert_null (j);
  esbx_error_free (&err);
}

/* The parser's edges, as they were with yajl's tree: comments allowed, a
   scalar document, a key said twice keeps the last value, a string ends
   at an escaped NUL, nesting limited, invalid UTF-8 and trailing content
   refused, each in one line.  */
static void
test_json_parse_edges (void **state)
{
  static const struct
  {
    const char *doc;
    const char *out; /* compact serialisation, NULL: refused */
    const char *why; /* in the message when refused */
  } cases[] = {
    { "/* c */ {\"a\": 1 // d\n}", "{\"a\":1}", NULL },
    { "  3.50e1 ", "3.50e1", NULL },
    { "\"x\"", "\"x\"", NULL },
    { "{\"k\":1,\"j\":[],\"k\":{\"z\":null}}", "{\"k\":{\"z\":null},\"j\":[]}", NULL },
    { "[\"a\\u0000b\", true, false, null, -0]", "[\"a\",true,false,null,-0]", NULL },
    { "{\"\\u00e9\\ud83d\\ude00\": \"\\\"\"}", "{\"\xc3\xa9\xf0\x9f\x98\x80\":\"\\\"\"}", NULL },
    { "[1] [2]", NULL, "invalid JSON" },
    { "", NULL, "invalid JSON" },
    { "{\"a\" 1}", NULL, "invalid JSON" },
    { "[\"\xc0\xaf\"]", NULL, "UTF-8" },
    { "{\"\xed\xa0\x80\": 1}", NULL, "UTF-8" },
    { "[\"\xff\"]", NULL, "invalid JSON" },
  };
  char deep[2 * 300 + 1];
  size_t i;

  (void)state;
  for (i = 0; i < sizeof cases / sizeof cases[0]; i++)
    {
      esbx_error_t err = NULL;
      _cleanup_json_ json_t *j = json_parse (cases[i].doc, strlen (cases[i].doc), &err);

      if (cases[i].out)
        {
          _cleanup_free_ char *out = NULL;

          assert_non_null (j);
          out = json_serialize (j, false, NULL);
          assert_string_equal (out, cases[i].out);
          continue;
        }
      assert_null (j);
      assert_non_null (err);
      assert_non_null (strstr (err->msg, cases[i].why));
      assert_null (strchr (err->msg, '\n'));
      esbx_error_free (&err);
    }
  /* 256 levels parse, 257 do not.  */
  for (i = 257; i <= 258; i++)
    {
      esbx_error_t err = NULL;
      json_t *j;

      memset (deep, '[', i - 1);
      memset (deep + i - 1, ']', i - 1);
      j = json_parse (deep, 2 * (i - 1), &err);
      if (i == 257)
        {
          assert_non_null (j);
          json_free (j);
          continue;
        }
      assert_null (j);
      assert_non_null (strstr (err->msg, "nested deeper than 256"));
      esbx_error_free (&err);
    }
}

static void
test_json_set_remove (void **state)
{
  _cleanup_json_ json_t *j = json_new (JSON_OBJECT);
  _cleanup_free_ char *out = NULL;

  json_set_string (j, "k", "v1");
  json_set_string (j, "k", "v2");
  json_set_int (j, "n", -5);
  json_remove (j, "missing");
  assert_int_equal (json_len (j), 2);
  json_remove (j, "k");
  out = json_serialize (j, false, NULL);
  assert_string_equal (out, "{\"n\":-5}");
}

static void
test_json_iterate (void **state)
{
  const char *doc = "{\"z\":[1,\"two\",null],\"a\":{},\"m\":\"s\"}";
  esbx_error_t err = NULL;
  _cleanup_json_ json_t *j = json_parse (doc, strlen (doc), &err);
  _cleanup_json_ json_t *taken = NULL;
  _cleanup_free_ char *out = NULL;
  const char *keys[3] = { NULL }, *key;
  json_t *arr, *v;
  size_t i, n = 0;

  assert_non_null (j);
  json_object_foreach (j, i, key, v)
    {
      keys[n++] = key;
    }
  assert_int_equal (n, 3);
  /* Document order, not sorted.  */
  assert_string_equal (keys[0], "z");
  assert_string_equal (keys[1], "a");
  assert_string_equal (keys[2], "m");
  assert_null (json_key_at (j, 3));
  assert_null (json_at (j, 3));

  arr = json_get (j, "z");
  assert_int_equal (json_len (arr), 3);
  assert_null (json_key_at (arr, 0));
  n = 0;
  json_array_foreach (arr, i, v)
    {
      n += v->type == JSON_NULL;
    }
  assert_int_equal (n, 1);
  assert_int_equal (json_at (arr, 1)->type, JSON_STRING);
  /* An array has no members; scalars and NULL have no items.  */
  n = 0;
  json_object_foreach (arr, i, key, v)
    {
      n++;
    }
  assert_int_equal (n, 0);
  assert_int_equal (json_len (json_get (j, "m")), 0);
  assert_int_equal (json_len (NULL), 0);
  assert_null (json_at (NULL, 0));

  taken = json_take_at (arr, 1);
  assert_string_equal (taken->text, "two");
  assert_null (json_take_at (arr, 3));
  out = json_serialize (j, false, NULL);
  assert_string_equal (out, "{\"z\":[1,null,null],\"a\":{},\"m\":\"s\"}");
}

static void
test_json_invalid_utf8_output (void **state)
{
  _cleanup_json_ json_t *j = json_new_string ("a\xff"
                                              "b");
  _cleanup_free_ char *out = json_serialize (j, false, NULL);

  assert_string_equal (out, "\"a\xef\xbf\xbd"
                            "b\"");
}

static void
test_names (void **state)
{
  esbx_error_t err = NULL;

  assert_true (esbx_name_valid ("a"));
  assert_true (esbx_name_valid ("Proj_1.2-x"));
  assert_false (esbx_name_valid (""));
  assert_false (esbx_name_valid ("-a"));
  assert_false (esbx_name_valid (".a"));
  assert_false (esbx_name_valid ("a/b"));
  assert_false (esbx_name_valid ("a b"));
  assert_false (esbx_name_valid ("\xc3\xa9"));
  {
    char long_name[130];
    memset (long_name, 'x', 128);
    long_name[128] = '\0';
    assert_true (esbx_name_valid (long_name));
    long_name[128] = 'x';
    long_name[129] = '\0';
    assert_false (esbx_name_valid (long_name));
  }
  assert_int_equal (esbx_check_name ("session", "a/b", &err), -1);
  assert_int_equal (esbx_error_exit_status (err), ESBX_EXIT_USAGE);
  assert_non_null (strstr (err->msg, ESBX_NAME_RULE));
  esbx_error_free (&err);
}

static void
test_utf8 (void **state)
{
  _cleanup_free_ char *q = esbx_quote_path ("a\nb\xff");

  assert_true (esbx_utf8_valid ("h\xc3\xa9llo", 6));
  assert_false (esbx_utf8_valid ("\xc0\x80", 2));     /* overlong */
  assert_false (esbx_utf8_valid ("\xed\xa0\x80", 3)); /* surrogate */
  assert_false (esbx_utf8_valid ("\xe2\x82", 2));     /* truncated */
  assert_string_equal (q, "a\\x0ab\\xff");
}

static void
test_sizes (void **state)
{
  esbx_error_t err = NULL;
  uint64_t v;
  int64_t s;

  assert_int_equal (esbx_parse_size ("512k", &v, &err), 0);
  assert_int_equal (v, 512 * 1024);
  assert_int_equal (esbx_parse_size ("2G", &v, &err), 0);
  assert_int_equal (v, 2ull << 30);
  assert_int_equal (esbx_parse_size ("12", &v, &err), 0);
  assert_int_equal (v, 12);
  assert_int_equal (esbx_parse_size ("1T", &v, &err), -1);
  esbx_error_free (&err);
  assert_int_equal (esbx_parse_size ("-1", &v, &err), -1);
  esbx_error_free (&err);
  assert_int_equal (esbx_parse_size ("99999999999999999999G", &v, &err), -1);
  esbx_error_free (&err);
  assert_int_equal (esbx_parse_duration ("2h", &s, &err), 0);
  assert_int_equal (s, 7200);
  assert_int_equal (esbx_parse_duration ("h", &s, &err), -1);
  esbx_error_free (&err);
}

static void
test_error_wrap (void **state)
{
  esbx_error_t err = NULL;

  assert_int_equal (esbx_make_error (&err, ENOENT, "open `%s`", "x"), -1);
  esbx_error_wrap (&err, "publish `%s`", "s1");
  assert_string_equal (err->msg, "publish `s1`: open `x`: No such file or directory");
  assert_int_equal (err->status, ENOENT);
  esbx_error_free (&err);
  assert_null (err);
}

static void
test_rfc3339 (void **state)
{
  struct timespec ts = { .tv_sec = 0, .tv_nsec = 5 };
  _cleanup_free_ char *s = esbx_rfc3339 (&ts);

  assert_string_equal (s, "1970-01-01T00:00:00.000000005Z");
}

/* DEPTH nested directories `d` under DIRFD/NAME, a file at the bottom.  */
static void
make_deep (int dirfd, const char *name, int depth)
{
  int fd, sub, i;

  assert_int_equal (mkdirat (dirfd, name, 0755), 0);
  fd = openat (dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  assert_true (fd >= 0);
  for (i = 0; i < depth; i++)
    {
      assert_int_equal (mkdirat (fd, "d", i == depth / 2 ? 0500 : 0755), 0);
      sub = openat (fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      assert_true (sub >= 0);
      close (fd);
      fd = sub;
    }
  close (openat (fd, "leaf", O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
  close (fd);
}

/* Levels below FD, walked recursively the way layerstore's walks do.  */
static int
count_levels (int *fd, size_t depth, esbx_error_t *err)
{
  struct esbx_held_dir held;
  int sub, n;

  sub = openat (*fd, "d", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (sub < 0)
    return 0;
  if (esbx_dir_release (fd, depth, &held, err) < 0)
    return -1;
  n = count_levels (&sub, depth + 1, err);
  if (n < 0 || esbx_dir_retake (fd, sub, &held, err) < 0)
    n = -1;
  close (sub);
  return n < 0 ? -1 : n + 1;
}

/* 3,000 levels with 64 open files allowed: removal, du and a recursive
   walk that gives its fds back all work.  */
static void
test_deep_tree (void **state)
{
  char root[] = "/tmp/esbx-deep-XXXXXX";
  struct rlimit saved, low = { 64, 64 };
  unsigned long long bytes = 0;
  esbx_error_t err = NULL;
  int rootfd, fd;

  assert_non_null (mkdtemp (root));
  rootfd = open (root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  make_deep (rootfd, "t", 3000);
  getrlimit (RLIMIT_NOFILE, &saved);
  low.rlim_max = saved.rlim_max;
  assert_int_equal (setrlimit (RLIMIT_NOFILE, &low), 0);

  fd = openat (rootfd, "t", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  assert_int_equal (count_levels (&fd, 0, &err), 3000);
  assert_null (err);
  close (fd);
  assert_int_equal (esbx_du_at (rootfd, "t", &bytes, &err), 0);
  assert_true (bytes >= 3000ULL * 512);
  assert_int_equal (esbx_rm_rf_at (rootfd, "t", &err), 0);
  assert_null (err);
  assert_false (esbx_exists_at (rootfd, "t"));

  setrlimit (RLIMIT_NOFILE, &saved);
  close (rootfd);
  rmdir (root);
}

/* A file with two names is counted once: a session's hard links (git's
   commands) must not look like copies in upper_size and inspect.  */
static void
test_du_hard_links (void **state)
{
  char root[] = "/tmp/esbx-du-links-XXXXXX";
  static char block[64 * 1024];
  unsigned long long one = 0, two = 0;
  esbx_error_t err = NULL;
  int rootfd, fd;

  (void)state;
  memset (block, 'x', sizeof block);
  assert_non_null (mkdtemp (root));
  rootfd = open (root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  assert_int_equal (mkdirat (rootfd, "t", 0755), 0);
  assert_int_equal (mkdirat (rootfd, "t/sub", 0755), 0);
  fd = openat (rootfd, "t/a", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  assert_true (fd >= 0);
  assert_int_equal (write (fd, block, sizeof block), (ssize_t)sizeof block);
  assert_int_equal (fsync (fd), 0);
  close (fd);
  assert_int_equal (esbx_du_at (rootfd, "t", &one, &err), 0);
  assert_true (one >= sizeof block);

  /* A second name in another directory of the tree: the same total.  */
  assert_int_equal (linkat (rootfd, "t/a", rootfd, "t/sub/b", 0), 0);
  assert_int_equal (esbx_du_at (rootfd, "t", &two, &err), 0);
  assert_null (err);
  assert_int_equal (two, one);

  assert_int_equal (esbx_rm_rf_at (rootfd, "t", &err), 0);
  close (rootfd);
  rmdir (root);
}

/* A directory moved while a walk was below it is an error, never a reason
   to go on somewhere else.  */
static void
test_walk_moved (void **state)
{
  char root[] = "/tmp/esbx-moved-XXXXXX";
  struct esbx_held_dir held;
  esbx_error_t err = NULL;
  int rootfd, a, b;

  assert_non_null (mkdtemp (root));
  rootfd = open (root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  assert_int_equal (mkdirat (rootfd, "a", 0755), 0);
  assert_int_equal (mkdirat (rootfd, "a/b", 0755), 0);
  a = openat (rootfd, "a", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  b = openat (a, "b", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  assert_int_equal (esbx_dir_release (&a, ESBX_WALK_HELD_FDS, &held, &err), 0);
  assert_int_equal (a, -1);
  assert_int_equal (renameat (rootfd, "a/b", rootfd, "b"), 0);
  assert_int_equal (esbx_dir_retake (&a, b, &held, &err), -1);
  assert_non_null (err);
  esbx_error_free (&err);
  assert_int_equal (a, -1);
  close (b);
  assert_int_equal (esbx_rm_rf_at (AT_FDCWD, root, &err), 0);
  close (rootfd);
}

/* Every descriptor above 2 goes but the ones kept, in any order.  */
static void
test_close_fds_except (void **state)
{
  int fd[6], i;

  (void)state;
  for (i = 0; i < 6; i++)
    assert_true ((fd[i] = open ("/dev/null", O_RDONLY | O_CLOEXEC)) > 2);
  esbx_close_fds_except (fd[4], fd[1]);
  for (i = 0; i < 6; i++)
    assert_int_equal (fcntl (fd[i], F_GETFD) >= 0, i == 1 || i == 4);
  assert_true (fcntl (2, F_GETFD) >= 0);
  esbx_close_fds_except (-1, -1);
  assert_true (fcntl (fd[1], F_GETFD) < 0);
  assert_true (fcntl (fd[4], F_GETFD) < 0);
}

struct settings
{
  char seen[256];
};

static int
collect (const char *key, const char *value, const char *where, void *data, esbx_error_t *err)
{
  struct settings *st = data;
  size_t len = strlen (st->seen);

  if (strcmp (key, "bad") == 0)
    return esbx_make_error (err, 0, "%s: refused", where);
  snprintf (st->seen + len, sizeof st->seen - len, "[%s=%s]", key, value);
  return 0;
}

static void
test_syncfs (void **state)
{
  esbx_error_t err = NULL;
  int fd = open ("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

  (void)state;
  assert_true (fd >= 0);
  assert_int_equal (esbx_syncfs (fd, "root", &err), 0);
  assert_null (err);
  close (fd);
  /* A flush that cannot happen is an error naming what was flushed.  */
  assert_int_equal (esbx_syncfs (fd, "the layer", &err), -1);
  assert_non_null (err);
  assert_non_null (strstr (err->msg, "`the layer`"));
  esbx_error_free (&err);
}

static void
test_conffile (void **state)
{
  char path[] = "/tmp/esbx-unit-conf-XXXXXX";
  int fd = mkstemp (path);
  struct settings st = { { 0 } };
  esbx_error_t err = NULL;
  const char *text = "# comment\n\n  a = 1  \nb=two words # trailing\nc =\n";

  assert_true (fd >= 0);
  assert_int_equal (write (fd, text, strlen (text)), (ssize_t)strlen (text));
  close (fd);
  assert_int_equal (esbx_conf_read (path, true, collect, &st, &err), 0);
  assert_string_equal (st.seen, "[a=1][b=two words][c=]");

  /* A line without `=` names the file and the line.  */
  fd = open (path, O_WRONLY | O_APPEND);
  assert_int_equal (write (fd, " = no key\n", 10), 10);
  close (fd);
  st.seen[0] = '\0';
  assert_int_equal (esbx_conf_read (path, true, collect, &st, &err), -1);
  assert_non_null (strstr (err->msg, ":6: expected `key = value`"));
  assert_int_equal (err->kind, ESBX_ERR_USAGE);
  esbx_error_free (&err);

  /* The callback's refusal ends the read.  */
  fd = open (path, O_WRONLY | O_TRUNC);
  assert_int_equal (write (fd, "bad = 1\n", 8), 8);
  close (fd);
  assert_int_equal (esbx_conf_read (path, true, collect, &st, &err), -1);
  assert_non_null (strstr (err->msg, ":1: refused"));
  esbx_error_free (&err);
  unlink (path);

  /* Missing: nothing unless it must exist.  */
  assert_int_equal (esbx_conf_read (path, false, collect, &st, &err), 0);
  assert_int_equal (esbx_conf_read (path, true, collect, &st, &err), -1);
  assert_non_null (strstr (err->msg, "No such file"));
  esbx_error_free (&err);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_json_roundtrip),
    cmocka_unit_test (test_json_errors),
    cmocka_unit_test (test_json_parse_edges),
    cmocka_unit_test (test_json_set_remove),
    cmocka_unit_test (test_json_iterate),
    cmocka_unit_test (test_json_invalid_utf8_output),
    cmocka_unit_test (test_names),
    cmocka_unit_test (test_utf8),
    cmocka_unit_test (test_sizes),
    cmocka_unit_test (test_error_wrap),
    cmocka_unit_test (test_rfc3339),
    cmocka_unit_test (test_deep_tree),
    cmocka_unit_test (test_syncfs),
    cmocka_unit_test (test_walk_moved),
    cmocka_unit_test (test_du_hard_links),
    cmocka_unit_test (test_close_fds_except),
    cmocka_unit_test (test_conffile),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
