/* Unit tests of the gateway's token authorization (volume-plugin/gateway/
   auth.c): the bearer header, scopes, the rule that `observe` never gets
   file content, project and session limits bound to ids rather than
   names, listings filtered to the token, and expired and revoked tokens.  */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fs.h"
#include "gateway/auth.h"
#include "gateway/routes.h"
#include "layerstore.h"
#include "store_fixture.h"
#include "utils.h"

/* A token with SCOPES limited to PROJECT or SESSION (either may be NULL),
   as the gateway sees it once its header is authenticated.  */
static struct esbx_token *
token (unsigned scopes, const char *project, const char *session)
{
  _cleanup_free_ char *secret = NULL, *header = NULL, *reason = NULL;
  struct esbx_token *t = NULL, *made = NULL;
  esbx_error_t err = NULL;

  fixture_ok (esbx_token_create (store, scopes, project, session, 0, NULL, &secret, &made, &err),
              &err);
  esbx_token_free (made);
  header = xasprintf ("Bearer %s", secret);
  if (esbx_auth_authenticate (store, header, &t, &reason) < 0)
    fail_msg ("%s", reason);
  return t;
}

static char *
session_id (const char *name)
{
  struct esbx_session *s = NULL;
  esbx_error_t err = NULL;
  char *id;

  fixture_ok (esbx_session_load (store, name, &s, &err), &err);
  id = xstrdup (s->id);
  esbx_session_free (s);
  return id;
}

static void
new_session (const char *project, const char *name)
{
  struct esbx_session_opts o = { .name = name };
  _cleanup_free_ char *made = NULL;
  esbx_error_t err = NULL;

  if (!esbx_project_exists (store, project))
    fixture_ok (esbx_project_create (store, project, NULL, &err), &err);
  fixture_ok (esbx_session_create (store, project, &o, &made, &err), &err);
  assert_string_equal (made, name);
}

static void
drop_session (const char *name)
{
  esbx_error_t err = NULL;

  fixture_ok (esbx_session_discard (store, name, ESBX_DISCARD_FORCE, &err), &err);
}

static void
drop_project (const char *name)
{
  esbx_error_t err = NULL;

  fixture_ok (esbx_project_rm (store, name, &err), &err);
}

/* A request about PROJECT and SESSION (with id SID; NULL: it does not
   exist), as esbx_auth_resolve_target leaves it.  */
static struct esbx_gateway_ctx
request (const struct esbx_token *t, const char *project, const char *session, const char *sid)
{
  struct esbx_gateway_ctx ctx = {
    .store = store,
    .token = t,
    .project = (char *)project,
    .session = (char *)session,
    .session_id = (char *)sid,
  };
  return ctx;
}

/* Routes of the gateway's own table, by their endpoint name.  */
static const struct esbx_gateway_route *
named (const char *name)
{
  size_t i;

  for (i = 0; i < esbx_gateway_n_routes; i++)
    if (strcmp (esbx_gateway_routes[i].name, name) == 0)
      return &esbx_gateway_routes[i];
  fail_msg ("no route `%s`", name);
  return NULL;
}

/* Allowed, or refused with a reason that contains WHY.  */
static void
allowed (struct esbx_gateway_ctx *ctx, const struct esbx_gateway_route *route)
{
  _cleanup_free_ char *reason = NULL;

  if (!esbx_auth_authorize (ctx, route, &reason))
    fail_msg ("%s refused: %s", route->name, reason);
}

static void
refused (struct esbx_gateway_ctx *ctx, const struct esbx_gateway_route *route, const char *why)
{
  _cleanup_free_ char *reason = NULL;

  assert_false (esbx_auth_authorize (ctx, route, &reason));
  assert_non_null (reason);
  if (strstr (reason, why) == NULL)
    fail_msg ("%s: `%s` does not say `%s`", route->name, reason, why);
}

