/* Unit tests of common/: JSON round trips, names, UTF-8, sizes, errors.  */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "error.h"
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
  assert_int_equal (json_get (j, "b")->n, 4);
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

static void
test_json_set_remove (void **state)
{
  _cleanup_json_ json_t *j = json_new (JSON_OBJECT);
  _cleanup_free_ char *out = NULL;

  json_set_string (j, "k", "v1");
  json_set_string (j, "k", "v2");
  json_set_int (j, "n", -5);
  json_remove (j, "missing");
  assert_int_equal (j->n, 2);
  json_remove (j, "k");
  out = json_serialize (j, false, NULL);
  assert_string_equal (out, "{\"n\":-5}");
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
  assert_int_equal (err->code, ESBX_EXIT_USAGE);
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

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_json_roundtrip),  cmocka_unit_test (test_json_errors),
    cmocka_unit_test (test_json_set_remove), cmocka_unit_test (test_json_invalid_utf8_output),
    cmocka_unit_test (test_names),           cmocka_unit_test (test_utf8),
    cmocka_unit_test (test_sizes),           cmocka_unit_test (test_error_wrap),
    cmocka_unit_test (test_rfc3339),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
