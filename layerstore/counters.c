/* Store counters: ROOT/counters.json, {"publishes": N, "conflicts": M},
   counted by publish itself whatever front end asked for it (the CLI, the
   gateway, a publish container), so that esbxd's /metrics reads them from
   the store, not from its own memory.  Updated under ROOT/counters.lock;
   replaced whole (esbx_replace_file_at) so that a reader never sees half a
   file.  */
#include "internal.h"
#include "fs.h"
#include "log.h"
#include "utils.h"

#include <inttypes.h>

#define COUNTERS "counters.json"

static void
read_counters (esbx_store_t *store, int64_t *ok, int64_t *conflicts)
{
  _cleanup_json_ json_t *j = NULL;
  esbx_error_t e = NULL;

  *ok = *conflicts = 0;
  if (!esbx_exists_at (store->rootfd, COUNTERS))
    return;
  j = json_parse_file_at (store->rootfd, COUNTERS, &e);
  if (j == NULL)
    {
      /* A counter must not stop a publish: start again from 0.  */
      esbx_warn ("%s/%s: %s; counting again from 0", store->root, COUNTERS, e->msg);
      esbx_error_free (&e);
      return;
    }
  if (!json_get_int (j, "publishes", ok) || *ok < 0)
    *ok = 0;
  if (!json_get_int (j, "conflicts", conflicts) || *conflicts < 0)
    *conflicts = 0;
}

void
esbx_counters_publish (esbx_store_t *store, bool conflict)
{
  _cleanup_close_ int lock = -1;
  _cleanup_json_ json_t *j = json_new (JSON_OBJECT);
  _cleanup_free_ char *text = NULL;
  esbx_error_t e = NULL;
  int64_t ok, conflicts;
  size_t len;

  lock = esbx_lock_at (store->rootfd, "counters.lock", true, true, &e);
  if (lock >= 0)
    {
      read_counters (store, &ok, &conflicts);
      json_set_int (j, "publishes", conflict ? ok : ok + 1);
      json_set_int (j, "conflicts", conflict ? conflicts + 1 : conflicts);
      text = json_serialize (j, true, &len);
      if (esbx_replace_file_at (store->rootfd, COUNTERS, text, len, 0644, &e) == 0)
        return;
    }
  esbx_warn ("publish counters of `%s`: %s", store->root, e->msg);
  esbx_error_free (&e);
}

int
esbx_counters_publishes (esbx_store_t *store, uint64_t *ok, uint64_t *conflicts, esbx_error_t *err)
{
  int64_t o, c;

  (void)err;
  read_counters (store, &o, &c);
  *ok = (uint64_t)o;
  *conflicts = (uint64_t)c;
  return 0;
}
