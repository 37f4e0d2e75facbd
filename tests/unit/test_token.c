/* Unit tests of token limits: a token is bound to its project's id, which
   a project made again under the same name does not share, and a revoked
   token is never written back by a late binding.  */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <string.h>

#include "fs.h"
#include "layerstore.h"
#include "store_fixture.h"
#include "utils.h"

static void
test_project_id (void **state)
{
  _cleanup_free_ char *a = NULL, *again = NULL, *b = NULL;
  esbx_error_t err = NULL;

  fixture_ok (esbx_project_create (store, "p", NULL, &err), &err);
  fixture_ok (esbx_project_id (store, "p", &a, &err), &err);
  assert_int_equal (strlen (a), 32);
  fixture_ok (esbx_project_id (store, "p", &again, &err), &err);
  assert_string_equal (a, again);
  fixture_ok (esbx_project_rm (store, "p", &err), &err);
  assert_int_equal (esbx_project_id (store, "p", &b, &err), -1);
  assert_non_null (strstr (err->msg, "does not exist"));
  esbx_error_free (&err);
  fixture_ok (esbx_project_create (store, "p", NULL, &err), &err);
  fixture_ok (esbx_project_id (store, "p", &b, &err), &err);
  assert_string_not_equal (a, b);
  fixture_ok (esbx_project_rm (store, "p", &err), &err);
}

/* A token made before its project is bound by its first use after.  */
static void
test_bind_later (void **state)
{
  _cleanup_free_ char *secret = NULL, *id = NULL;
  struct esbx_token *t = NULL, *v = NULL;
  esbx_error_t err = NULL;

  fixture_ok (
      esbx_token_create (store, ESBX_SCOPE_MANAGE, "later", NULL, 0, NULL, &secret, &t, &err),
      &err);
  assert_null (t->project_id);
  fixture_ok (esbx_token_bind_project (store, t, &err), &err);
  assert_null (t->project_id);
  fixture_ok (esbx_project_create (store, "later", NULL, &err), &err);
  fixture_ok (esbx_token_bind_project (store, t, &err), &err);
  fixture_ok (esbx_project_id (store, "later", &id, &err), &err);
  assert_string_equal (t->project_id, id);
  fixture_ok (esbx_token_verify (store, secret, &v, &err), &err);
  assert_string_equal (v->project_id, id);
  esbx_token_free (v);

  /* Revoked: a binding that comes late fails and writes nothing.  */
  free (t->project_id);
  t->project_id = NULL;
  fixture_ok (esbx_token_revoke (store, t->id, &err), &err);
  assert_int_equal (esbx_token_bind_project (store, t, &err), -1);
  assert_non_null (strstr (err->msg, "revoked"));
  esbx_error_free (&err);
  assert_int_equal (esbx_token_verify (store, secret, &v, &err), -1);
  esbx_error_free (&err);
  esbx_token_free (t);
  fixture_ok (esbx_project_rm (store, "later", &err), &err);
}

static void
test_session_must_exist (void **state)
{
  _cleanup_free_ char *secret = NULL;
  struct esbx_token *t = NULL;
  esbx_error_t err = NULL;

  assert_int_equal (
      esbx_token_create (store, ESBX_SCOPE_RUNTIME, NULL, "nosuch", 0, NULL, &secret, &t, &err),
      -1);
  assert_non_null (strstr (err->msg, "session `nosuch` does not exist"));
  esbx_error_free (&err);
  assert_null (secret);
  assert_null (t);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_project_id),
    cmocka_unit_test (test_bind_later),
    cmocka_unit_test (test_session_must_exist),
  };
  return cmocka_run_group_tests (tests, fixture_setup, fixture_teardown);
}