static void
test_header (void **state)
{
  _cleanup_free_ char *secret = NULL, *header = NULL;
  struct esbx_token *made = NULL, *t = NULL;
  esbx_error_t err = NULL;
  char *reason = NULL;

  assert_int_equal (esbx_auth_authenticate (store, NULL, &t, &reason), -1);
  assert_non_null (strstr (reason, "missing Authorization header"));
  free (reason);
  assert_int_equal (esbx_auth_authenticate (store, "", &t, &reason), -1);
  assert_non_null (strstr (reason, "missing Authorization header"));
  free (reason);
  assert_int_equal (esbx_auth_authenticate (store, "Basic dXNlcg==", &t, &reason), -1);
  assert_non_null (strstr (reason, "must be `Bearer TOKEN`"));
  free (reason);
  assert_int_equal (esbx_auth_authenticate (store, "Bearer not-a-token", &t, &reason), -1);
  assert_non_null (strstr (reason, "malformed token"));
  free (reason);
  assert_null (t);

  /* The scheme is case-insensitive and spaces before the secret are
     skipped.  */
  fixture_ok (
      esbx_token_create (store, ESBX_SCOPE_OBSERVE, NULL, NULL, 0, NULL, &secret, &made, &err),
      &err);
  header = xasprintf ("bearer   %s", secret);
  reason = NULL;
  assert_int_equal (esbx_auth_authenticate (store, header, &t, &reason), 0);
  assert_null (reason);
  assert_string_equal (t->id, made->id);
  assert_int_equal (t->scopes, ESBX_SCOPE_OBSERVE);
  esbx_token_free (t);
  esbx_token_free (made);
}

static void
test_revoked_and_expired (void **state)
{
  _cleanup_free_ char *secret = NULL, *header = NULL, *reason = NULL;
  struct timespec wait = { 1, 100 * 1000 * 1000 };
  struct esbx_token *made = NULL, *t = NULL;
  esbx_error_t err = NULL;

  fixture_ok (
      esbx_token_create (store, ESBX_SCOPE_MANAGE, NULL, NULL, 0, NULL, &secret, &made, &err),
      &err);
  header = xasprintf ("Bearer %s", secret);
  fixture_ok (esbx_token_revoke (store, made->id, &err), &err);
  assert_int_equal (esbx_auth_authenticate (store, header, &t, &reason), -1);
  assert_non_null (strstr (reason, "unknown or revoked token"));
  assert_null (t);
  esbx_token_free (made);
  free (secret);
  free (header);
  free (reason);
  reason = NULL;

  fixture_ok (
      esbx_token_create (store, ESBX_SCOPE_MANAGE, NULL, NULL, 1, NULL, &secret, &made, &err),
      &err);
  header = xasprintf ("Bearer %s", secret);
  nanosleep (&wait, NULL);
  assert_int_equal (esbx_auth_authenticate (store, header, &t, &reason), -1);
  assert_non_null (strstr (reason, "expired"));
  assert_null (t);
  esbx_token_free (made);
}

/* A token as authentication leaves it, made by hand: authorization only
   compares it with the request, and with the store for project ids.  */
static struct esbx_token
tok (unsigned scopes, const char *project, const char *session, const char *session_id)
{
  struct esbx_token t = {
    .id = (char *)"t1",
    .scopes = scopes,
    .project = (char *)project,
    .session = (char *)session,
    .session_id = (char *)session_id,
  };
  return t;
}

static void
test_scopes (void **state)
{
  struct esbx_token manage = tok (ESBX_SCOPE_MANAGE, NULL, NULL, NULL);
  struct esbx_token runtime = tok (ESBX_SCOPE_RUNTIME, NULL, NULL, NULL);
  struct esbx_token observe = tok (ESBX_SCOPE_OBSERVE, NULL, NULL, NULL);
  struct esbx_token all
      = tok (ESBX_SCOPE_MANAGE | ESBX_SCOPE_RUNTIME | ESBX_SCOPE_OBSERVE, NULL, NULL, NULL);
  struct esbx_gateway_ctx m = request (&manage, "p", "s", "id");
  struct esbx_gateway_ctx r = request (&runtime, "p", "s", "id");
  struct esbx_gateway_ctx o = request (&observe, "p", "s", "id");
  struct esbx_gateway_ctx a = request (&all, "p", "s", "id");

  allowed (&m, named ("session_publish"));
  refused (&m, named ("session_exec"), "token `t1` lacks the `runtime` scope");
  refused (&m, named ("project_log"), "lacks the `observe` scope");
  allowed (&m, named ("gc"));

  refused (&r, named ("session_publish"), "lacks the `manage` scope");
  allowed (&r, named ("session_exec"));
  refused (&r, named ("session_list"), "lacks the `observe` scope");

  refused (&o, named ("session_publish"), "lacks the `manage` scope");
  refused (&o, named ("session_exec"), "lacks the `runtime` scope");
  allowed (&o, named ("project_log"));
  allowed (&o, named ("session_list"));
  refused (&o, named ("gc"), "lacks the `manage` scope");

  allowed (&a, named ("session_publish"));
  allowed (&a, named ("session_exec"));
  allowed (&a, named ("session_diff"));
  allowed (&a, named ("gc"));

  /* whoami needs no scope at all.  */
  allowed (&m, named ("whoami"));
  allowed (&r, named ("whoami"));
  allowed (&o, named ("whoami"));
}

