/* Unit tests of layerstore/egress_policy.c: allow-list entries with HTTP
   parts, and the decision the egress proxy and `esbx egress check` share.  */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "layerstore.h"
#include "utils.h"

static json_t *
list (const char *const *entries)
{
  json_t *a = json_new (JSON_ARRAY);

  for (; *entries; entries++)
    json_append (a, json_new_string (*entries));
  return a;
}

static void
test_parse (void **state)
{
  struct esbx_egress_rule r;
  esbx_error_t err = NULL;

  (void)state;
  assert_int_equal (esbx_egress_rule_parse ("api.test:443 GET,POST /repos/o/*", &r, &err), 0);
  assert_string_equal (r.name, "api.test");
  assert_int_equal (r.port, 443);
  assert_string_equal (r.methods[0], "GET");
  assert_string_equal (r.methods[1], "POST");
  assert_null (r.methods[2]);
  assert_string_equal (r.path, "/repos/o/*");
  esbx_egress_rule_clear (&r);
  assert_int_equal (esbx_egress_rule_parse ("GET Registry.Test/pkg/*", &r, &err), 0);
  assert_string_equal (r.name, "registry.test");
  assert_string_equal (r.path, "/pkg/*");
  esbx_egress_rule_clear (&r);
  /* A CIDR's slash is no path; a path after it is.  */
  assert_int_equal (esbx_egress_rule_parse ("10.0.0.0/8:443", &r, &err), 0);
  assert_null (r.name);
  assert_int_equal (r.prefix, 8);
  assert_null (r.path);
  esbx_egress_rule_clear (&r);
  assert_int_equal (esbx_egress_rule_parse ("10.0.0.0/8:80/x", &r, &err), 0);
  assert_string_equal (r.path, "/x");
  esbx_egress_rule_clear (&r);
  static const char *const bad[]
      = { "GET",         "a.test b.test", "a.test GET GET", "a.test /a*b",
          "a.test /a?b", "a.test /a /b",  "a.test:0 GET",   NULL };
  for (size_t i = 0; bad[i]; i++)
    {
      assert_int_equal (esbx_egress_rule_parse (bad[i], &r, &err), -1);
      assert_int_equal (err->kind, ESBX_ERR_USAGE);
      esbx_error_free (&err);
    }
}

static void
test_decide (void **state)
{
  static const char *const entries[] = { "api.test:443 GET,HEAD /v1/*", "GET plain.test/pub/*",
                                         "*.wild.test", "10.1.0.0/16:80", NULL };
  _cleanup_json_ json_t *allow = list (entries);
  struct esbx_egress_verdict v;

  (void)state;
  esbx_egress_decide (allow, "api.test", 443, "GET", "/v1/x", &v);
  assert_true (v.allowed);
  assert_string_equal (v.rule, "api.test:443 GET,HEAD /v1/*");
  esbx_egress_decide (allow, "api.test", 443, "POST", "/v1/x", &v);
  assert_false (v.allowed);
  assert_string_equal (v.reason, "method or path not allowed");
  esbx_egress_decide (allow, "api.test", 443, "GET", "/v2", &v);
  assert_false (v.allowed);
  esbx_egress_decide (allow, "api.test", 80, "GET", "/v1/x", &v);
  assert_false (v.allowed);
  /* A tunnel to a host with HTTP rules: allowed, to be inspected.  */
  esbx_egress_decide (allow, "api.test", 443, NULL, NULL, &v);
  assert_true (v.allowed);
  assert_true (v.inspect);
  esbx_egress_decide (allow, "x.wild.test", 443, NULL, NULL, &v);
  assert_true (v.allowed);
  assert_false (v.inspect);
  /* *.DOMAIN is the subdomains only.  */
  esbx_egress_decide (allow, "wild.test", 443, NULL, NULL, &v);
  assert_false (v.allowed);
  esbx_egress_decide (allow, "plain.test", 80, "GET", "/pub/a", &v);
  assert_true (v.allowed);
  esbx_egress_decide (allow, "plain.test", 80, "GET", "/pubx", &v);
  assert_false (v.allowed);
  /* A name's rule never allows an address literal.  */
  esbx_egress_decide (allow, "10.1.2.3", 80, "GET", "/", &v);
  assert_true (v.allowed);
  esbx_egress_decide (allow, "10.2.2.3", 80, "GET", "/", &v);
  assert_false (v.allowed);
  assert_string_equal (v.reason, "host not on the allow-list");
  assert_true (esbx_egress_name_allowed (allow, "api.test"));
  assert_true (esbx_egress_name_allowed (allow, "a.wild.test"));
  assert_false (esbx_egress_name_allowed (allow, "wild.test"));
  assert_false (esbx_egress_name_allowed (allow, "10.1.2.3"));
  assert_true (esbx_egress_addr_listed (allow, 0x0a010203));
  assert_false (esbx_egress_addr_listed (allow, 0x0a020203));
}

static void
test_inject_parse (void **state)
{
  char *hosts[] = { (char *)"api.test", (char *)"*.forge.test", NULL };
  char *addr[] = { (char *)"10.0.0.1", NULL };
  _cleanup_json_ json_t *o = NULL;
  esbx_error_t err = NULL;

  (void)state;
  assert_int_equal (
      esbx_secret_inject_parse ("s", hosts, "Authorization: Bearer {}", NULL, NULL, &o, &err), 0);
  assert_true (esbx_secret_inject_binds (o, "API.test"));
  assert_true (esbx_secret_inject_binds (o, "x.forge.test"));
  assert_false (esbx_secret_inject_binds (o, "forge.test"));
  assert_false (esbx_secret_inject_binds (o, "api.test.evil"));
  assert_int_equal (
      esbx_secret_inject_parse ("s", hosts, "Authorization: Bearer", NULL, NULL, &o, &err), -1);
  esbx_error_free (&err);
  assert_int_equal (esbx_secret_inject_parse ("s", hosts, "X: {}\r\nY: {}", NULL, NULL, &o, &err),
                    -1);
  esbx_error_free (&err);
  assert_int_equal (esbx_secret_inject_parse ("s", addr, NULL, "u", NULL, &o, &err), -1);
  esbx_error_free (&err);
  assert_int_equal (esbx_secret_inject_parse ("s", hosts, NULL, "u", "k", &o, &err), -1);
  esbx_error_free (&err);
  assert_int_equal (esbx_secret_inject_parse ("s", NULL, NULL, "u", NULL, &o, &err), -1);
  esbx_error_free (&err);
  assert_int_equal (esbx_secret_inject_parse ("s", hosts, NULL, "a:b", NULL, &o, &err), -1);
  esbx_error_free (&err);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_parse),
    cmocka_unit_test (test_decide),
    cmocka_unit_test (test_inject_parse),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
