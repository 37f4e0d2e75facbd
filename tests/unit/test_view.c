/* Unit tests of layerstore/view.c: the JSON views the CLI prints and the
   gateway sends must keep their exact shape, since scripts and the remote
   CLI read them.  */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "layerstore.h"
#include "utils.h"

static void
assert_json (const json_t *j, const char *want)
{
  _cleanup_free_ char *s = json_serialize (j, false, NULL);

  assert_string_equal (s, want);
}

static void
test_publish_views (void **state)
{
  struct esbx_conflict c[] = {
    { .path = "/README", .layer = "aaaa", .session = "s1" },
    { .path = "/src/main.c",
      .layer = "bbbb",
      .kind = ESBX_CONFLICT_CONTENT,
      .blocking = true,
      .markers = true },
    { .path = "/old.c",
      .layer = "bbbb",
      .session = "s2",
      .kind = ESBX_CONFLICT_RENAME,
      .renamed = "/new.c" },
  };
  struct esbx_publish_result r = { .layer = "cccc", .n_changes = 2 };
  struct esbx_publish_result none = { 0 };
  struct esbx_publish_result conflict = { .conflicts = c, .n_conflicts = 3 };
  _cleanup_json_ json_t *published = esbx_publish_result_json (&r);
  _cleanup_json_ json_t *nothing = esbx_publish_result_json (&none);
  _cleanup_json_ json_t *rebased = esbx_rebase_result_json (&r);
  _cleanup_json_ json_t *conflicts = esbx_conflicts_json (&conflict);

  assert_json (published, "{\"layer\":\"cccc\",\"changes\":2}");
  assert_json (nothing, "{\"layer\":null,\"changes\":0}");
  assert_json (rebased, "{\"base\":\"cccc\",\"merged\":[],\"conflicts\":[],\"unmerged\":[]}");
  assert_json (conflicts, "[{\"path\":\"/README\",\"layer\":\"aaaa\",\"session\":\"s1\","
                          "\"kind\":\"content\",\"blocking\":false},"
                          "{\"path\":\"/src/main.c\",\"layer\":\"bbbb\",\"session\":null,"
                          "\"kind\":\"content\",\"blocking\":true,\"markers\":true},"
                          "{\"path\":\"/old.c\",\"layer\":\"bbbb\",\"session\":\"s2\","
                          "\"kind\":\"rename\",\"blocking\":false,\"renamed\":\"/new.c\"}]");
}

static void
test_changeset_view (void **state)
{
  struct esbx_change v[] = {
    { .path = "/a", .kind = ESBX_DELETED, .type = ESBX_TYPE_FILE },
    { .path = "/d", .kind = ESBX_ADDED, .type = ESBX_TYPE_DIR, .mode = 0755 },
  };
  struct esbx_changeset cs = { .v = v, .n = 2 };
  struct esbx_changeset empty = { 0 };
  _cleanup_json_ json_t *arr = esbx_changeset_json (&cs);
  _cleanup_json_ json_t *none = esbx_changeset_json (&empty);

  assert_json (arr,
               "[{\"path\":\"/a\",\"kind\":\"deleted\",\"type\":\"file\"},"
               "{\"path\":\"/d\",\"kind\":\"added\",\"type\":\"dir\",\"mode\":493,\"size\":0}]");
  assert_json (none, "[]");
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_publish_views),
    cmocka_unit_test (test_changeset_view),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