/* `observe` reads names, kinds and sizes, never content: a diff is
   observable, a patch (the diff's content flag) needs `runtime`.  */
static void
test_observe_no_content (void **state)
{
  struct esbx_token observe = tok (ESBX_SCOPE_OBSERVE, NULL, NULL, NULL);
  struct esbx_token runtime = tok (ESBX_SCOPE_RUNTIME, NULL, NULL, NULL);
  struct esbx_token manage = tok (ESBX_SCOPE_MANAGE | ESBX_SCOPE_OBSERVE, NULL, NULL, NULL);
  struct esbx_gateway_ctx o = request (&observe, "p", "s", "id");
  struct esbx_gateway_ctx r = request (&runtime, "p", "s", "id");
  struct esbx_gateway_ctx m = request (&manage, "p", "s", "id");

  allowed (&o, named ("session_diff"));
  refused (&r, named ("session_diff"), "lacks the `observe` scope");

  o.content = r.content = m.content = true;
  refused (&o, named ("session_diff"), "lacks the `runtime` scope: `patch` asks for file content");
  refused (&m, named ("session_diff"), "lacks the `runtime` scope: `patch` asks for file content");
  allowed (&r, named ("session_diff"));
}

/* A session token acts on its own session, known by its id: never on
   another session, on a project as a whole or on the store, and never on
   a new session that took the name of its own.  */
static void
test_session_limit (void **state)
{
  struct esbx_token t = tok (ESBX_SCOPE_MANAGE | ESBX_SCOPE_OBSERVE, NULL, "s1", "ID1");
  struct esbx_gateway_ctx ctx;

  ctx = request (&t, "p", "s1", "ID1");
  allowed (&ctx, named ("session_publish"));
  allowed (&ctx, named ("session_diff"));
  /* Listings are filtered by the handler; whoami is about the token.  */
  allowed (&ctx, named ("session_list"));
  allowed (&ctx, named ("whoami"));

  ctx = request (&t, "p", "s2", "ID2");
  refused (&ctx, named ("session_publish"), "token `t1` is limited to session `s1`");
  ctx = request (&t, "p", NULL, NULL);
  refused (&ctx, named ("project_log"), "is limited to session `s1`");
  refused (&ctx, named ("gc"), "is limited to session `s1`");

  /* The name with another id: the session was discarded and made again.  */
  ctx = request (&t, "p", "s1", "ID2");
  refused (&ctx, named ("session_publish"),
           "(id ID1); the session of that name now is another one (id ID2)");
  ctx = request (&t, "p", "s1", NULL);
  refused (&ctx, named ("session_publish"), "(id ID1), which no longer exists");

  /* Bound by name only (made before sessions had ids): refused.  */
  t.session_id = NULL;
  ctx = request (&t, "p", "s1", "ID1");
  refused (&ctx, named ("session_publish"), "by name only");

  /* Scopes are checked first.  */
  t = tok (ESBX_SCOPE_OBSERVE, NULL, "s1", "ID1");
  ctx = request (&t, "p", "s1", "ID1");
  refused (&ctx, named ("session_exec"), "lacks the `runtime` scope");
}

