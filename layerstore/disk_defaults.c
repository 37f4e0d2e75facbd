/* The disk of new sessions that name none (README, "A session's disk"):
 * a fork (or a session made from a snapshot) takes the size its session
 * had; else the project's default, in
 * ROOT/projects/P/disk.json ({"disk": "10G"}); else the store's, `disk =
 * 20M` in ROOT/defaults.conf (session_defaults.c).  None of them: no disk
 * of its own, as before.  The session's record keeps the size it
 * got, so a later change of a default leaves existing sessions alone.  */
#include "internal.h"
#include "conffile.h"
#include "fs.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#define PROJECT_FILE "disk.json"

/* PROJECT's default in *BYTES (0: none).  */
static int
project_default (esbx_store_t *store, const char *project, int64_t *bytes, esbx_error_t *err)
{
  _cleanup_free_ char *rel = esbx_project_file (project, "%s", PROJECT_FILE);
  _cleanup_json_ json_t *j = NULL;
  const char *v;

  *bytes = 0;
  if (!esbx_exists_at (store->rootfd, rel))
    return 0;
  j = json_parse_file_at (store->rootfd, rel, err);
  if (j == NULL)
    return esbx_error_wrap (err, "project `%s`: disk default", project);
  v = json_get_string (j, "disk");
  if (v && esbx_disk_size_parse (v, bytes, err) < 0)
    return esbx_error_wrap (err, "project `%s`: disk default", project);
  return 0;
}

static int
disk_key (const char *key, const char *value, const char *where, void *data, esbx_error_t *err)
{
  if (strcmp (key, "disk") != 0)
    return 0;
  if (esbx_disk_size_parse (value, data, err) < 0)
    return esbx_error_wrap (err, "%s", where);
  return 0;
}

int
esbx_store_disk_default (esbx_store_t *store, int64_t *bytes, esbx_error_t *err)
{
  _cleanup_free_ char *path = xasprintf ("%s/" ESBX_DEFAULTS_CONF, store->root);

  *bytes = 0;
  if (esbx_conf_read (path, false, disk_key, bytes, err) < 0)
    return esbx_error_wrap (err, "the store's defaults");
  return 0;
}

int
esbx_disk_default (esbx_store_t *store, const char *project, int64_t *bytes, esbx_error_t *err)
{
  *bytes = 0;
  if (esbx_project_exists (store, project) && project_default (store, project, bytes, err) < 0)
    return -1;
  if (*bytes > 0 || *bytes == ESBX_DISK_NONE)
    return 0;
  return esbx_store_disk_default (store, bytes, err);
}

int
esbx_project_disk_set (esbx_store_t *store, const char *project, const char *size,
                       esbx_error_t *err)
{
  _cleanup_free_ char *dir = esbx_project_rel (project), *text = NULL, *shown = NULL;
  _cleanup_json_ json_t *j = json_new (JSON_OBJECT);
  _cleanup_close_ int dfd = -1;
  int64_t bytes;
  size_t len;

  if (esbx_disk_size_parse (size, &bytes, err) < 0)
    return esbx_error_wrap (err, "project `%s`", project);
  if (esbx_project_check (store, project, err) < 0)
    return -1;
  dfd = esbx_open_dir_at (store->rootfd, dir, err);
  if (dfd < 0)
    return -1;
  /* "none" is a default too: it overrides the store's.  */
  shown = esbx_disk_size_string (bytes);
  json_set_string (j, "disk", shown);
  text = json_serialize (j, true, &len);
  return esbx_write_file_atomic_at (dfd, PROJECT_FILE, text, len, 0644, err);
}

int
esbx_project_disk_clear (esbx_store_t *store, const char *project, esbx_error_t *err)
{
  _cleanup_free_ char *rel = esbx_project_file (project, "%s", PROJECT_FILE);

  if (esbx_project_check (store, project, err) < 0)
    return -1;
  if (unlinkat (store->rootfd, rel, 0) < 0 && errno != ENOENT)
    return esbx_make_error (err, errno, "project `%s`: remove `%s`", project, PROJECT_FILE);
  return 0;
}

json_t *
esbx_project_disk_get (esbx_store_t *store, const char *project, esbx_error_t *err)
{
  int64_t mine = 0, store_default = 0;
  json_t *j;

  if (esbx_project_check (store, project, err) < 0
      || project_default (store, project, &mine, err) < 0
      || esbx_store_disk_default (store, &store_default, err) < 0)
    return NULL;
  j = json_new (JSON_OBJECT);
  if (mine != 0)
    {
      _cleanup_free_ char *shown = esbx_disk_size_string (mine);
      json_set_string (j, "disk", shown);
    }
  else
    json_set (j, "disk", json_new (JSON_NULL));
  if (store_default > 0)
    {
      _cleanup_free_ char *shown = esbx_disk_size_string (store_default);
      json_set_string (j, "store", shown);
    }
  else
    json_set (j, "store", json_new (JSON_NULL));
  return j;
}

int
esbx_disk_defaults_apply (esbx_store_t *store, const char *project, struct esbx_session_opts *o,
                          esbx_error_t *err)
{
  /* A fork, or a session made from a snapshot: the size its session had.  */
  if (o->disk == 0 && o->snapshot && esbx_name_valid (o->snapshot)
      && esbx_project_exists (store, project))
    {
      _cleanup_json_ json_t *rec = esbx_snapshot_load_record (store, project, o->snapshot, NULL);
      int64_t v;

      if (rec && json_get_int (rec, "disk", &v) && v > 0)
        o->disk = v;
    }
  /* No project: its own error comes later.  */
  if (o->disk == 0 && esbx_project_exists (store, project)
      && esbx_disk_default (store, project, &o->disk, err) < 0)
    return esbx_error_wrap (err, "session create");
  if (o->disk > 0 && (o->disk < (int64_t)ESBX_DISK_MIN || o->disk > (int64_t)ESBX_DISK_MAX))
    {
      _cleanup_free_ char *shown = esbx_disk_size_string (o->disk);
      return esbx_disk_size_parse (shown, &o->disk, err);
    }
  if (o->disk > 0 && esbx_disk_check_host (o->disk, err) < 0)
    return esbx_error_wrap (err, "session create");
  return 0;
}
