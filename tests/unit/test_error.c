/* Unit tests of the error object's two maps: kind to exit status (the CLI)
   and kind to HTTP status (esbxd); the kinds esbx_make_error gives to an
   errno; an error's way from a child to its parent.  */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "http.h"
#include "sync.h"

static void
test_exit_status (void **state)
{
  static const struct
  {
    enum esbx_error_kind kind;
    int exit;
  } cases[] = {
    { ESBX_ERR_FAILED, 1 },        { ESBX_ERR_USAGE, 2 },
    { ESBX_ERR_NOT_FOUND, 1 },     { ESBX_ERR_EXISTS, 1 },
    { ESBX_ERR_CONFLICT, 3 },      { ESBX_ERR_FORBIDDEN, 1 },
    { ESBX_ERR_BUSY, 1 },          { ESBX_ERR_TOO_LARGE, 1 },
    { ESBX_ERR_EXEC_FAILED, 126 }, { ESBX_ERR_EXEC_NOT_FOUND, 127 },
    { ESBX_ERR_UNMERGED, 4 },
  };
  size_t i;

  (void)state;
  assert_int_equal (esbx_error_exit_status (NULL), 0);
  for (i = 0; i < sizeof cases / sizeof cases[0]; i++)
    {
      struct esbx_error e = { .kind = cases[i].kind };

      assert_int_equal (esbx_error_exit_status (&e), cases[i].exit);
      if (cases[i].exit != 1)
        assert_int_equal (esbx_error_kind_of_exit (cases[i].exit), cases[i].kind);
    }
  assert_int_equal (esbx_error_kind_of_exit (1), ESBX_ERR_FAILED);
  assert_int_equal (esbx_error_kind_of_exit (42), ESBX_ERR_FAILED);
}

static void
test_http_status (void **state)
{
  static const struct
  {
    enum esbx_error_kind kind;
    int status;
    unsigned http;
  } cases[] = {
    { ESBX_ERR_USAGE, 0, 400 },
    { ESBX_ERR_NOT_FOUND, 0, 404 },
    { ESBX_ERR_NOT_FOUND, ENOENT, 404 },
    { ESBX_ERR_EXISTS, EEXIST, 400 },
    { ESBX_ERR_CONFLICT, 0, 409 },
    { ESBX_ERR_UNMERGED, 0, 409 },
    { ESBX_ERR_FORBIDDEN, ELOOP, 403 },
    { ESBX_ERR_BUSY, EBUSY, 400 },
    { ESBX_ERR_TOO_LARGE, 0, 413 },
    { ESBX_ERR_EXEC_FAILED, EACCES, 422 },
    { ESBX_ERR_EXEC_NOT_FOUND, ENOENT, 422 },
    /* A failure with no system error behind it is the request's.  */
    { ESBX_ERR_FAILED, 0, 400 },
    { ESBX_ERR_FAILED, EIO, 500 },
  };
  size_t i;

  (void)state;
  for (i = 0; i < sizeof cases / sizeof cases[0]; i++)
    {
      struct esbx_error e = { .kind = cases[i].kind, .status = cases[i].status };

      assert_int_equal (esbx_http_status_of_error (&e), cases[i].http);
    }
}

static void
test_kind_of_errno (void **state)
{
  static const struct
  {
    int status;
    enum esbx_error_kind kind;
  } cases[] = {
    { 0, ESBX_ERR_FAILED },         { EIO, ESBX_ERR_FAILED },
    { ENOENT, ESBX_ERR_NOT_FOUND }, { ESRCH, ESBX_ERR_NOT_FOUND },
    { EEXIST, ESBX_ERR_EXISTS },    { ENOTEMPTY, ESBX_ERR_EXISTS },
    { EPERM, ESBX_ERR_FORBIDDEN },  { EACCES, ESBX_ERR_FORBIDDEN },
    { ELOOP, ESBX_ERR_FORBIDDEN },  { EXDEV, ESBX_ERR_FORBIDDEN },
    { EBUSY, ESBX_ERR_BUSY },       { E2BIG, ESBX_ERR_TOO_LARGE },
    { EFBIG, ESBX_ERR_TOO_LARGE },  { ENAMETOOLONG, ESBX_ERR_TOO_LARGE },
  };
  size_t i;

  (void)state;
  for (i = 0; i < sizeof cases / sizeof cases[0]; i++)
    {
      esbx_error_t err = NULL;

      assert_int_equal (esbx_make_error (&err, cases[i].status, "x"), -1);
      assert_int_equal (err->kind, cases[i].kind);
      assert_int_equal (err->status, cases[i].status);
      esbx_error_free (&err);
    }
}

/* An error sent by a child is the same error on the parent's side: kind,
   errno and message.  */
static void
test_error_send (void **state)
{
  esbx_error_t err = NULL, remote = NULL, rerr = NULL;
  struct esbx_sync_msg msg;
  int p[2];

  (void)state;
  assert_int_equal (pipe (p), 0);
  esbx_make_error_kind (&err, ESBX_ERR_EXEC_NOT_FOUND, ENOENT, "exec `%s`", "nope");
  assert_int_equal (esbx_error_send (p[1], &err), 0);
  close (p[1]);
  assert_int_equal (esbx_sync_recv (p[0], &msg, &remote, &rerr), 1);
  assert_int_equal (msg.type, ESBX_SYNC_ERROR);
  assert_null (rerr);
  assert_non_null (remote);
  assert_int_equal (remote->kind, ESBX_ERR_EXEC_NOT_FOUND);
  assert_int_equal (remote->status, ENOENT);
  assert_string_equal (remote->msg, err->msg);
  assert_int_equal (esbx_error_exit_status (remote), 127);
  esbx_sync_msg_clear (&msg);
  assert_int_equal (esbx_sync_recv (p[0], &msg, &remote, &rerr), 0);
  close (p[0]);
  esbx_error_free (&err);
  esbx_error_free (&remote);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_exit_status),
    cmocka_unit_test (test_http_status),
    cmocka_unit_test (test_kind_of_errno),
    cmocka_unit_test (test_error_send),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
