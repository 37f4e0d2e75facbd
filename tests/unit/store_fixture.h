/* A throw-away store for the unit tests that need one: fixture_setup
   opens it in a fresh temporary directory, fixture_teardown removes it,
   and fixture_ok fails the test with the error's message.  */
#ifndef ESBX_TEST_STORE_FIXTURE_H
#define ESBX_TEST_STORE_FIXTURE_H

#include "layerstore.h"

extern esbx_store_t *store;

int fixture_setup (void **state);
int fixture_teardown (void **state);
void fixture_ok (int r, esbx_error_t *err);

#endif