/* A project token acts within its project, known by its id once it
   exists, and never on the store as a whole.  */
static void
test_project_limit (void **state)
{
  struct esbx_token *t, *later;
  struct esbx_gateway_ctx ctx;
  esbx_error_t err = NULL;

  fixture_ok (esbx_project_create (store, "pp", NULL, &err), &err);
  fixture_ok (esbx_project_create (store, "other", NULL, &err), &err);
  t = token (ESBX_SCOPE_MANAGE | ESBX_SCOPE_OBSERVE, "pp", NULL);
  assert_non_null (t->project_id);

  ctx = request (t, "pp", NULL, NULL);
  allowed (&ctx, named ("project_log"));
  allowed (&ctx, named ("session_publish"));
  allowed (&ctx, named ("session_list"));
  refused (&ctx, named ("gc"), "is limited to project `pp`");
  ctx = request (t, "other", NULL, NULL);
  refused (&ctx, named ("project_log"), "is limited to project `pp`");
  ctx = request (t, NULL, NULL, NULL);
  refused (&ctx, named ("project_log"), "is limited to project `pp`");

  /* Removed, then made again under the same name.  */
  drop_project ("pp");
  ctx = request (t, "pp", NULL, NULL);
  refused (&ctx, named ("project_log"), "which no longer exists");
  fixture_ok (esbx_project_create (store, "pp", NULL, &err), &err);
  refused (&ctx, named ("project_log"), "the project of that name now is another one");

  /* A token made before its project acts by name until the first request
     after the project exists binds it (esbx_auth_bind).  */
  later = token (ESBX_SCOPE_MANAGE, "new", NULL);
  assert_null (later->project_id);
  ctx = request (later, "new", NULL, NULL);
  allowed (&ctx, named ("session_publish"));
  fixture_ok (esbx_project_create (store, "new", NULL, &err), &err);
  esbx_auth_bind (&ctx);
  assert_non_null (later->project_id);
  allowed (&ctx, named ("session_publish"));
  drop_project ("new");
  fixture_ok (esbx_project_create (store, "new", NULL, &err), &err);
  refused (&ctx, named ("session_publish"), "now is another one");

  drop_project ("pp");
  drop_project ("other");
  drop_project ("new");
  esbx_token_free (t);
  esbx_token_free (later);
}

/* Targets named in the path or the body; the content flag comes from the
   route's own flag.  */
static void
test_resolve_target (void **state)
{
  struct esbx_token t = tok (ESBX_SCOPE_OBSERVE, NULL, NULL, NULL);
  struct esbx_gateway_ctx ctx = request (&t, NULL, NULL, NULL);
  esbx_error_t err = NULL;

  ctx.arg = "rp";
  esbx_auth_resolve_target (&ctx, named ("project_log"));
  assert_false (ctx.content);
  assert_string_equal (ctx.project, "rp");
  assert_null (ctx.session);
  free (ctx.project);

  /* A session that does not exist has neither project nor id.  */
  ctx = request (&t, NULL, NULL, NULL);
  ctx.arg = "gone";
  esbx_auth_resolve_target (&ctx, named ("session_publish"));
  assert_string_equal (ctx.session, "gone");
  assert_null (ctx.project);
  assert_null (ctx.session_id);
  free (ctx.session);

  ctx = request (&t, NULL, NULL, NULL);
  ctx.json = json_parse ("{\"project\": \"bp\", \"name\": \"bn\"}", 31, &err);
  assert_non_null (ctx.json);
  esbx_auth_resolve_target (&ctx, named ("session_create"));
  assert_string_equal (ctx.project, "bp");
  free (ctx.project);
  esbx_auth_resolve_target (&ctx, named ("project_create"));
  assert_string_equal (ctx.project, "bn");
  free (ctx.project);
  json_free (ctx.json);

  ctx = request (&t, NULL, NULL, NULL);
  esbx_auth_resolve_target (&ctx, named ("gc"));
  assert_null (ctx.project);
  assert_null (ctx.session);
}

