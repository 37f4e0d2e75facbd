/* A session's overlay: the project's layers up to its base (and its frozen
   layers, frozen.c) under its upper, mounted on ROOT/sessions/S/merged.  */
#include "internal.h"
#include "fs.h"
#include "log.h"
#include "utils.h"

#include <string.h>

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

/* A session that asked for a user namespace (its record's "userns" is
   "auto"; records older than the key run without) gets a range and its
   layers idmapped; where the store's filesystem cannot idmap them, the
   view is mounted as before, with a warning and the reason recorded for
   `session inspect`.  */
static int
mount_view (esbx_store_t *store, const struct esbx_session *s, char **lowers, size_t n,
            const char *upper, const char *work, const char *merged, const char *folded,
            esbx_error_t *err)
{
  const char *want = json_get_string (s->record, "userns");
  struct esbx_userns u;
  struct esbx_idmap map;
  _cleanup_close_ int nsfd = -1;
  int ret;

  if (want == NULL || strcmp (want, "auto") != 0)
    {
      if (esbx_userns_record_off (store, s->name, NULL, err) < 0)
        return -1;
      return esbx_mount_stack (lowers, n, upper, work, merged, folded, NULL, err);
    }
  if (esbx_userns_claim (store, s->name, &u, err) < 0)
    return -1;
  nsfd = esbx_userns_open (u.uid, u.count, err);
  if (nsfd < 0)
    {
      esbx_userns_release (store, s->name);
      return -1;
    }
  map.userns_fd = nsfd;
  map.uid = u.uid;
  ret = esbx_mount_stack (lowers, n, upper, work, merged, folded, &map, err);
  if (ret == -2)
    {
      _cleanup_free_ char *reason = xstrdup ((*err)->msg);

      esbx_error_free (err);
      esbx_userns_release (store, s->name);
      esbx_warn ("session `%s`: no user namespace: %s; its commands run as root of the host",
                 s->name, reason);
      /* A folded bottom mounted idmapped before the failure is not ours
         any more.  */
      if (esbx_unmount (folded, true, err) < 0
          || esbx_userns_record_off (store, s->name, reason, err) < 0)
        return -1;
      return esbx_mount_stack (lowers, n, upper, work, merged, folded, NULL, err);
    }
  if (ret < 0)
    esbx_userns_release (store, s->name);
  esbx_userns_clear (&u);
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
      ret = mount_view (store, s, lowers, n, upper, work, merged, folded, err);
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
  esbx_userns_release (store, name);
  return 0;
}

int
esbx_session_unmount (esbx_store_t *store, const char *name, esbx_error_t *err)
{
  return esbx_session_unmount_views (store, name, false, err);
}
