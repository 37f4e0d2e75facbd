/* Frozen layers (README, "Snapshots and forks"): what a session wrote up
 * to a snapshot, kept as a private, read-only layer of its project:
 *
 *   projects/P/frozen/ID/diff/   an upper as it was: whiteouts (0/0
 *                                devices) and opaque directories included
 *
 * A snapshot renames the session's upper here and gives the session a
 * fresh empty upper over it (snapshot.c), so that it costs a rename
 * whatever the agent wrote; the session, the snapshot and every session
 * made from the snapshot name the layers they stack over their base
 * ("frozen": [ID, ...], bottom first) and share them.  A layer that no
 * session, snapshot or trash entry names is removed by gc.  Nothing writes
 * into a frozen layer once it is named.  */
#include "internal.h"
#include "fs.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

int
esbx_frozen_make (esbx_store_t *store, const char *project, const char *session, int model,
                  char **id, esbx_error_t *err)
{
  _cleanup_free_ char *dir = esbx_project_file (project, "frozen");
  _cleanup_free_ char *hex = esbx_random_hex (8), *rel = NULL;
  _cleanup_close_ int fd = -1;
  struct stat st;

  if (fstat (model, &st) < 0)
    return esbx_make_error (err, errno, "session `%s`: stat its upper", session);
  if (mkdirat (store->rootfd, dir, 0755) < 0 && errno != EEXIST)
    return esbx_make_error (err, errno, "mkdir `%s`", dir);
  rel = esbx_frozen_rel (project, hex);
  /* Unnamed until the session's record names it: the caller holds the
     project lock, which gc takes before it removes unnamed ones.  */
  if (mkdirat (store->rootfd, rel, 0755) < 0)
    return esbx_make_error (err, errno, "mkdir `%s`", rel);
  fd = esbx_open_dir_at (store->rootfd, rel, err);
  if (fd < 0)
    return -1;
  if (mkdirat (fd, "diff", st.st_mode & 07777) < 0)
    return esbx_make_error (err, errno, "mkdir `%s/diff`", rel);
  /* The empty one becomes the session's upper: its root looks as the old
     one did (the root of the merged view is the upper's).  */
  if (fchownat (fd, "diff", st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW) < 0
      || fchmodat (fd, "diff", st.st_mode & 07777, 0) < 0)
    return esbx_make_error (err, errno, "`%s/diff`", rel);
  *id = steal_pointer (&hex);
  return 0;
}

static void
add_ids (struct strv *used, const json_t *record, bool *unknown)
{
  _cleanup_strv_ char **ids = NULL;
  char **p;

  if (record == NULL || esbx_frozen_ids (record, &ids) < 0)
    {
      *unknown = true;
      return;
    }
  for (p = ids; p && *p; p++)
    strv_push (used, xstrdup (*p));
}

/* The ids PROJECT's sessions, snapshots and trash entries name; *UNKNOWN
   when one of them could not be read (then any may be used).  */
static int
used_ids (esbx_store_t *store, const char *project, struct strv *used, bool *unknown,
          esbx_error_t *err)
{
  _cleanup_sessions_ struct esbx_sessions it = { 0 };
  _cleanup_free_ char *dir = esbx_project_file (project, "snapshots");
  _cleanup_strv_ char **snaps = NULL;
  struct esbx_session *s;
  size_t i;

  if (esbx_sessions_open (store, project, &it, err) < 0)
    return -1;
  while ((s = esbx_sessions_next (&it)))
    for (i = 0; s->frozen && s->frozen[i]; i++)
      strv_push (used, xstrdup (s->frozen[i]));
  if (it.unreadable > 0)
    *unknown = true;
  if (esbx_exists_at (store->rootfd, dir))
    {
      snaps = esbx_list_dir_at (store->rootfd, dir, err);
      if (snaps == NULL)
        return -1;
      for (i = 0; snaps[i]; i++)
        {
          esbx_error_t e = NULL;
          _cleanup_json_ json_t *j = esbx_snapshot_load_record (store, project, snaps[i], &e);

          esbx_error_free (&e);
          add_ids (used, j, unknown);
        }
    }
  return esbx_trash_frozen_users (store, project, used, unknown, err);
}

int
esbx_frozen_gc (esbx_store_t *store, const char *project, FILE *report, esbx_error_t *err)
{
  _cleanup_free_ char *dir = esbx_project_file (project, "frozen");
  _cleanup_strv_ char **ids = NULL;
  struct strv used = { 0 };
  bool unknown = false;
  size_t i, k;
  int ret = 0;

  if (!esbx_exists_at (store->rootfd, dir))
    return 0;
  ids = esbx_list_dir_at (store->rootfd, dir, err);
  if (ids == NULL)
    return -1;
  if (ids[0] == NULL)
    return 0;
  if (used_ids (store, project, &used, &unknown, err) < 0)
    {
      strv_free (&used);
      return -1;
    }
  for (i = 0; ids[i] && !unknown; i++)
    {
      _cleanup_free_ char *rel = esbx_frozen_rel (project, ids[i]);
      bool in_use = false;

      for (k = 0; k < used.n && !in_use; k++)
        in_use = strcmp (used.v[k], ids[i]) == 0;
      if (in_use)
        continue;
      if (esbx_rm_rf_at (store->rootfd, rel, err) < 0)
        {
          ret = -1;
          break;
        }
      if (report)
        fprintf (report, "removed %s, which nothing uses\n", rel);
    }
  strv_free (&used);
  return ret;
}