/* Listings show a project token only its project and its sessions.  */
static void
test_listings (void **state)
{
  struct esbx_token all = tok (ESBX_SCOPE_OBSERVE, NULL, NULL, NULL);
  struct esbx_token *proj;
  struct esbx_session a = { .id = (char *)"IA", .name = (char *)"a", .project = (char *)"la" };
  struct esbx_session b = { .id = (char *)"IB", .name = (char *)"b", .project = (char *)"lb" };
  esbx_error_t err = NULL;

  fixture_ok (esbx_project_create (store, "la", NULL, &err), &err);
  fixture_ok (esbx_project_create (store, "lb", NULL, &err), &err);
  proj = token (ESBX_SCOPE_OBSERVE, "la", NULL);

  assert_true (esbx_auth_sees_project (store, &all, "la"));
  assert_true (esbx_auth_sees_project (store, &all, "lb"));
  assert_true (esbx_auth_sees_session (store, &all, &b));
  assert_true (esbx_auth_sees_project (store, proj, "la"));
  assert_false (esbx_auth_sees_project (store, proj, "lb"));
  assert_true (esbx_auth_sees_session (store, proj, &a));
  assert_false (esbx_auth_sees_session (store, proj, &b));

  drop_project ("la");
  drop_project ("lb");
  esbx_token_free (proj);
}

/* With real sessions (mounted, so root only): a session token is made
   bound to its session's id, the gateway resolves a session's id from the
   store, and the token sees its session and that session's project in
   listings, until the session is gone.  */
static void
test_session_token (void **state)
{
  _cleanup_free_ char *id = NULL, *id2 = NULL;
  struct esbx_session *s1 = NULL, *s2 = NULL;
  struct esbx_gateway_ctx ctx;
  struct esbx_token *t;
  esbx_error_t err = NULL;

  if (geteuid () != 0)
    skip ();
  new_session ("sp", "s1");
  new_session ("sp", "s2");
  id = session_id ("s1");
  t = token (ESBX_SCOPE_MANAGE | ESBX_SCOPE_OBSERVE, NULL, "s1");
  assert_string_equal (t->session_id, id);

  ctx = request (t, NULL, NULL, NULL);
  ctx.arg = "s1";
  esbx_auth_resolve_target (&ctx, named ("session_publish"));
  assert_string_equal (ctx.project, "sp");
  assert_string_equal (ctx.session_id, id);
  allowed (&ctx, named ("session_publish"));
  free (ctx.project);
  free (ctx.session);
  free (ctx.session_id);

  fixture_ok (esbx_session_load (store, "s1", &s1, &err), &err);
  fixture_ok (esbx_session_load (store, "s2", &s2, &err), &err);
  assert_true (esbx_auth_sees_project (store, t, "sp"));
  assert_false (esbx_auth_sees_project (store, t, "other"));
  assert_true (esbx_auth_sees_session (store, t, s1));
  assert_false (esbx_auth_sees_session (store, t, s2));

  /* Discarded and made again under the same name: out of reach.  */
  drop_session ("s1");
  assert_false (esbx_auth_sees_project (store, t, "sp"));
  new_session ("sp", "s1");
  id2 = session_id ("s1");
  assert_string_not_equal (id, id2);
  ctx = request (t, NULL, NULL, NULL);
  ctx.arg = "s1";
  esbx_auth_resolve_target (&ctx, named ("session_publish"));
  assert_string_equal (ctx.session_id, id2);
  refused (&ctx, named ("session_publish"), "now is another one");
  assert_false (esbx_auth_sees_project (store, t, "sp"));
  free (ctx.project);
  free (ctx.session);
  free (ctx.session_id);

  esbx_session_free (s1);
  esbx_session_free (s2);
  drop_session ("s1");
  drop_session ("s2");
  drop_project ("sp");
  esbx_token_free (t);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_header),         cmocka_unit_test (test_revoked_and_expired),
    cmocka_unit_test (test_scopes),         cmocka_unit_test (test_observe_no_content),
    cmocka_unit_test (test_session_limit),  cmocka_unit_test (test_project_limit),
    cmocka_unit_test (test_resolve_target), cmocka_unit_test (test_listings),
    cmocka_unit_test (test_session_token),
  };
  return cmocka_run_group_tests (tests, fixture_setup, fixture_teardown);
}
