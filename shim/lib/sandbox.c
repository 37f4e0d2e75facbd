#include "sandbox.h"

int
esbx_sandbox_discard (esbx_store_t *store, const char *name, esbx_error_t *err)
{
  return esbx_session_discard (store, name, err);
}

int
esbx_sandbox_gc (esbx_store_t *store, FILE *report, esbx_error_t *err)
{
  return esbx_gc (store, report, err);
}

json_t *
esbx_sandbox_status (esbx_store_t *store, const char *name)
{
  json_t *j = json_new (JSON_OBJECT);

  json_set (j, "holder", json_new (JSON_NULL));
  return j;
}
