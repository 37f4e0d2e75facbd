/* Cleanup policy.  A session is "crashed" when its holder record names a
 * process that is gone (the holder was killed, or the host rebooted), or
 * when an owner marker (owner.h) names a process that is gone (an esbx
 * killed while starting a holder or running a command).  gc brings a
 * crashed session back to rest: the holder and every process of the session
 * killed, the cgroup removed, the merged view unmounted, stale records
 * deleted.  Its files (upper/) are kept: a reboot must not cost anyone their
 * work, and the next `esbx exec` starts a fresh holder on them.  A session
 * with a live owner, a live holder and no dead marker is never touched.  */
#include "sandbox.h"
#include "cgroup.h"
#include "egress.h"
#include "events.h"
#include "fs.h"
#include "holder.h"
#include "owner.h"
#include "proc.h"
#include "text.h"
#include "utils.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>

/* Why SESSION needs cleaning, or NULL when it is alive or at rest.  */
static const char *
crash_reason (esbx_store_t *store, const char *session, int dfd)
{
  _cleanup_json_ json_t *rec = NULL;
  esbx_error_t jerr = NULL;
  size_t alive = 0, dead = 0;
  int64_t pid = 0, start = 0;

  esbx_owner_scan (store, session, &alive, &dead, false);
  if (alive > 0)
    return NULL;
  if (dead > 0)
    return "owner crashed";
  if (!esbx_exists_at (dfd, "holder.json"))
    return NULL;
  rec = json_parse_file_at (dfd, "holder.json", &jerr);
  esbx_error_free (&jerr);
  if (rec == NULL || !json_get_int (rec, "pid", &pid) || !json_get_int (rec, "starttime", &start)
      || !esbx_proc_alive ((pid_t)pid, (unsigned long long)start))
    return "holder died";
  return NULL;
}

static int
clean_session (esbx_store_t *store, const char *session, FILE *report, esbx_error_t *err)
{
  _cleanup_close_ int dfd = -1;
  _cleanup_close_ int lock = -1;
  const char *reason;
  size_t alive, dead;
  json_t *f;

  dfd = esbx_session_open_dir (store, session, NULL);
  if (dfd < 0)
    return 0; /* discarded meanwhile */
  /* Neither a holder nor an owner recorded: nothing crashed (gc asks this
     of every session, most of them idle; the lock is for the others).  */
  if (!esbx_exists_at (dfd, "holder.json") && !esbx_exists_at (dfd, "owners"))
    return 0;
  /* Someone starting or stopping the holder right now: alive, not ours.  */
  lock = esbx_lock_at (dfd, "holder.lock", true, false, NULL);
  if (lock < 0)
    return 0;
  reason = crash_reason (store, session, dfd);
  close (take_fd (&lock));
  if (reason == NULL)
    return 0;
  if (esbx_holder_stop (store, session, err) < 0)
    return -1;
  if (esbx_session_is_mounted (store, session) && esbx_session_unmount (store, session, err) < 0)
    return -1;
  esbx_owner_scan (store, session, &alive, &dead, true);
  f = json_new (JSON_OBJECT);
  json_set_string (f, "reason", reason);
  esbx_event_append (store, session, "gc", f, NULL);
  if (report)
    fprintf (report, "cleaned session `%s`: %s\n", session, reason);
  return 0;
}

/* Cgroups of this store whose session is gone.  */
static void
clean_stray_cgroups (esbx_store_t *store, FILE *report)
{
  _cleanup_free_ char *prefix = esbx_cgroup_store_prefix (store);
  _cleanup_strv_ char **names = NULL;
  size_t plen = strlen (prefix);
  char **n;

  names = esbx_cgroup_list_esbx (NULL);
  for (n = names; n && *n; n++)
    {
      _cleanup_free_ char *rel = NULL;
      const char *session = *n + plen;
      size_t k;

      if (strncmp (*n, prefix, plen) != 0)
        continue;
      if (plen == 0)
        {
          /* "HASH.S" belongs to another store.  */
          for (k = 0; k < 8 && isxdigit ((unsigned char)(*n)[k]); k++)
            ;
          if (k == 8 && (*n)[8] == '.')
            continue;
        }
      if (!esbx_name_valid (session) || esbx_session_exists (store, session))
        continue;
      rel = xasprintf ("esbx/%s", *n);
      if (esbx_cgroup_remove (rel, NULL) == 0 && report)
        fprintf (report, "removed cgroup `%s` of a session that no longer exists\n", rel);
    }
}

int
esbx_sandbox_gc_flags (esbx_store_t *store, unsigned int flags, FILE *report, esbx_error_t *err)
{
  _cleanup_strv_ char **sessions = NULL;
  char **s;
  int ret = 0;

  sessions = esbx_session_list (store, NULL, err);
  if (sessions == NULL)
    return -1;
  for (s = sessions; *s; s++)
    {
      esbx_error_t serr = NULL;

      esbx_sandbox_thaw_abandoned (store, *s, report);
      if (clean_session (store, *s, report, &serr) < 0)
        {
          /* Another gc or a discard got there first.  */
          if (!esbx_session_exists (store, *s))
            esbx_error_free (&serr);
          else
            {
              if (report)
                fprintf (report, "session `%s`: %s\n", *s, serr->msg);
              esbx_error_free (&serr);
              ret = -1;
            }
        }
    }
  clean_stray_cgroups (store, report);
  esbx_egress_gc (store, report);
  esbx_userns_gc (store, report);
  /* Without a daemon, gc is what ends sessions past their lifetime.  */
  {
    struct esbx_expire_result r;

    if (esbx_sandbox_expire (store, 0, report, &r, err) < 0)
      ret = -1;
    else if (r.failed)
      {
        esbx_make_error (err, 0, "expiry: %zu session%s could not be retired", r.failed,
                         r.failed == 1 ? "" : "s");
        ret = -1;
      }
  }
  if (ret < 0 && err && *err)
    {
      if (report)
        fprintf (report, "%s\n", (*err)->msg);
      esbx_error_free (err);
    }
  if ((flags & ESBX_GC_SNAPSHOTS) && esbx_snapshot_gc (store, report, err) < 0)
    return -1;
  if (esbx_gc (store, report, err) < 0)
    return -1;
  if ((flags & ESBX_GC_CACHE) && esbx_gc_cache (store, report, err) < 0)
    return -1;
  if (ret < 0)
    return esbx_make_error (err, 0, "gc: some sessions could not be cleaned");
  return 0;
}
