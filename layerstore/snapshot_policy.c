/* When a shared project's sessions push snapshots by themselves
 * (docs/SCALE-OUT.md, "Sessions that outlive their host"), kept in
 * ROOT/projects/P/snapshot-push.json: before every publish attempt, every
 * N seconds (esbxd), and the snapshot taken at `--on-expiry snapshot`.
 * Who pushes is the shim's business (sandbox_snapshot.c).  */
#include "internal.h"
#include "fs.h"
#include "text.h"
#include "utils.h"

#include <string.h>

#define POLICY_FILE "snapshot-push.json"

int
esbx_snapshot_policy_get (esbx_store_t *store, const char *project, struct esbx_snapshot_policy *p,
                          esbx_error_t *err)
{
  _cleanup_free_ char *rel = esbx_project_file (project, POLICY_FILE);
  _cleanup_json_ json_t *j = NULL;

  memset (p, 0, sizeof *p);
  if (!esbx_exists_at (store->rootfd, rel))
    return 0;
  j = json_parse_file_at (store->rootfd, rel, err);
  if (j == NULL)
    return esbx_error_wrap (err, "project `%s`: snapshot pushes", project);
  p->on_publish = json_get_bool (j, "on_publish", false);
  p->on_expiry = json_get_bool (j, "on_expiry", false);
  if (!json_get_int (j, "every", &p->every) || p->every < 0)
    p->every = 0;
  return 0;
}

int
esbx_snapshot_policy_set (esbx_store_t *store, const char *project,
                          const struct esbx_snapshot_policy *p, esbx_error_t *err)
{
  _cleanup_free_ char *dir = esbx_project_rel (project);
  _cleanup_json_ json_t *j = json_new (JSON_OBJECT);
  _cleanup_free_ char *text = NULL;
  _cleanup_close_ int dfd = -1;
  size_t len;

  if (esbx_check_name ("project", project, err) < 0)
    return -1;
  if (p->every < 0)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "--every cannot be negative");
  if (!esbx_project_exists (store, project))
    return esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0, "project `%s` does not exist",
                                 project);
  if ((p->on_publish || p->on_expiry || p->every > 0) && !esbx_project_is_shared (store, project))
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "project `%s` is not shared: snapshots are pushed to its "
                                 "remote (`esbx project push %s` first)",
                                 project, project);
  json_set (j, "on_publish", json_new_bool (p->on_publish));
  json_set_int (j, "every", p->every);
  json_set (j, "on_expiry", json_new_bool (p->on_expiry));
  dfd = esbx_open_dir_at (store->rootfd, dir, err);
  if (dfd < 0)
    return -1;
  text = json_serialize (j, true, &len);
  return esbx_write_file_atomic_at (dfd, POLICY_FILE, text, len, 0644, err);
}
