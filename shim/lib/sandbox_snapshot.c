/* Snapshots, forks and the end of bounded lifetimes, as the front ends see
 * them.  A snapshot is a consistent point: the session's processes are
 * frozen (cgroup freezer) while its upper is copied, then thawed.  The
 * freeze is taken under ROOT/sessions/S/snapshot.lock; a snapshot killed
 * while the session is frozen leaves the lock free, and the next snapshot
 * or gc thaws the session (esbx_sandbox_thaw_abandoned).  */
#include "sandbox.h"
#include "cgroup.h"
#include "events.h"
#include "fs.h"
#include "holder.h"
#include "log.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <time.h>

/* Thaw SESSION if a snapshot that crashed left it frozen; the caller holds
   its snapshot lock.  */
static void
thaw_if_frozen (esbx_store_t *store, const char *session, FILE *report)
{
  _cleanup_free_ char *cg = esbx_cgroup_session_path (store, session);
  esbx_error_t e = NULL;

  if (!esbx_cgroup_frozen (cg))
    return;
  if (esbx_cgroup_freeze (cg, false, &e) < 0)
    {
      esbx_warn ("session `%s`: %s", session, e->msg);
      esbx_error_free (&e);
    }
  else if (report)
    fprintf (report, "thawed session `%s`: a snapshot did not finish\n", session);
}

void
esbx_sandbox_thaw_abandoned (esbx_store_t *store, const char *session, FILE *report)
{
  _cleanup_close_ int dfd = esbx_session_open_dir (store, session, NULL);
  _cleanup_close_ int lock = -1;

  if (dfd < 0)
    return;
  lock = esbx_lock_at (dfd, "snapshot.lock", true, false, NULL);
  if (lock >= 0)
    thaw_if_frozen (store, session, report);
}

int
esbx_sandbox_snapshot (esbx_store_t *store, const char *session, const char *name, char **out,
                       esbx_error_t *err)
{
  _cleanup_free_ char *cg = NULL;
  _cleanup_close_ int dfd = -1;
  _cleanup_close_ int lock = -1;
  esbx_error_t terr = NULL;
  bool frozen = false;
  int ret;

  dfd = esbx_session_open_dir (store, session, err);
  if (dfd < 0)
    return esbx_error_wrap (err, "snapshot");
  lock = esbx_lock_at (dfd, "snapshot.lock", true, true, err);
  if (lock < 0)
    return esbx_error_wrap (err, "snapshot `%s`", session);
  thaw_if_frozen (store, session, NULL);
  cg = esbx_cgroup_session_path (store, session);
  if (esbx_sandbox_holder_running (store, session))
    {
      if (esbx_cgroup_freeze (cg, true, err) < 0)
        {
          esbx_cgroup_freeze (cg, false, NULL);
          return esbx_error_wrap (err, "snapshot `%s`", session);
        }
      frozen = true;
    }
  ret = esbx_snapshot_create (store, session, name, out, err);
  if (frozen && esbx_cgroup_freeze (cg, false, &terr) < 0)
    {
      esbx_warn ("snapshot `%s`: %s", session, terr->msg);
      esbx_error_free (&terr);
    }
  if (ret == 0)
    {
      json_t *f = json_new (JSON_OBJECT);
      json_set_string (f, "snapshot", *out);
      esbx_event_append (store, session, "snapshot", f, NULL);
    }
  return ret;
}

int
esbx_sandbox_fork (esbx_store_t *store, const char *session, const struct esbx_session_opts *opts,
                   char **snapshot, char **name, esbx_error_t *err)
{
  struct esbx_session_opts o = *opts;
  struct esbx_session *s = NULL;
  _cleanup_free_ char *snap = NULL;
  int ret;

  if (o.base || o.snapshot)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "fork `%s`: a fork starts from the session's own state", session);
  if (esbx_session_load (store, session, &s, err) < 0)
    return esbx_error_wrap (err, "fork");
  if (esbx_sandbox_snapshot (store, session, NULL, &snap, err) < 0)
    {
      esbx_session_free (s);
      return esbx_error_wrap (err, "fork");
    }
  o.snapshot = snap;
  ret = esbx_session_create (store, s->project, &o, name, err);
  esbx_session_free (s);
  if (ret < 0)
    {
      esbx_error_t ignored = NULL;
      if (esbx_snapshot_rm (store, snap, &ignored) < 0)
        esbx_error_free (&ignored);
      return esbx_error_wrap (err, "fork `%s`", session);
    }
  if (snapshot)
    *snapshot = steal_pointer (&snap);
  return 0;
}

/* ---- expiry ------------------------------------------------------------- */

/* Retire S: with on_expiry snapshot, a snapshot first (then nothing is
   lost and the session goes without the trash); otherwise a discard, whose
   trash keeps unpublished work.  */
static int
retire (esbx_store_t *store, const struct esbx_session *s, const char *why, FILE *report,
        esbx_error_t *err)
{
  const char *on_expiry = json_get_string (s->record, "on_expiry");
  _cleanup_free_ char *snap = NULL;
  unsigned int flags = 0;
  json_t *f = json_new (JSON_OBJECT);

  json_set_string (f, "reason", why);
  if (esbx_holder_stop (store, s->name, err) < 0)
    {
      json_free (f);
      return -1;
    }
  if (on_expiry && strcmp (on_expiry, "snapshot") == 0)
    {
      _cleanup_free_ char *hex = esbx_random_hex (4);
      _cleanup_free_ char *want = xasprintf ("%.100s-expired-%s", s->name, hex);
      if (esbx_snapshot_create (store, s->name, want, &snap, err) < 0)
        {
          json_free (f);
          return -1;
        }
      json_set_string (f, "snapshot", snap);
      flags |= ESBX_DISCARD_FORCE;
    }
  esbx_event_append (store, s->name, "expired", f, NULL);
  if (esbx_sandbox_discard (store, s->name, flags, err) < 0)
    return -1;
  if (report && snap)
    fprintf (report, "retired session `%s` (%s): kept as snapshot `%s`\n", s->name, why, snap);
  else if (report)
    fprintf (report, "retired session `%s` (%s)\n", s->name, why);
  return 0;
}

int
esbx_sandbox_expire (esbx_store_t *store, FILE *report, size_t *retired, esbx_error_t *err)
{
  _cleanup_strv_ char **names = esbx_session_list (store, NULL, err);
  int64_t now = (int64_t)time (NULL);
  int ret = 0;
  size_t i;

  if (retired)
    *retired = 0;
  if (names == NULL)
    return -1;
  for (i = 0; names[i]; i++)
    {
      struct esbx_session *s = NULL;
      esbx_error_t e = NULL;
      const char *why;
      int64_t at;

      if (esbx_session_load (store, names[i], &s, &e) < 0)
        {
          esbx_error_free (&e);
          continue;
        }
      at = esbx_session_expires (store, s, &why);
      if (at > 0 && at <= now)
        {
          if (retire (store, s, why, report, &e) < 0)
            {
              if (esbx_session_exists (store, names[i]))
                {
                  if (report)
                    fprintf (report, "session `%s`: %s\n", names[i], e->msg);
                  ret = -1;
                }
              esbx_error_free (&e);
            }
          else if (retired)
            (*retired)++;
        }
      esbx_session_free (s);
    }
  if (ret < 0)
    return esbx_make_error (err, 0, "expiry: some sessions could not be retired");
  return 0;
}
