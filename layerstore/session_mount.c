/* A session's overlay: the project's layers up to its base (and its frozen
   layers, frozen.c) under its upper, mounted on ROOT/sessions/S/merged.  */
#include "internal.h"
#include "fs.h"
#include "utils.h"

int
esbx_session_mount (esbx_store_t *store, const char *name, esbx_error_t *err)
{
  struct esbx_session *s = NULL;
  int ret;

  if (esbx_session_load (store, name, &s, err) < 0)
    return -1;
  ret = esbx_session_mount_record (store, s, err);
  esbx_session_free (s);
  return ret;
}

int
esbx_session_mount_record (esbx_store_t *store, const struct esbx_session *s, esbx_error_t *err)
{
  _cleanup_free_ char *dir = esbx_session_dir (store, s->name);
  _cleanup_free_ char *merged = NULL, *upper = NULL, *work = NULL;
  _cleanup_strv_ char **lowers = NULL;
  size_t n;
  int ret;

  merged = xasprintf ("%s/merged", dir);
  if (esbx_is_mountpoint (merged))
    return 0;
  if (s->disk > 0)
    {
      /* On its own disk: overlayfs wants the upper and work directories
         on one mount, the disk's, not the bind mount at DIR/upper.  */
      _cleanup_free_ char *disk = esbx_session_disk_dir (store, s);

      if (esbx_session_disk_mount (store, s, err) < 0)
        return -1;
      upper = xasprintf ("%s/upper", disk);
      work = xasprintf ("%s/work", disk);
    }
  else
    {
      upper = xasprintf ("%s/upper", dir);
      work = xasprintf ("%s/work", dir);
    }
  ret = esbx_stack_lowers (store, s->project, s->base, NULL, &lowers, &n, err);
  if (ret == 0 && esbx_session_has_frozen (s))
    {
      struct strv v = { .v = steal_pointer (&lowers), .n = n, .cap = n + 1 };
      ret = esbx_session_frozen_lowers (store, s, &v, err);
      lowers = v.v;
      n = v.n;
    }
  if (ret == 0)
    {
      _cleanup_free_ char *folded = xasprintf ("%s/lower", dir);
      ret = esbx_mount_stack (lowers, n, upper, work, merged, folded, err);
    }
  if (ret < 0)
    esbx_error_wrap (err, "session `%s`", s->name);
  return ret;
}

bool
esbx_session_is_mounted (esbx_store_t *store, const char *name)
{
  _cleanup_free_ char *merged = esbx_session_file (name, "merged");
  return esbx_is_mountpoint_at (store->rootfd, merged);
}

/* Unmount the merged view, then the folded bottom layers under it.  */
int
esbx_session_unmount_views (esbx_store_t *store, const char *name, bool lazy, esbx_error_t *err)
{
  _cleanup_free_ char *dir = esbx_session_dir (store, name);
  _cleanup_free_ char *merged = xasprintf ("%s/merged", dir);
  _cleanup_free_ char *folded = xasprintf ("%s/lower", dir);

  if (esbx_unmount (merged, lazy, err) < 0 || esbx_unmount (folded, lazy, err) < 0)
    return esbx_error_wrap (err, "session `%s`", name);
  return 0;
}

int
esbx_session_unmount (esbx_store_t *store, const char *name, esbx_error_t *err)
{
  return esbx_session_unmount_views (store, name, false, err);
}
