/* Snapshots pushed to the remote, so that a session outlives its host
 * (docs/SCALE-OUT.md, "Sessions that outlive their host"): by hand
 * (`session snapshot S --push`), and as the project says
 * (esbx_snapshot_policy): before every publish attempt, every N seconds
 * (esbxd's round, esbx_sandbox_push_due), at `--on-expiry snapshot`
 * (sandbox_expire.c).  An automatic snapshot is S-auto-HEX; the one it
 * replaces is removed here and from the remote once the new one is pushed
 * (when nothing uses it: esbx_snapshot_retire), so a session keeps one. ROOT/sessions/S/pushed.json
 * says when S was last pushed and its automatic snapshot.  A push that fails is an error, never
 * skipped.  */
#include "sandbox.h"
#include "events.h"
#include "fs.h"
#include "log.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define PUSHED_FILE "pushed.json"

int
esbx_sandbox_snapshot_push (esbx_store_t *store, const char *session, const char *name, char **out,
                            esbx_error_t *err)
{
  _cleanup_free_ char *snap = NULL;

  if (esbx_sandbox_snapshot (store, session, name, &snap, err) < 0)
    return -1;
  if (esbx_snapshot_push (store, snap, NULL, err) < 0)
    return esbx_error_wrap (err, "session `%s`: snapshot `%s` is kept here, not pushed", session,
                            snap);
  *out = steal_pointer (&snap);
  return 0;
}

/* SESSION's pushed.json: *AT, when it was last pushed (0: never), *SINCE,
   the file-system time its snapshot began at in nanoseconds (a record
   without it: AT's second), and its automatic snapshot.  */
static void
pushed_load (int sfd, int64_t *at, int64_t *since, char **auto_snap)
{
  esbx_error_t e = NULL;
  _cleanup_json_ json_t *j = NULL;

  *at = *since = 0;
  *auto_snap = NULL;
  if (!esbx_exists_at (sfd, PUSHED_FILE))
    return;
  j = json_parse_file_at (sfd, PUSHED_FILE, &e);
  esbx_error_free (&e);
  json_get_int (j, "at", at);
  if (!json_get_int (j, "since_ns", since) || *since <= 0)
    *since = *at * 1000000000;
  if (esbx_name_valid (json_get_string (j, "auto")))
    *auto_snap = xstrdup (json_get_string (j, "auto"));
}

static int
pushed_save (int sfd, const char *auto_snap, int64_t since, esbx_error_t *err)
{
  _cleanup_json_ json_t *j = json_new (JSON_OBJECT);
  _cleanup_free_ char *text = NULL;
  size_t len;

  json_set_int (j, "at", (int64_t)time (NULL));
  json_set_int (j, "since_ns", since);
  json_set_string (j, "auto", auto_snap);
  text = json_serialize (j, true, &len);
  return esbx_write_file_atomic_at (sfd, PUSHED_FILE, text, len, 0644, err);
}

/* Now on the clock the kernel stamps ctimes with (the coarse one), in
   nanoseconds: a change after it has a ctime at or after it.  */
