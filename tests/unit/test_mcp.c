/* The MCP server's protocol and checks, without a session: version
   negotiation, the lifecycle, JSON-RPC errors, the tools each caller is
   offered, arguments against the tools' schemas, the caller's limits.  */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "mcp_internal.h"
#include "store_fixture.h"
#include "utils.h"

#include <string.h>

#define ALL (ESBX_SCOPE_MANAGE | ESBX_SCOPE_RUNTIME | ESBX_SCOPE_OBSERVE)

static struct esbx_mcp_server *
server (unsigned scopes, const char *project)
{
  struct esbx_mcp_host h
      = { .store = store, .transport = "stdio", .scopes = scopes, .project = project };
  struct esbx_mcp_server *s = NULL;
  esbx_error_t err = NULL;

  fixture_ok (esbx_mcp_server_new (&h, &s, &err), &err);
  return s;
}

/* The answer to TEXT, serialized (owned).  */
static char *
ask (struct esbx_mcp_server *s, const char *text)
{
  _cleanup_json_ json_t *r = esbx_mcp_handle_text (s, text, strlen (text), NULL);

  return r ? json_serialize (r, false, NULL) : xstrdup ("(none)");
}

static void
expect (struct esbx_mcp_server *s, const char *text, const char *part)
{
  _cleanup_free_ char *got = ask (s, text);

  if (strstr (got, part) == NULL)
    fail_msg ("%s\n  answered %s\n  wanted   %s", text, got, part);
}

#define INIT(v)                                                                                    \
  "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"" v   \
  "\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}"

static void
test_lifecycle (void **state)
{
  struct esbx_mcp_server *s = server (ALL, NULL);

  (void)state;
  expect (s, "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"tools/list\"}",
          "\"code\":-32600,\"message\":\"tools/list: not initialized");
  expect (s, "{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"ping\"}",
          "\"id\":\"a\",\"result\":{}");
  expect (s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{}}",
          "params.protocolVersion is required");
  expect (s, INIT ("2025-06-18"), "\"protocolVersion\":\"2025-06-18\"");
  expect (s, INIT ("2025-06-18"), "already initialized");
  expect (s, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", "(none)");
  expect (s, "{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{}}", "(none)");
  expect (s,
          "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"logging/setLevel\",\"params\":{\"level\":"
          "\"info\"}}",
          "\"id\":2,\"result\":{}");
  expect (s,
          "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"logging/setLevel\",\"params\":{\"level\":"
          "\"loud\"}}",
          "-32602");
  expect (s, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"resources/list\"}", "-32601");
  esbx_mcp_server_free (s);

  /* An older revision is answered with the newest; the client decides.  */
  s = server (ALL, NULL);
  expect (s, INIT ("2024-11-05"), "\"protocolVersion\":\"2025-11-25\"");
  esbx_mcp_server_free (s);
  assert_true (esbx_mcp_version_supported ("2025-03-26"));
  assert_false (esbx_mcp_version_supported ("1999-01-01"));
}

static void
test_malformed (void **state)
{
  struct esbx_mcp_server *s = server (ALL, NULL);
  static char big[ESBX_MCP_MAX_MESSAGE + 2];

  (void)state;
  expect (s, INIT ("2025-11-25"), "2025-11-25");
  expect (s, "{\"jsonrpc\":\"2.0\",", "\"id\":null,\"error\":{\"code\":-32700");
  expect (s, "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", "batches are not taken");
  expect (s, "{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"ping\"}", "must be \\\"2.0\\\"");
  expect (s, "{\"jsonrpc\":\"2.0\",\"id\":true,\"method\":\"ping\"}", "a request id must be");
  expect (s, "{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}", "a request id must be");
  expect (s, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{}}",
          "params.name is required");
  expect (s, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"x\"}}",
          "\"code\":-32602,\"message\":\"unknown tool `x`\"");
  expect (s,
          "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"run\","
          "\"arguments\":[]}}",
          "params.arguments must be an object");
  expect (s,
          "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"run\","
          "\"_meta\":{\"progressToken\":{}}}}",
          "progressToken must be");
  memset (big, ' ', sizeof big - 1);
  {
    _cleanup_json_ json_t *r = esbx_mcp_handle_text (s, big, sizeof big - 1, NULL);
    _cleanup_free_ char *t = json_serialize (r, false, NULL);
    assert_non_null (strstr (t, "refused: the limit is"));
  }
  esbx_mcp_server_free (s);
}

/* How many tools tools/list offers, and whether NAME is one.  */
static size_t
offered (struct esbx_mcp_server *s, const char *name, bool *has)
{
  _cleanup_json_ json_t *r = mcp_tools_list (s);
  const json_t *t = json_get (r, "tools");
  size_t i;

  *has = false;
  for (i = 0; i < json_len (t); i++)
    if (strcmp (json_get_string (json_at (t, i), "name"), name) == 0)
      *has = true;
  return json_len (t);
}

