/* Unit tests of the log: every message is one line, whatever it quotes.  */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "text.h"
#include "utils.h"

static void
test_escape_line (void **state)
{
  static const struct
  {
    const char *in, *out;
  } cases[] = {
    { "plain name s1", "plain name s1" },
    { "a\nb\rc\td", "a\\x0ab\\x0dc\\x09d" },
    { "back\\x0aslash", "back\\x5cx0aslash" },
    { "del\x7f esc\x1b[2J", "del\\x7f esc\\x1b[2J" },
    { "c1 \xc2\x9b csi", "c1 \\xc2\\x9b csi" },
    { "caf\xc3\xa9 \xc2\xa0 ok", "caf\xc3\xa9 \xc2\xa0 ok" },
    { "bad \xff\xc3", "bad \\xff\\xc3" },
  };
  size_t i;

  for (i = 0; i < ARRAY_SIZE (cases); i++)
    {
      _cleanup_free_ char *e = esbx_escape_line (cases[i].in);
      assert_string_equal (e, cases[i].out);
    }
}

/* esbx_info with a request's name in it writes exactly one line.  */
static void
test_log_one_line (void **state)
{
  char buf[4096];
  int fds[2], saved;
  ssize_t n;

  assert_int_equal (pipe (fds), 0);
  saved = dup (2);
  dup2 (fds[1], 2);
  esbx_log_set_prog ("esbxd");
  esbx_info ("gateway GET %s status=%u", "/v1/sessions/x\nesbxd: gateway DELETE /v1/sessions/s1",
             401);
  dup2 (saved, 2);
  close (saved);
  close (fds[1]);
  n = read (fds[0], buf, sizeof buf - 1);
  close (fds[0]);
  assert_true (n > 0);
  buf[n] = '\0';
  assert_string_equal (buf, "esbxd: gateway GET /v1/sessions/x\\x0aesbxd: gateway DELETE "
                            "/v1/sessions/s1 status=401\n");
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_escape_line),
    cmocka_unit_test (test_log_one_line),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