static int64_t
fs_now_ns (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_REALTIME_COARSE, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t
ts_ns (const struct timespec *ts)
{
  return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

int
esbx_sandbox_snapshot_auto (esbx_store_t *store, const char *session, char **out, esbx_error_t *err)
{
  _cleanup_free_ char *hex = esbx_random_hex (4), *want = NULL, *snap = NULL, *old = NULL;
  _cleanup_close_ int sfd = esbx_session_open_dir (store, session, err);
  esbx_error_t e = NULL;
  int64_t at, since, started = fs_now_ns ();

  if (sfd < 0)
    return -1;
  pushed_load (sfd, &at, &since, &old);
  want = xasprintf ("%.100s-auto-%s", session, hex);
  if (esbx_sandbox_snapshot_push (store, session, want, &snap, err) < 0)
    {
      /* Not kept: the next attempt takes another.  */
      if (esbx_snapshot_rm (store, want, &e) < 0)
        esbx_error_free (&e);
      return -1;
    }
  if (pushed_save (sfd, snap, started, err) < 0)
    return esbx_error_wrap (err, "session `%s`", session);
  /* A session made from it here keeps it, here and on the remote.  */
  if (old && esbx_snapshot_retire (store, old, &e) < 0)
    {
      esbx_warn ("session `%s`: %s", session, e->msg);
      esbx_error_free (&e);
    }
  if (out)
    *out = steal_pointer (&snap);
  return 0;
}

int
esbx_sandbox_push_before_publish (esbx_store_t *store, const char *session, esbx_error_t *err)
{
  struct esbx_snapshot_policy p;
  struct esbx_session *s = NULL;
  int ret = 0;

  if (esbx_session_load (store, session, &s, err) < 0)
    return -1;
  if (esbx_project_is_shared (store, s->project)
      && (esbx_snapshot_policy_get (store, s->project, &p, err) < 0
          || (p.on_publish && esbx_sandbox_snapshot_auto (store, session, NULL, err) < 0)))
    ret = esbx_error_wrap (err, "publish `%s`: the snapshot pushed before a publish", session);
  esbx_session_free (s);
  return ret;
}

/* Whether anything under DFD changed since SINCE (ns; 0: never pushed):
   an entry's ctime (a write, a rename, a removal changes its
   directory's) at or after the start of the last pushed snapshot, which
   holds every change before it.  */
static bool
changed_since (int dfd, int64_t since, int depth)
{
  esbx_error_t e = NULL;
  _cleanup_strv_ char **names = NULL;
  struct stat st;
  size_t i;

  names = esbx_list_dir_at (dfd, ".", &e);
  esbx_error_free (&e);
  /* Never pushed: anything in it at all.  */
  if (fstat (dfd, &st) == 0 && ts_ns (&st.st_ctim) >= since && (since > 0 || (names && names[0])))
    return true;
  for (i = 0; names && names[i]; i++)
    {
      _cleanup_close_ int cfd = -1;

      if (fstatat (dfd, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0)
        continue;
      if (ts_ns (&st.st_ctim) >= since || ts_ns (&st.st_mtim) >= since)
        return true;
      if (!S_ISDIR (st.st_mode) || depth > 256)
        continue;
      cfd = TEMP_FAILURE_RETRY (
          openat (dfd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (cfd >= 0 && changed_since (cfd, since, depth + 1))
        return true;
    }
  return false;
}

/* Whether session S of a project pushing every EVERY seconds is due:
   pushed longer ago than that, and its upper changed since.  */
static bool
due (esbx_store_t *store, const struct esbx_session *s, int64_t every)
{
  _cleanup_free_ char *old = NULL;
  _cleanup_close_ int sfd = esbx_session_open_dir (store, s->name, NULL);
  _cleanup_close_ int ufd = -1;
  int64_t at, since;

  if (sfd < 0)
    return false;
  pushed_load (sfd, &at, &since, &old);
  if (at > 0 && (int64_t)time (NULL) < at + every)
    return false;
  ufd = TEMP_FAILURE_RETRY (openat (sfd, "upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  return ufd >= 0 && changed_since (ufd, since, 0);
}

int
esbx_sandbox_push_due (esbx_store_t *store, size_t *pushed, size_t *failed, esbx_error_t *err)
{
  _cleanup_sessions_ struct esbx_sessions it = { 0 };
  struct esbx_session *s;
  struct strv names = { 0 };
  size_t i;

  *pushed = *failed = 0;
  if (esbx_sessions_open (store, NULL, &it, err) < 0)
    return -1;
  while ((s = esbx_sessions_next (&it)))
    {
      struct esbx_snapshot_policy p;
      esbx_error_t e = NULL;

      int64_t every = 0;

      if (!esbx_project_is_shared (store, s->project)
          || esbx_snapshot_policy_get (store, s->project, &p, &e) < 0)
        {
          esbx_error_free (&e);
          continue;
        }
      /* The session's own (a volume's push-every) wins.  */
      if (!json_get_int (s->record, "push_every", &every) || every <= 0)
        every = p.every;
      if (every > 0 && due (store, s, every))
        strv_push (&names, xstrdup (s->name));
    }
  /* Outside the walk: a snapshot takes the session's locks.  */
  for (i = 0; i < names.n; i++)
    {
      _cleanup_free_ char *snap = NULL;
      esbx_error_t e = NULL;

      if (esbx_sandbox_snapshot_auto (store, names.v[i], &snap, &e) < 0)
        {
          esbx_warn ("%s", e->msg);
          esbx_error_free (&e);
          (*failed)++;
          continue;
        }
      esbx_info ("session `%s`: pushed snapshot `%s`", names.v[i], snap);
      (*pushed)++;
    }
  strv_free (&names);
  return 0;
}
