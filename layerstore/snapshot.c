/* Snapshots (README, "Snapshots and forks"): a session's private state
 * frozen as ROOT/projects/P/snapshots/SNAP/record.json, which names the
 * frozen layers (frozen.c) that every session made from it stacks over
 * the session's base: ten forks share one copy and cost only their own
 * changes.
 *
 * Taking one moves the session's upper into a new frozen layer and gives
 * the session a fresh empty upper over it: a rename, whatever the agent
 * wrote.  When the upper cannot be renamed it is copied as it is
 * (whiteouts, 0/0 devices, and opaque directories included; holes kept,
 * reflinks where the filesystem has them): a session on a disk of its own
 * (another filesystem), a git project's session (its repository lives in
 * its upper), or one whose view something still uses (a process with a
 * file or its directory in it, another mount of it).
 *
 * A snapshot of a store from before frozen layers kept its copy in
 * SNAP/diff/ and named the snapshot under it (its parent); those still
 * mount, and a session made from one still snapshots that way.  So do
 * the sessions of a shared project: a snapshot pushed to the remote is
 * one diff on its parent's (remote/snapshot_push.c).
 *
 * A snapshot is written under projects/P/tmp and renamed into place: a
 * crash leaves a temp directory for gc, never a half snapshot.  */
#include "internal.h"
#include "copy.h"
#include "failpoint.h"
#include "fs.h"
#include "log.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/mount.h>
#include <sys/xattr.h>
#include <time.h>

#define OPAQUE_XATTR "trusted.overlay.opaque"
/* Frozen layers one session may stack (each is a lower layer of it).  */
#define MAX_FROZEN 64

/* ---- copying an upper directory as it is ------------------------------- */

static int copy_tree (int src, int dst, const char *rel, esbx_error_t *err);

static void
copy_meta (int dst, const char *name, const struct stat *st)
{
  struct timespec ts[2] = { st->st_atim, st->st_mtim };

  fchownat (dst, name, st->st_uid, st->st_gid, AT_SYMLINK_NOFOLLOW);
  if (!S_ISLNK (st->st_mode))
    fchmodat (dst, name, st->st_mode & 07777, 0);
  utimensat (dst, name, ts, AT_SYMLINK_NOFOLLOW);
}

static int
set_opaque (int dst, const char *name, esbx_error_t *err)
{
  _cleanup_close_ int fd
      = TEMP_FAILURE_RETRY (openat (dst, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));

  if (fd < 0 || fsetxattr (fd, OPAQUE_XATTR, "y", 1, 0) < 0)
    return esbx_make_error (err, errno, "mark `%s` opaque", name);
  return 0;
}

