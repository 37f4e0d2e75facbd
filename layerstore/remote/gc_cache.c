/* esbx gc --cache: on a host, a shared project (projects/P/remote) is a
   cache of the registry and etcd (docs/SCALE-OUT.md).  Its whole local
   copy goes when nothing on this host needs it: no session (running or
   not), no snapshot, no trash entry of it.  Local projects are never
   touched.  `session create P` and `project pull P` fetch it again.  */
#include "internal.h"
#include "fs.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* Whether a trash entry holds work of PROJECT; true when one cannot be
   read (keep what it might need).  */
static bool
trash_uses (esbx_store_t *store, const char *project)
{
  _cleanup_json_ json_t *entries = NULL;
  const json_t *e;
  esbx_error_t err = NULL;
  size_t i;

  entries = esbx_trash_list (store, &err);
  if (entries == NULL)
    {
      esbx_error_free (&err);
      return true;
    }
  json_array_foreach (entries, i, e)
    {
      const char *p = json_get_string (e, "project");
      if (p == NULL || strcmp (p, project) == 0)
        return true;
    }
  return false;
}

/* Whether PROJECT has a snapshot here; true when unknown.  */
static bool
has_snapshots (esbx_store_t *store, const char *project)
{
  _cleanup_json_ json_t *snaps = NULL;
  esbx_error_t err = NULL;

  snaps = esbx_snapshot_list (store, project, &err);
  if (snaps == NULL)
    {
      esbx_error_free (&err);
      return true;
    }
  return json_len (snaps) > 0;
}

/* 1: PROJECT's copy removed, 0: kept (in use or not shared).  Under the
   store's creation lock and the project's lock, as `project rm`: a
   session create racing with it fails (its base went) and can be run
   again, which pulls the project again.  */
static int
drop_one (esbx_store_t *store, const char *project, esbx_error_t *err)
{
  _cleanup_close_ int lock = -1;
  _cleanup_strv_ char **sessions = NULL;
  _cleanup_free_ char *rel = esbx_project_rel (project);
  _cleanup_free_ char *hex = esbx_random_hex (6);
  _cleanup_free_ char *grave = NULL;

  if (!esbx_project_exists (store, project) || !esbx_project_is_shared (store, project))
    return 0;
  lock = esbx_project_lock (store, project, err);
  if (lock < 0)
    return -1;
  sessions = esbx_session_list (store, project, err);
  if (sessions == NULL)
    return -1;
  if (sessions[0] || has_snapshots (store, project) || trash_uses (store, project))
    return 0;
  grave = xasprintf ("tmp/gc-cache-%s-%s", project, hex);
  if (renameat (store->rootfd, rel, store->rootfd, grave) < 0)
    return esbx_make_error (err, errno, "move `%s` to `%s`", rel, grave);
  fsync (store->rootfd);
  if (esbx_rm_rf_at (store->rootfd, grave, err) < 0)
    return -1;
  return 1;
}

int
esbx_gc_cache (esbx_store_t *store, FILE *report, esbx_error_t *err)
{
  _cleanup_strv_ char **projects = NULL;
  _cleanup_close_ int guard = -1;
  size_t i, failed = 0;
  esbx_error_t first = NULL;

  projects = esbx_list_dir_at (store->rootfd, "projects", err);
  if (projects == NULL)
    return esbx_error_wrap (err, "gc --cache");
  /* No session is being made meanwhile by a create that holds it.  */
  guard = esbx_store_creation_lock (store, true, err);
  if (guard < 0)
    return esbx_error_wrap (err, "gc --cache");
  for (i = 0; projects[i]; i++)
    {
      esbx_error_t e = NULL;
      int r = drop_one (store, projects[i], &e);

      if (r > 0 && report)
        fprintf (report, "removed the local copy of shared project `%s`\n", projects[i]);
      if (r < 0)
        {
          if (report)
            fprintf (report, "could not remove the copy of `%s`: %s\n", projects[i], e->msg);
          failed++;
          if (first == NULL)
            first = steal_pointer (&e);
          else
            esbx_error_free (&e);
        }
    }
  if (failed == 0)
    return 0;
  esbx_make_error (err, 0, "gc --cache: %zu shared project%s could not be removed; the first: %s",
                   failed, failed == 1 ? "" : "s", first->msg);
  esbx_error_free (&first);
  return -1;
}