static void
test_scopes (void **state)
{
  struct esbx_mcp_server *s;
  bool has;

  (void)state;
  s = server (ALL, NULL);
  assert_int_equal (offered (s, "publish", &has), 17);
  assert_true (has);
  esbx_mcp_server_free (s);
  s = server (ESBX_SCOPE_OBSERVE, NULL);
  assert_int_equal (offered (s, "run", &has), 4);
  assert_false (has);
  esbx_mcp_server_free (s);
  s = server (ESBX_SCOPE_RUNTIME | ESBX_SCOPE_OBSERVE, NULL);
  assert_int_equal (offered (s, "publish", &has), 10);
  assert_false (has);
  expect (s, INIT ("2025-11-25"), "2025-11-25");
  expect (
      s,
      "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"publish\","
      "\"arguments\":{\"session\":\"s\"}}}",
      "publish: needs the `manage` scope, which this server lacks\"}],\"isError\":true");
  expect (s,
          "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"diff\","
          "\"arguments\":{\"session\":\"s\",\"patch\":true}}}",
          "does not exist");
  esbx_mcp_server_free (s);
  s = server (ESBX_SCOPE_OBSERVE, NULL);
  expect (s, INIT ("2025-11-25"), "2025-11-25");
  expect (s,
          "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"diff\","
          "\"arguments\":{\"session\":\"s\",\"patch\":true}}}",
          "file content (patch) needs the `runtime` scope");
  esbx_mcp_server_free (s);
}

static void
test_confinement (void **state)
{
  struct esbx_mcp_host h = { .store = store, .scopes = ALL, .session = "nope" };
  struct esbx_mcp_server *s = NULL;
  esbx_error_t err = NULL;

  (void)state;
  assert_int_equal (esbx_mcp_server_new (&h, &s, &err), -1);
  assert_non_null (strstr (err->msg, "nope"));
  esbx_error_free (&err);
  s = server (ALL, "p");
  expect (s, INIT ("2025-11-25"), "2025-11-25");
  expect (s,
          "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":"
          "\"session_create\",\"arguments\":{\"project\":\"q\"}}}",
          "confined to project `p`: `q` is out of its reach");
  expect (s,
          "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":"
          "\"session_list\",\"arguments\":{\"project\":\"q\"}}}",
          "confined to project `p`");
  expect (s,
          "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":"
          "\"file_read\",\"arguments\":{\"session\":\"other\",\"path\":\"a\"}}}",
          "does not exist");
  esbx_mcp_server_free (s);
}

static void
test_schema (void **state)
{
  struct esbx_mcp_server *s = server (ALL, NULL);
  static const char *const bad[][2] = {
    { "{\"session\":\"s\",\"path\":\"a\",\"x\":1}", "unknown argument `x`" },
    { "{\"session\":\"s\",\"path\":1}", "argument `path` must be a string" },
    { "{\"session\":\"s\"}", "argument `path` is required" },
    { "{\"path\":\"a\"}", "argument `session` is required" },
    { "{\"session\":\"s\",\"path\":\"a\",\"start_line\":0}", "`start_line` must be at least 1" },
    { "{\"session\":\"s\",\"path\":\"a\",\"start_line\":1.5}", "`start_line` must be an integer" },
  };
  size_t i;

  (void)state;
  for (i = 0; i < ARRAY_SIZE (bad); i++)
    {
      _cleanup_json_ json_t *args = json_parse (bad[i][0], strlen (bad[i][0]), NULL);
      esbx_error_t err = NULL;

      assert_non_null (args);
      assert_int_equal (mcp_schema_check (s->tools[6].input_schema, args, &err), -1);
      if (strstr (err->msg, bad[i][1]) == NULL)
        fail_msg ("%s: %s, wanted %s", bad[i][0], err->msg, bad[i][1]);
      esbx_error_free (&err);
    }
  /* run's command is a string or an array of strings.  */
  {
    static const char *const run[][2] = {
      { "{\"session\":\"s\",\"command\":7}", "must be a string" },
      { "{\"session\":\"s\",\"command\":[1]}", "must be an array of strings" },
      { "{\"session\":\"s\",\"command\":\"true\",\"timeout_s\":0}", "at least 1" },
      { "{\"session\":\"s\",\"command\":\"true\",\"env\":{\"A\":1}}", "object of strings" },
    };
    for (i = 0; i < ARRAY_SIZE (run); i++)
      {
        _cleanup_json_ json_t *args = json_parse (run[i][0], strlen (run[i][0]), NULL);
        esbx_error_t err = NULL;

        assert_int_equal (mcp_schema_check (s->tools[5].input_schema, args, &err), -1);
        if (strstr (err->msg, run[i][1]) == NULL)
          fail_msg ("%s: %s, wanted %s", run[i][0], err->msg, run[i][1]);
        esbx_error_free (&err);
      }
  }
  assert_string_equal (s->tools[5].name, "run");
  assert_string_equal (s->tools[6].name, "file_read");
  esbx_mcp_server_free (s);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_lifecycle), cmocka_unit_test (test_malformed),
    cmocka_unit_test (test_scopes),    cmocka_unit_test (test_confinement),
    cmocka_unit_test (test_schema),
  };
  return cmocka_run_group_tests (tests, fixture_setup, fixture_teardown);
}
