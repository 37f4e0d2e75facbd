/* Snapshots, forks and the end of bounded lifetimes, as the front ends see
 * them.  A snapshot is a consistent point: the session's processes are
 * frozen (cgroup freezer) while its upper is moved into a frozen layer (or
 * copied, layerstore/snapshot.c), then thawed; when only the holder runs,
 * its mount of the workspace is taken down for the move and put back over
 * the new layer (holder_workspace.c).  The
 * freeze is taken under ROOT/sessions/S/snapshot.lock; a snapshot killed
 * while the session is frozen leaves the lock free, and the next snapshot
 * or gc thaws the session (esbx_sandbox_thaw_abandoned).  Retiring
 * sessions at their expiry is sandbox_expire.c.  */
#include "sandbox.h"
#include "cgroup.h"
#include "events.h"
#include "fs.h"
#include "holder.h"
#include "log.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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
  _cleanup_free_ char *cg = esbx_cgroup_session_path (store, session);
  _cleanup_close_ int dfd = -1;
  _cleanup_close_ int lock = -1;

  /* Most sessions are not frozen: asked first, without the lock (gc asks
     for every session), then again under it.  */
  if (!esbx_cgroup_frozen (cg))
    return;
  dfd = esbx_session_open_dir (store, session, NULL);
  if (dfd < 0)
    return;
  lock = esbx_lock_at (dfd, "snapshot.lock", true, false, NULL);
  if (lock >= 0)
    thaw_if_frozen (store, session, report);
}

/* Whether PID has exited (a zombie the holder has not reaped yet, or
   gone): it holds no file, no directory and no mount any more.  */
static bool
has_exited (pid_t pid)
{
  _cleanup_free_ char *path = xasprintf ("/proc/%d/stat", (int)pid);
  _cleanup_close_ int fd = open (path, O_RDONLY | O_CLOEXEC);
  char buf[512];
  const char *p;
  ssize_t len;

  if (fd < 0)
    return errno == ENOENT || errno == ESRCH;
  len = TEMP_FAILURE_RETRY (read (fd, buf, sizeof buf - 1));
  if (len <= 0)
    return false;
  buf[len] = '\0';
  /* The state follows the command's closing parenthesis.  */
  p = strrchr (buf, ')');
  return p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

/* Whether the holder is the only process of the session (an exec that
   ended but is not reaped yet does not count): then nothing inside has a
   file of the workspace open, and the upper may move.  */
static bool
only_holder (const char *cg, pid_t holder)
{
  _cleanup_free_ pid_t *pids = NULL;
  esbx_error_t e = NULL;
  bool seen = false;
  size_t n = 0, i;

  if (esbx_cgroup_pids (cg, &pids, &n, &e) < 0)
    {
      esbx_error_free (&e);
      return false;
    }
  for (i = 0; i < n; i++)
    {
      if (pids[i] == holder)
        seen = true;
      else if (!has_exited (pids[i]))
        return false;
    }
  return seen;
}

int
esbx_sandbox_snapshot (esbx_store_t *store, const char *session, const char *name, char **out,
                       esbx_error_t *err)
{
  struct esbx_holder_info info = { 0 };
  struct esbx_session *s = NULL;
  _cleanup_free_ char *cg = NULL, *merged = NULL;
  _cleanup_close_ int dfd = -1;
  _cleanup_close_ int lock = -1;
  esbx_error_t terr = NULL;
  unsigned flags = 0;
  bool frozen = false, detached = false, moved = false;
  int ret;

  dfd = esbx_session_open_dir (store, session, err);
  if (dfd < 0)
    return esbx_error_wrap (err, "snapshot");
  lock = esbx_lock_at (dfd, "snapshot.lock", true, true, err);
  if (lock < 0)
    return esbx_error_wrap (err, "snapshot `%s`", session);
  if (esbx_session_load_at (dfd, session, &s, err) < 0)
    return esbx_error_wrap (err, "snapshot");
  thaw_if_frozen (store, session, NULL);
  cg = esbx_cgroup_session_path (store, session);
  merged = esbx_session_merged (store, session);
  if (esbx_holder_get (store, session, &info, NULL) == 0)
    {
      if (esbx_cgroup_freeze (cg, true, err) < 0)
        {
          esbx_cgroup_freeze (cg, false, NULL);
          esbx_holder_info_free (&info);
          esbx_session_free (s);
          return esbx_error_wrap (err, "snapshot `%s`", session);
        }
      frozen = true;
      /* The holder's own mount of the view goes first: the upper moves
         only when no overlay is left over it.  A process of the session
         keeps the view (and the upper is copied).  */
      if (only_holder (cg, info.pid)
          && esbx_holder_workspace_detach (&info, s->workspace, &terr) == 0)
        detached = true;
      else
        flags |= ESBX_SNAPSHOT_COPY;
      if (terr)
        {
          esbx_warn ("snapshot `%s`: %s", session, terr->msg);
          esbx_error_free (&terr);
        }
    }
  ret = esbx_snapshot_create (store, session, name, flags, out, &moved, err);
  if (detached && esbx_holder_workspace_attach (&info, merged, s->workspace, &terr) < 0)
    {
      /* A holder without its workspace is no use: the next command
         starts another.  */
      esbx_warn ("snapshot `%s`: %s; the holder stops", session, terr->msg);
      esbx_error_free (&terr);
      if (frozen)
        esbx_cgroup_freeze (cg, false, NULL);
      frozen = false;
      if (esbx_holder_stop (store, session, &terr) < 0)
        {
          esbx_warn ("snapshot `%s`: %s", session, terr->msg);
          esbx_error_free (&terr);
        }
    }
  if (frozen && esbx_cgroup_freeze (cg, false, &terr) < 0)
    {
      esbx_warn ("snapshot `%s`: %s", session, terr->msg);
      esbx_error_free (&terr);
    }
  if (ret == 0)
    {
      json_t *f = json_new (JSON_OBJECT);
      json_set_string (f, "snapshot", *out);
      json_set (f, "moved", json_new_bool (moved));
      esbx_event_append (store, session, "snapshot", f, NULL);
    }
  esbx_holder_info_free (&info);
  esbx_session_free (s);
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
  /* A fork keeps its parent's wall unless it names another: the store's
     default may be weaker than what the parent was made with.  */
  if (o.isolation == NULL)
    o.isolation = json_get_string (s->record, "isolation");
  if (o.userns == NULL)
    o.userns = json_get_string (s->record, "userns");
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