static int
copy_file (int src, int dst, const char *name, const char *rel, esbx_error_t *err)
{
  _cleanup_close_ int in = esbx_open_regular_at (src, name, err);
  _cleanup_close_ int out = -1;

  if (in < 0)
    return esbx_error_wrap (err, "copy `/%s`", rel);
  out = TEMP_FAILURE_RETRY (
      openat (dst, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (out < 0)
    return esbx_make_error (err, errno, "create `/%s`", rel);
  /* Holes stay holes: a session's 2 GiB sparse file costs a snapshot what
     it costs the session.  */
  if (esbx_copy_file_data (in, out, NULL, NULL, NULL, err) < 0)
    return esbx_error_wrap (err, "copy `/%s`", rel);
  if (fsync (out) < 0)
    return esbx_make_error (err, errno, "fsync `/%s`", rel);
  return 0;
}

/* One entry NAME of SRC into DST.  */
static int
copy_entry (int src, int dst, const char *name, const char *rel, esbx_error_t *err)
{
  struct stat st;

  if (fstatat (src, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return errno == ENOENT ? 0 : esbx_make_error (err, errno, "stat `/%s`", rel);
  if (esbx_is_whiteout (&st))
    {
      if (mknodat (dst, name, S_IFCHR, makedev (0, 0)) < 0)
        return esbx_make_error (err, errno, "whiteout `/%s`", rel);
      return 0;
    }
  if (S_ISDIR (st.st_mode))
    {
      _cleanup_close_ int s = -1, d = -1;

      if (mkdirat (dst, name, 0700) < 0)
        return esbx_make_error (err, errno, "mkdir `/%s`", rel);
      if (esbx_is_opaque_at (src, name) && set_opaque (dst, name, err) < 0)
        return -1;
      s = TEMP_FAILURE_RETRY (openat (src, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      d = TEMP_FAILURE_RETRY (openat (dst, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (s < 0 || d < 0)
        return esbx_make_error (err, errno, "open `/%s`", rel);
      if (copy_tree (s, d, rel, err) < 0)
        return -1;
      if (fsync (d) < 0)
        return esbx_make_error (err, errno, "fsync `/%s`", rel);
    }
  else if (S_ISREG (st.st_mode))
    {
      if (copy_file (src, dst, name, rel, err) < 0)
        return -1;
    }
  else if (S_ISLNK (st.st_mode))
    {
      char buf[4097];
      ssize_t l = readlinkat (src, name, buf, sizeof buf - 1);

      if (l < 0)
        return esbx_make_error (err, errno, "readlink `/%s`", rel);
      buf[l] = '\0';
      if (symlinkat (buf, dst, name) < 0)
        return esbx_make_error (err, errno, "symlink `/%s`", rel);
    }
  else if (S_ISFIFO (st.st_mode))
    {
      if (mkfifoat (dst, name, st.st_mode & 07777) < 0)
        return esbx_make_error (err, errno, "mkfifo `/%s`", rel);
    }
  else
    return 0; /* sockets: never part of a change set either */
  copy_meta (dst, name, &st);
  return 0;
}

static int
copy_tree (int src, int dst, const char *rel, esbx_error_t *err)
{
  _cleanup_strv_ char **names = esbx_list_dir_at (src, ".", err);
  size_t i;

  if (names == NULL)
    return -1;
  for (i = 0; names[i]; i++)
    {
      _cleanup_free_ char *child = rel[0] ? xasprintf ("%s/%s", rel, names[i]) : xstrdup (names[i]);
      if (strlen (child) >= 4095)
        return esbx_make_error (err, ENAMETOOLONG, "`/%.64s...`", child);
      if (copy_entry (src, dst, names[i], child, err) < 0)
        return -1;
    }
  return 0;
}

int
esbx_upper_copy (int src, int dst, esbx_error_t *err)
{
  return copy_tree (src, dst, "", err);
}

/* ---- taking one ------------------------------------------------------- */

static bool
name_taken (esbx_store_t *store, const char *name)
{
  _cleanup_free_ char *project = NULL;
  esbx_error_t e = NULL;

  if (esbx_snapshot_find_project (store, name, &project, &e) == 0)
    return true;
  esbx_error_free (&e);
  return false;
}

/* Take down the host's view of S so that its upper can be renamed: its
   merged view unmounted (not when something has a file or a directory
   open in it: EBUSY), and no overlay left anywhere that writes into the
   upper (a container's bind of the view, the holder's workspace when the
   caller did not detach it: the view's superblock outlives our unmount,
   esbx_overlay_watch; esbx_overlay_upper_in_use when it was not mounted
   here).  *MOUNTED: the view was mounted and is mounted again by the
   caller after the move.  False when the upper must be copied instead.  */
static bool
take_down (esbx_store_t *store, const struct esbx_session *s, bool *mounted)
{
  _cleanup_free_ char *merged = esbx_session_merged (store, s->name);
  _cleanup_free_ char *upper = esbx_session_upper (store, s->name);
  _cleanup_close_ int watch = -1;
  esbx_error_t e = NULL;

  *mounted = esbx_is_mountpoint (merged);
  if (*mounted)
    watch = esbx_overlay_watch (merged);
  if (*mounted && umount2 (merged, UMOUNT_NOFOLLOW) < 0)
    {
      *mounted = false; /* still mounted, untouched */
      return false;
    }
  /* Watched: the view's superblock ended with our unmount, or lives on
     in another mount.  Not mounted here (or no watch): the probe.  */
  if (watch >= 0 ? esbx_overlay_watch_ended (watch)
                 : esbx_overlay_upper_in_use (upper, merged) == 0)
    return true;
  /* Another overlay still has it: the caller copies, over the same view
     as before.  */
  if (*mounted && esbx_session_mount_record (store, s, &e) < 0)
    {
      esbx_warn ("session `%s`: %s", s->name, e->msg);
      esbx_error_free (&e);
    }
  *mounted = false;
  return false;
}

/* The move (the caller holds the session and project locks, and the view
   is down): an empty frozen layer named in S's record first, then one
   RENAME_EXCHANGE swaps it with the upper.  Before the exchange the
   session stacks an empty layer under its full upper, after it the full
   layer under an empty upper: the same files at any crash.  *ID: the new
   layer, now the top of S's "frozen".  */
static int
freeze_upper (esbx_store_t *store, struct esbx_session *s, int sfd, char **id, esbx_error_t *err)
{
  _cleanup_close_ int ufd = esbx_open_dir_at (sfd, "upper", err);
  _cleanup_free_ char *rel = NULL, *diff = NULL, *text = NULL, *hex = esbx_random_hex (6);
  _cleanup_free_ char *tmpname = xasprintf (".session.json.frozen-%s", hex);
  _cleanup_json_ json_t *before = NULL;
  size_t len;
  json_t *arr;

  if (ufd < 0 || esbx_frozen_make (store, s->project, s->name, ufd, id, err) < 0)
    return -1;
  rel = esbx_frozen_rel (s->project, *id);
  diff = xasprintf ("%s/diff", rel);
  before = json_copy (s->record);
  arr = json_get (s->record, "frozen");
  if (arr == NULL || arr->type != JSON_ARRAY)
    {
      arr = json_new (JSON_ARRAY);
      json_set (s->record, "frozen", arr);
    }
  json_append (arr, json_new_string (*id));
  /* The record's data is durable before its new name, and its name
     before the exchange: the journal commits them in order, with the
     snapshot's install, at the caller's one fsync of snapshots/.  */
  text = json_serialize (s->record, true, &len);
  if (esbx_write_new_file_at (sfd, tmpname, text, len, 0644, err) < 0)
    return -1;
  if (renameat (sfd, tmpname, sfd, "session.json") < 0)
    {
      int saved = errno;
      unlinkat (sfd, tmpname, 0);
      return esbx_make_error (err, saved, "session `%s`: write its record", s->name);
    }
  if (renameat2 (sfd, "upper", store->rootfd, diff, RENAME_EXCHANGE) < 0)
    {
      esbx_error_t e = NULL;
      int saved = errno;

      if (esbx_session_save (store, s->name, before, &e) < 0)
        esbx_error_free (&e);
      return esbx_make_error (err, saved, "move the upper to `%s`", rel);
    }
  return 0;
}

/* The frozen layers of snapshot NAME of S, as its record names them.  */
static json_t *
frozen_json (char *const *ids, const char *extra)
{
  json_t *a = json_new (JSON_ARRAY);

  for (; ids && *ids; ids++)
    json_append (a, json_new_string (*ids));
  if (extra)
    json_append (a, json_new_string (extra));
  return a;
}

int
esbx_snapshot_create (esbx_store_t *store, const char *session, const char *name, unsigned flags,
                      char **out, bool *moved, esbx_error_t *err)
{
  struct esbx_session *s = NULL;
  _cleanup_free_ char *snap = NULL, *tmp = NULL, *dest = NULL, *dir = NULL, *text = NULL;
  _cleanup_free_ char *hex = esbx_random_hex (8), *now = esbx_rfc3339_now (), *id = NULL;
  _cleanup_close_ int tfd = -1, sfd = -1, ufd = -1, dfd = -1, slock = -1, plock = -1;
  _cleanup_json_ json_t *rec = NULL;
  unsigned long long bytes = 0;
  bool legacy, move = false, remount = false, have_bytes = false;
  size_t len;
  int ret = -1;

  if (moved)
    *moved = false;
  if (name && esbx_check_name ("snapshot", name, err) < 0)
    return -1;
  sfd = esbx_session_open_dir (store, session, err);
  if (sfd < 0 || esbx_session_load_at (sfd, session, &s, err) < 0)
    return -1;
  if (name)
    snap = xstrdup (name);
  else
    {
      _cleanup_free_ char *h = esbx_random_hex (4);
      snap = xasprintf ("%.110s-snap-%s", session, h);
    }
  if (name_taken (store, snap))
    {
      esbx_make_error (err, EEXIST, "snapshot `%s`", snap);
      goto out;
    }
  /* Made from a snapshot of a store from before frozen layers, or of a
     shared project (its snapshots go to the remote as one diff each, on
     its parent's: snapshot_push.c): its snapshots are copies with
     parents, as they were.  */
  legacy
      = !(s->frozen && s->frozen[0]) && (s->snapshot || esbx_project_is_shared (store, s->project));
  if (!legacy && strv_len (s->frozen) + 1 >= MAX_FROZEN)
    {
      esbx_make_error (err, 0, "%zu frozen layers under it: publish it, or fork a fresh session",
                       strv_len (s->frozen));
      goto out;
    }
  dir = esbx_project_file (s->project, "snapshots");
  if (mkdirat (store->rootfd, dir, 0755) < 0 && errno != EEXIST)
    {
      esbx_make_error (err, errno, "mkdir `%s`", dir);
      goto out;
    }
  free (dir);
  dir = esbx_project_file (s->project, "tmp");
  if (mkdirat (store->rootfd, dir, 0700) < 0 && errno != EEXIST)
    {
      esbx_make_error (err, errno, "mkdir `%s`", dir);
      goto out;
    }
  /* Locked: gc leaves it alone while we work, and removes it after a
     crash.  */
  tmp = esbx_project_file (s->project, "tmp/snapshot-%s", hex);
  tfd = esbx_mkdir_locked (store, tmp, err);
  if (tfd < 0)
    goto out;
  if (esbx_session_disk_mount (store, s, err) < 0)
    goto out;
  /* The move: a session on its own disk has its upper on another
     filesystem, which no rename crosses; it is copied.  So is a git
     project's session: its repository (.git) is read and written in its
     upper (layerstore/git), which must keep it.  */
  if (!legacy && s->disk <= 0 && !(flags & ESBX_SNAPSHOT_COPY)
      && !esbx_project_is_git (store, s->project))
    {
      slock = esbx_session_lock (store, s->name, err);
      if (slock < 0)
        goto out;
      move = take_down (store, s, &remount);
    }
  if (move)
    {
      plock = esbx_project_lock (store, s->project, err);
      if (plock < 0 || freeze_upper (store, s, sfd, &id, err) < 0)
        goto out;
    }
  else
    {
      ufd = esbx_open_dir_at (sfd, "upper", err);
      if (ufd < 0 || mkdirat (tfd, "diff", 0755) < 0
          || (dfd = esbx_open_dir_at (tfd, "diff", err)) < 0)
        {
          if (ufd >= 0 && dfd < 0 && errno)
            esbx_make_error (err, errno, "mkdir `%s/diff`", tmp);
          goto out;
        }
      /* The upper's root may be opaque (a session that emptied `/`).  */
      if (esbx_is_opaque_at (ufd, ".") && fsetxattr (dfd, OPAQUE_XATTR, "y", 1, 0) < 0)
        {
          esbx_make_error (err, errno, "mark `%s/diff` opaque", tmp);
          goto out;
        }
      if (copy_tree (ufd, dfd, "", err) < 0 || fsync (dfd) < 0)
        {
          if (err && *err == NULL)
            esbx_make_error (err, errno, "fsync `%s/diff`", tmp);
          goto out;
        }
      have_bytes = esbx_du_at (dfd, ".", &bytes, NULL) == 0;
    }
  esbx_failpoint ("snapshot-copied");
  if (!move && !legacy)
    {
      /* The copy becomes a frozen layer, under the project lock so that
         gc sees it named by the snapshot once it is there.  */
      _cleanup_free_ char *fdir = esbx_project_file (s->project, "frozen");
      _cleanup_free_ char *from = xasprintf ("%s/diff", tmp), *to = NULL;

      plock = esbx_project_lock (store, s->project, err);
      if (plock < 0)
        goto out;
      if (mkdirat (store->rootfd, fdir, 0755) < 0 && errno != EEXIST)
        {
          esbx_make_error (err, errno, "mkdir `%s`", fdir);
          goto out;
        }
      id = esbx_random_hex (8);
      to = esbx_frozen_rel (s->project, id);
      if (mkdirat (store->rootfd, to, 0755) < 0)
        {
          esbx_make_error (err, errno, "mkdir `%s`", to);
          goto out;
        }
      free (to);
      {
        _cleanup_free_ char *layer = esbx_frozen_rel (s->project, id);
        to = xasprintf ("%s/diff", layer);
      }
      if (renameat (store->rootfd, from, store->rootfd, to) < 0)
        {
          esbx_make_error (err, errno, "install `%s`", to);
          goto out;
        }
    }
  rec = json_new (JSON_OBJECT);
  json_set_string (rec, "name", snap);
  json_set_string (rec, "project", s->project);
  json_set_string (rec, "base", s->base);
  json_set_string (rec, "session", s->name);
  json_set_string (rec, "session_id", s->id);
  json_set (rec, "parent", s->snapshot ? json_new_string (s->snapshot) : json_new (JSON_NULL));
  json_set_string (rec, "created", now);
  if (have_bytes)
    json_set_int (rec, "bytes", (int64_t)bytes);
  if (!legacy)
    {
      /* After a move the session's record names the new layer already.  */
      _cleanup_strv_ char **ids = NULL;
      if (esbx_frozen_ids (s->record, &ids) < 0)
        {
          esbx_make_error (err, 0, "session `%s`: malformed frozen layers", s->name);
          goto out;
        }
      json_set (rec, "frozen", frozen_json (ids, move ? NULL : id));
    }
  /* What is made from it gets a disk of the same size.  */
  if (s->disk > 0)
    json_set_int (rec, "disk", s->disk);
  /* Paths a rebase left unmerged are frozen with the files: a fork
     publishes them only once resolved, as the session would.  */
  {
    json_t *unmerged = esbx_unmerged_entries (s->record);
    if (json_len (unmerged) > 0)
      json_set (rec, "unmerged", unmerged);
    else
      json_free (unmerged);
  }
  /* The diff may hold their values: whatever is made from it keeps the
     names (never the values) for publish to look for.  */
  json_set (rec, "secrets", esbx_session_secret_names (s));
  text = json_serialize (rec, true, &len);
  /* Into the private temp directory, renamed into place whole.  */
  if (esbx_write_new_file_at (tfd, "record.json", text, len, 0644, err) < 0)
    goto out;
  dest = esbx_snapshot_rel (s->project, snap);
  if (renameat2 (store->rootfd, tmp, store->rootfd, dest, RENAME_NOREPLACE) < 0)
    {
      esbx_make_error (err, errno, "install `%s`", dest);
      goto out;
    }
  free (dir);
  dir = esbx_project_file (s->project, "snapshots");
  if (esbx_fsync_at (store->rootfd, dir, err) < 0)
    goto out;
  free (tmp);
  tmp = NULL;
  *out = steal_pointer (&snap);
  if (moved)
    *moved = move;
  ret = 0;

out:
  if (remount)
    {
      /* The view again, over the new layer when the move happened.  */
      struct esbx_session *now_s = NULL;
      esbx_error_t e = NULL;

      if (esbx_session_load_at (sfd, session, &now_s, &e) < 0
          || esbx_session_mount_record (store, now_s, &e) < 0)
        {
          esbx_warn ("session `%s`: %s", session, e->msg);
          esbx_error_free (&e);
        }
      esbx_session_free (now_s);
    }
  if (ret < 0 && tmp)
    {
      esbx_error_t ignored = NULL;
      if (esbx_rm_rf_at (store->rootfd, tmp, &ignored) < 0)
        esbx_error_free (&ignored);
    }
  if (ret < 0)
    esbx_error_wrap (err, "snapshot `%s`", session);
  esbx_session_free (s);
  return ret;
}

/* ---- users, list, inspect, rm, gc --------------------------------------- */

/* Sessions made from snapshot NAME of PROJECT, and snapshots whose parent
   it is.  */
static int
users (esbx_store_t *store, const char *project, const char *name, struct strv *sessions,
       struct strv *children, esbx_error_t *err)
{
  _cleanup_sessions_ struct esbx_sessions it = { 0 };
  _cleanup_strv_ char **snaps = NULL;
  _cleanup_free_ char *dir = esbx_project_file (project, "snapshots");
  struct esbx_session *s;
  size_t i;

  if (esbx_sessions_open (store, project, &it, err) < 0)
    return -1;
  while ((s = esbx_sessions_next (&it)))
    if (s->snapshot && strcmp (s->snapshot, name) == 0)
      strv_push (sessions, xstrdup (s->name));
  if (!esbx_exists_at (store->rootfd, dir))
    return 0;
  snaps = esbx_list_dir_at (store->rootfd, dir, err);
  if (snaps == NULL)
    return -1;
  for (i = 0; snaps[i]; i++)
    {
      esbx_error_t e = NULL;
      _cleanup_json_ json_t *j = esbx_snapshot_load_record (store, project, snaps[i], &e);
      const char *parent = j ? json_get_string (j, "parent") : NULL;

      esbx_error_free (&e);
      if (parent && strcmp (parent, name) == 0)
        strv_push (children, xstrdup (snaps[i]));
    }
  return 0;
}

static json_t *
snapshot_json (esbx_store_t *store, const char *project, const char *name, esbx_error_t *err)
{
  json_t *j = esbx_snapshot_load_record (store, project, name, err);
  struct strv sessions = { 0 }, children = { 0 };

  if (j == NULL)
    return NULL;
  /* A moved upper was never walked: its size is counted when asked for,
     the snapshot's own layer (the top one).  */
  if (json_get (j, "bytes") == NULL)
    {
      _cleanup_strv_ char **ids = NULL;
      unsigned long long bytes = 0;

      if (esbx_frozen_ids (j, &ids) == 0 && ids && ids[0])
        {
          _cleanup_free_ char *rel = esbx_frozen_rel (project, ids[strv_len (ids) - 1]);
          _cleanup_free_ char *diff = xasprintf ("%s/diff", rel);
          if (esbx_du_at (store->rootfd, diff, &bytes, NULL) < 0)
            bytes = 0;
        }
      json_set_int (j, "bytes", (int64_t)bytes);
    }
  if (users (store, project, name, &sessions, &children, err) < 0)
    {
      json_free (j);
      return NULL;
    }
  json_set (j, "sessions", json_new_strings (sessions.v));
  json_set (j, "children", json_new_strings (children.v));
  strv_free (&sessions);
  strv_free (&children);
  return j;
}

json_t *
esbx_snapshot_inspect (esbx_store_t *store, const char *name, esbx_error_t *err)
{
  _cleanup_free_ char *project = NULL;

  if (esbx_snapshot_find_project (store, name, &project, err) < 0)
    return NULL;
  return snapshot_json (store, project, name, err);
}

json_t *
esbx_snapshot_list (esbx_store_t *store, const char *project, esbx_error_t *err)
{
  _cleanup_strv_ char **projects = NULL;
  json_t *arr;
  size_t i, k;

  if (project && !esbx_project_exists (store, project))
    return esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0, "project `%s` does not exist",
                                 project),
           NULL;
  projects = esbx_project_list (store, err);
  if (projects == NULL)
    return NULL;
  arr = json_new (JSON_ARRAY);
  for (i = 0; projects[i]; i++)
    {
      _cleanup_free_ char *dir = esbx_project_file (projects[i], "snapshots");
      _cleanup_strv_ char **snaps = NULL;
      esbx_error_t e = NULL;

      if ((project && strcmp (project, projects[i]) != 0) || !esbx_exists_at (store->rootfd, dir))
        continue;
      snaps = esbx_list_dir_at (store->rootfd, dir, &e);
      esbx_error_free (&e);
      for (k = 0; snaps && snaps[k]; k++)
        {
          json_t *j = snapshot_json (store, projects[i], snaps[k], &e);
          if (j)
            json_append (arr, j);
          esbx_error_free (&e);
        }
    }
  return arr;
}

/* Remove snapshot NAME of PROJECT unless something uses it; the caller
   holds the project lock.  1 when it is in use (USED_BY names a user).  */
static int
remove_unused (esbx_store_t *store, const char *project, const char *name, char **used_by,
               esbx_error_t *err)
{
  struct strv sessions = { 0 }, children = { 0 }, trashed = { 0 };
  _cleanup_free_ char *rel = esbx_snapshot_rel (project, name), *hex = esbx_random_hex (6);
  _cleanup_free_ char *grave = NULL;

  if (users (store, project, name, &sessions, &children, err) < 0
      || esbx_trash_snapshot_users (store, project, name, &trashed, err) < 0)
    return -1;
  if (sessions.n || children.n || trashed.n)
    {
      if (sessions.n)
        *used_by = xasprintf ("session `%s`", sessions.v[0]);
      else if (children.n)
        *used_by = xasprintf ("snapshot `%s`", children.v[0]);
      else
        *used_by = xasprintf ("trash entry `%s`", trashed.v[0]);
      strv_free (&sessions);
      strv_free (&children);
      strv_free (&trashed);
      return 1;
    }
  /* Out of snapshots/ first: a crash half-way leaves a temp dir for gc.  */
  grave = esbx_project_file (project, "tmp/rm-snapshot-%s", hex);
  if (renameat (store->rootfd, rel, store->rootfd, grave) < 0)
    return esbx_make_error (err, errno, "snapshot `%s`: remove", name);
  if (esbx_rm_rf_at (store->rootfd, grave, err) < 0)
    return esbx_error_wrap (err, "snapshot `%s`", name);
  return 0;
}

int
esbx_snapshot_rm (esbx_store_t *store, const char *name, esbx_error_t *err)
{
  _cleanup_free_ char *project = NULL, *used_by = NULL;
  _cleanup_close_ int lock = -1;
  int r;

  if (esbx_snapshot_find_project (store, name, &project, err) < 0)
    return -1;
  lock = esbx_project_lock (store, project, err);
  if (lock < 0)
    return -1;
  r = remove_unused (store, project, name, &used_by, err);
  if (r > 0)
    return esbx_make_error_kind (err, ESBX_ERR_BUSY, 0, "snapshot `%s`: in use by %s", name,
                                 used_by);
  return r;
}

int
esbx_snapshot_gc (esbx_store_t *store, FILE *report, esbx_error_t *err)
{
  _cleanup_strv_ char **projects = esbx_project_list (store, err);
  bool removed = true;
  size_t i, k;

  if (projects == NULL)
    return -1;
  /* Removing a snapshot can free its parent: again until nothing goes.  */
  while (removed)
    {
      removed = false;
      for (i = 0; projects[i]; i++)
        {
          _cleanup_free_ char *dir = esbx_project_file (projects[i], "snapshots");
          _cleanup_strv_ char **snaps = NULL;
          _cleanup_close_ int lock = -1;

          if (!esbx_exists_at (store->rootfd, dir))
            continue;
          lock = esbx_project_lock (store, projects[i], err);
          if (lock < 0)
            return -1;
          snaps = esbx_list_dir_at (store->rootfd, dir, err);
          if (snaps == NULL)
            return -1;
          for (k = 0; snaps[k]; k++)
            {
              _cleanup_free_ char *used_by = NULL;
              int r = remove_unused (store, projects[i], snaps[k], &used_by, err);
              if (r < 0)
                return -1;
              if (r == 0)
                {
                  removed = true;
                  if (report)
                    fprintf (report, "removed snapshot `%s`\n", snaps[k]);
                }
            }
        }
    }
  return 0;
}

bool
esbx_snapshot_uses_layer (esbx_store_t *store, const char *project, const char *layer)
{
  _cleanup_free_ char *dir = esbx_project_file (project, "snapshots");
  _cleanup_strv_ char **snaps = NULL;
  esbx_error_t e = NULL;
  size_t i;

  if (!esbx_exists_at (store->rootfd, dir))
    return false;
  snaps = esbx_list_dir_at (store->rootfd, dir, &e);
  if (snaps == NULL)
    {
      esbx_error_free (&e);
      return true; /* unknown: keep the layer */
    }
  for (i = 0; snaps[i]; i++)
    {
      _cleanup_json_ json_t *j = esbx_snapshot_load_record (store, project, snaps[i], &e);
      const char *base = j ? json_get_string (j, "base") : NULL;

      esbx_error_free (&e);
      if (j == NULL || strcmp (base, layer) == 0)
        return true;
    }
  return false;
}

/* ---- the view a fork publishes ------------------------------------------ */

/* Merge the overlay-format tree SRC over DST, the way overlayfs stacks
   them: a whiteout or a non-directory replaces what DST had; an opaque
   directory, or one that replaces a non-directory, hides what DST had
   beneath it (it becomes opaque); any other directory merges.  With LINK
   files are hard links (a view costs no copy), else copies.  */
static int
merge_tree (int src, int dst, const char *rel, bool link, esbx_error_t *err)
{
  _cleanup_strv_ char **names = esbx_list_dir_at (src, ".", err);
  size_t i;

  if (names == NULL)
    return -1;
  for (i = 0; names[i]; i++)
    {
      const char *name = names[i];
      _cleanup_free_ char *child = rel[0] ? xasprintf ("%s/%s", rel, name) : xstrdup (name);
      struct stat st, dst_st;
      bool had = fstatat (dst, name, &dst_st, AT_SYMLINK_NOFOLLOW) == 0;

      if (fstatat (src, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        continue;
      if (S_ISDIR (st.st_mode))
        {
          bool opaque = esbx_is_opaque_at (src, name);
          _cleanup_close_ int s = -1, d = -1;

          if (had && (opaque || !S_ISDIR (dst_st.st_mode)))
            {
              if (esbx_rm_rf_at (dst, name, err) < 0)
                return -1;
              opaque = true;
              had = false;
            }
          if (!had && mkdirat (dst, name, st.st_mode & 07777) < 0)
            return esbx_make_error (err, errno, "mkdir `/%s`", child);
          if (opaque && set_opaque (dst, name, err) < 0)
            return -1;
          copy_meta (dst, name, &st);
          s = TEMP_FAILURE_RETRY (
              openat (src, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
          d = TEMP_FAILURE_RETRY (
              openat (dst, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
          if (s < 0 || d < 0)
            return esbx_make_error (err, errno, "open `/%s`", child);
          if (merge_tree (s, d, child, link, err) < 0)
            return -1;
          continue;
        }
      if (had && esbx_rm_rf_at (dst, name, err) < 0)
        return -1;
      if (link && S_ISREG (st.st_mode) && linkat (src, name, dst, name, 0) == 0)
        continue;
      if (copy_entry (src, dst, name, child, err) < 0)
        return -1;
    }
  return 0;
}

/* A layer whose root is opaque hides everything below it: the view starts
   again from an empty opaque root.  */
static int
clear_root (int vfd, const char *tmp, esbx_error_t *err)
{
  _cleanup_strv_ char **names = esbx_list_dir_at (vfd, ".", err);
  size_t i;

  for (i = 0; names && names[i]; i++)
    if (esbx_rm_rf_at (vfd, names[i], err) < 0)
      return -1;
  if (names == NULL)
    return -1;
  if (fsetxattr (vfd, OPAQUE_XATTR, "y", 1, 0) < 0)
    return esbx_make_error (err, errno, "mark `%s/view` opaque", tmp);
  return 0;
}

int
esbx_snapshot_view (esbx_store_t *store, const struct esbx_session *s, char **path, int *lockfd,
                    esbx_error_t *err)
{
  struct strv lowers = { 0 };
  _cleanup_free_ char *tmp = NULL, *upper = NULL;
  _cleanup_close_ int tfd = -1, vfd = -1;
  size_t i;
  int ret = -1;

  if (esbx_session_frozen_lowers (store, s, &lowers, err) < 0)
    return esbx_error_wrap (err, "session `%s`", s->name);
  upper = esbx_session_upper (store, s->name);
  strv_push (&lowers, steal_pointer (&upper));
  tfd = esbx_store_tmpdir (store, "view", &tmp, err);
  if (tfd < 0)
    goto out;
  if (mkdirat (tfd, "view", 0755) < 0 || (vfd = esbx_open_dir_at (tfd, "view", err)) < 0)
    {
      if (vfd < 0 && err && *err == NULL)
        esbx_make_error (err, errno, "mkdir `%s/view`", tmp);
      goto out;
    }
  for (i = 0; i < lowers.n; i++)
    {
      _cleanup_close_ int lfd = esbx_open_dir_at (AT_FDCWD, lowers.v[i], err);
      if (lfd < 0)
        goto out;
      if (esbx_is_opaque_at (lfd, ".") && clear_root (vfd, tmp, err) < 0)
        goto out;
      if (merge_tree (lfd, vfd, "", true, err) < 0)
        goto out;
    }
  *path = steal_pointer (&tmp);
  *lockfd = take_fd (&tfd);
  ret = take_fd (&vfd);

out:
  if (ret < 0)
    {
      esbx_error_t ignored = NULL;
      if (tmp && esbx_rm_rf_at (AT_FDCWD, tmp, &ignored) < 0)
        esbx_error_free (&ignored);
      esbx_error_wrap (err, "session `%s`: view over its frozen layers", s->name);
    }
  strv_free (&lowers);
  return ret;
}

int
esbx_session_flatten (esbx_store_t *store, struct esbx_session *s, esbx_error_t *err)
{
  struct strv lowers = { 0 };
  _cleanup_free_ char *tmp = NULL;
  _cleanup_close_ int tfd = -1, vfd = -1, ufd = -1, sdfd = -1;
  struct stat st;
  size_t i;
  int ret = -1;

  if (s->disk > 0)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "session `%s`: a fork on a disk of its own cannot be rebased yet; "
                                 "publish it, then start a new session from the head",
                                 s->name);
  if (esbx_session_frozen_lowers (store, s, &lowers, err) < 0)
    return esbx_error_wrap (err, "session `%s`", s->name);
  sdfd = esbx_session_open_dir (store, s->name, err);
  ufd = sdfd < 0 ? -1 : esbx_open_dir_at (sdfd, "upper", err);
  if (ufd < 0 || fstat (ufd, &st) < 0)
    goto out;
  tfd = esbx_store_tmpdir (store, "flatten", &tmp, err);
  if (tfd < 0)
    goto out;
  if (mkdirat (tfd, "upper", 0755) < 0 || (vfd = esbx_open_dir_at (tfd, "upper", err)) < 0)
    {
      if (vfd < 0 && err && *err == NULL)
        esbx_make_error (err, errno, "mkdir `%s/upper`", tmp);
      goto out;
    }
  /* The frozen layers are shared with the snapshot and other forks: their
     files are copied (holes stay holes).  The session's own move, as hard
     links.  */
  for (i = 0; i <= lowers.n; i++)
    {
      _cleanup_close_ int lfd = i < lowers.n ? esbx_open_dir_at (AT_FDCWD, lowers.v[i], err)
                                             : fcntl (ufd, F_DUPFD_CLOEXEC, 3);
      if (lfd < 0)
        goto out;
      if (esbx_is_opaque_at (lfd, ".") && clear_root (vfd, tmp, err) < 0)
        goto out;
      if (merge_tree (lfd, vfd, "", i == lowers.n, err) < 0)
        goto out;
    }
  if (fchown (vfd, st.st_uid, st.st_gid) < 0 || fchmod (vfd, st.st_mode & 07777) < 0)
    {
      esbx_make_error (err, errno, "`%s/upper`", tmp);
      goto out;
    }
  if (esbx_syncfs (vfd, "the session's new upper", err) < 0)
    goto out;
  /* One step: whichever upper a crash leaves shows the same files, the new
     one holding its frozen layers' whiteouts and opaque directories.  */
  if (renameat2 (tfd, "upper", sdfd, "upper", RENAME_EXCHANGE) < 0)
    {
      esbx_make_error (err, errno, "session `%s`: replace its upper", s->name);
      goto out;
    }
  json_remove (s->record, "frozen");
  json_remove (s->record, "snapshot");
  if (esbx_session_save (store, s->name, s->record, err) < 0)
    goto out;
  cleanup_strvp (&s->frozen);
  s->frozen = NULL;
  free (s->snapshot);
  s->snapshot = NULL;
  ret = 0;

out:
  if (tmp)
    {
      esbx_error_t ignored = NULL;
      /* The new upper, or after the exchange the old one.  */
      if (esbx_rm_rf_at (AT_FDCWD, tmp, &ignored) < 0)
        esbx_error_free (&ignored);
    }
  strv_free (&lowers);
  if (ret < 0)
    esbx_error_wrap (err, "session `%s`: an upper of its own", s->name);
  return ret;
}
