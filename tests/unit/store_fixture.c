#include "store_fixture.h"
#include "fs.h"

#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

esbx_store_t *store;
static char tmp[] = "/tmp/esbx-unit-store-XXXXXX";

int
fixture_setup (void **state)
{
  esbx_error_t err = NULL;

  (void)state;
  /* The tests write into sessions' merged views from the host, which a
     session in a user namespace refuses to host root: none here. */
  setenv ("ESBX_USERNS", "off", 0);
  if (mkdtemp (tmp) == NULL || esbx_store_open (tmp, &store, &err) < 0)
    return -1;
  return 0;
}

int
fixture_teardown (void **state)
{
  esbx_error_t err = NULL;

  (void)state;
  esbx_store_close (store);
  if (esbx_rm_rf_at (AT_FDCWD, tmp, &err) < 0)
    esbx_error_free (&err);
  return 0;
}

void
fixture_ok (int r, esbx_error_t *err)
{
  if (r < 0)
    fail_msg ("%s", (*err)->msg);
}
