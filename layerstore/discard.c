/* Discarding a session: its private state goes, unless it holds work
   that was never published, which goes to the trash (trash.c) with a
   warning naming how much.  Above session.c, scan.c and trash.c, so that
   none of them needs another to be whole.  */
#include "internal.h"
#include "fs.h"
#include "log.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <unistd.h>

/* The number of changes of session NAME (-1 when they cannot be counted),
   how many of them its ignore rules leave out of a publish (an ignored
   directory counts once) and its record; NULL when even the record is
   unreadable.  Ignored work is unpublished work too: a file a publish left
   out because a rule matched it is not lost with the session.  */
static struct esbx_session *
count_changes (esbx_store_t *store, const char *name, int64_t *changes, int64_t *ignored_n,
               char **why)
{
  struct esbx_changeset cs = { 0 }, ignored = { 0 };
  struct esbx_session *s = NULL;
  esbx_error_t e = NULL;
  int ufd;

  *changes = -1;
  *ignored_n = 0;
  if (esbx_session_load (store, name, &s, &e) < 0)
    {
      *why = xstrdup (e->msg);
      esbx_error_free (&e);
      return NULL;
    }
  ufd = esbx_session_scan (store, s, NULL, ESBX_CHANGES_IGNORED_TOP, &cs, NULL, &ignored, &e);
  if (ufd < 0)
    {
      *why = xstrdup (e->msg);
      esbx_error_free (&e);
      return s;
    }
  close (ufd);
  *ignored_n = (int64_t)ignored.n;
  *changes = (int64_t)(cs.n + ignored.n);
  esbx_changeset_free (&cs);
  esbx_changeset_free (&ignored);
  return s;
}

/* Move the session (unmounted) to the trash when it holds unpublished
   changes, saying so: 1 when it went there, 0 when it is to be deleted.
   Its own disk, counted, is unmounted: *DISK_LOCK keeps it so until the
   session's directory is gone from sessions/.  */
static int
keep_unpublished (esbx_store_t *store, const char *name, const char *rel, unsigned int flags,
                  int64_t ttl, int *disk_lock, esbx_error_t *err)
{
  _cleanup_free_ char *why = NULL, *entry = NULL, *expires = NULL, *counted = NULL;
  _cleanup_free_ char *skip = NULL;
  struct esbx_session *s;
  int64_t n, n_ignored;
  int ret;

  /* The merge queue's own sessions hold nothing of anyone's: no count.  */
  if (flags & ESBX_DISCARD_SCRATCH)
    return esbx_session_disk_unmount (store, name, disk_lock, err) < 0
               ? esbx_error_wrap (err, "discard `%s`", name)
               : 0;
  s = count_changes (store, name, &n, &n_ignored, &why);
  if (esbx_session_disk_unmount (store, name, disk_lock, err) < 0)
    {
      esbx_session_free (s);
      return esbx_error_wrap (err, "discard `%s`", name);
    }
  if (n == 0)
    {
      esbx_session_free (s);
      return 0;
    }
  counted = n < 0 ? xasprintf ("its changes could not be counted (%s);", why)
            : n_ignored > 0
                ? xasprintf ("%" PRId64 " unpublished change%s (%" PRId64 " of them ignored)", n,
                             n == 1 ? "" : "s", n_ignored)
                : xasprintf ("%" PRId64 " unpublished change%s", n, n == 1 ? "" : "s");
  if (s == NULL || (flags & ESBX_DISCARD_FORCE) || ttl == 0)
    {
      const char *because = "the trash is off";

      if (s == NULL)
        because = "no record";
      else if (flags & ESBX_DISCARD_FORCE)
        because = "--force";
      esbx_warn ("discard `%s`: %s deleted (%s)", name, counted, because);
      esbx_session_free (s);
      return 0;
    }
  ret = esbx_trash_make_room (store, rel, &skip, err);
  if (ret < 0)
    {
      esbx_session_free (s);
      return esbx_error_wrap (err, "discard `%s`", name);
    }
  if (ret == 0)
    {
      esbx_warn ("discard `%s`: %s deleted without the trash: %s", name, counted, skip);
      esbx_session_free (s);
      return 0;
    }
  ret = esbx_trash_put (store, s, rel, n, ttl, &entry, &expires, err);
  esbx_session_free (s);
  if (ret < 0)
    return esbx_error_wrap (err, "discard `%s`", name);
  esbx_warn ("discard `%s`: %s kept in the trash as `%s` until %s (esbx trash restore %s)", name,
             counted, entry, expires, entry);
  return 1;
}

int
esbx_session_discard (esbx_store_t *store, const char *name, unsigned int flags, esbx_error_t *err)
{
  _cleanup_free_ char *rel = NULL, *graveyard = NULL, *hex = NULL;
  _cleanup_close_ int lockfd = -1, disk_lock = -1;
  int64_t ttl = 0;
  int kept;

  if (esbx_check_name ("session", name, err) < 0)
    return -1;
  rel = esbx_session_rel (name);
  if (!esbx_exists_at (store->rootfd, rel))
    return esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0, "session `%s` does not exist", name);
  /* A bad keeping time changes nothing.  */
  if (!(flags & ESBX_DISCARD_FORCE) && esbx_trash_ttl (store, &ttl, err) < 0)
    return -1;
  lockfd = esbx_session_lock (store, name, err);
  if (lockfd < 0)
    return -1;
  /* Lazily: a container that still has it open must not keep the session
     alive once its owner said discard.  */
  if (esbx_session_unmount_views (store, name, true, err) < 0)
    return esbx_error_wrap (err, "discard");
  kept = keep_unpublished (store, name, rel, flags, ttl, &disk_lock, err);
  if (kept != 0)
    return kept < 0 ? -1 : 0;
  /* Move it out of sessions/ first so that a crash half-way through the
     removal leaves something gc finds, not a broken session.  */
  hex = esbx_random_hex (6);
  graveyard = xasprintf ("tmp/" ESBX_DISCARD_PREFIX "%s-%s", name, hex);
  if (renameat (store->rootfd, rel, store->rootfd, graveyard) < 0)
    return esbx_make_error (err, errno, "discard `%s`", name);
  if (esbx_rm_rf_detached (store, graveyard) == 1)
    return 0;
  if (esbx_rm_rf_at (store->rootfd, graveyard, err) < 0)
    return esbx_error_wrap (err, "discard `%s`", name);
  return 0;
}
