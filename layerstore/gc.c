/* esbx gc: remove what crashed operations left.  Every candidate is either
   guarded by a lock its creator holds (temp dirs, staged layers, projects
   being created) or checked under the project lock (unreferenced layers), so
   gc is safe at any time, twice, or concurrently with anything.  It also
   purges the trash entries past their keeping time (trash.c).  */
#include "internal.h"
#include "failpoint.h"
#include "fs.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>

static int
longer_first (const void *a, const void *b)
{
  size_t x = strlen (*(char *const *)a), y = strlen (*(char *const *)b);
  return x < y ? 1 : x > y ? -1 : 0;
}

/* Unmount everything mounted at PATH or beneath it, deepest first: a
   squash that crashed leaves its read-only view mounted in its temp dir.  */
static int
unmount_beneath (const char *path, esbx_error_t *err)
{
  _cleanup_file_ FILE *f = fopen ("/proc/self/mountinfo", "re");
  _cleanup_free_ char *line = NULL;
  struct strv found = { 0 };
  size_t cap = 0, len = strlen (path), i;
  int ret = 0;

  if (f == NULL)
    return esbx_make_error (err, errno, "open /proc/self/mountinfo");
  while (getline (&line, &cap, f) > 0)
    {
      char *save = NULL, *field = strtok_r (line, " ", &save);
      for (i = 0; field && i < 4; i++)
        field = strtok_r (NULL, " ", &save);
      if (field == NULL)
        continue;
      esbx_unescape_mountinfo (field);
      if (strncmp (field, path, len) == 0 && (field[len] == '\0' || field[len] == '/'))
        strv_push (&found, xstrdup (field));
    }
  esbx_sort (found.v, found.n, sizeof (char *), longer_first);
  for (i = 0; i < found.n && ret == 0; i++)
    ret = esbx_unmount (found.v[i], true, err);
  strv_free (&found);
  return ret;
}

/* What one gc run could not do.  One leftover that cannot be removed (a
   tree too odd, a file made immutable) must not keep gc from the others:
   failures are reported and counted, and gc goes on.  */
struct gc
{
  esbx_store_t *store;
  FILE *report;
  size_t failed;
  esbx_error_t first;
};

static void
gc_failed (struct gc *g, const char *what, esbx_error_t *e)
{
  if (g->report)
    fprintf (g->report, "could not remove %s: %s\n", what, (*e)->msg);
  g->failed++;
  if (g->first == NULL)
    {
      g->first = *e;
      *e = NULL;
    }
  else
    esbx_error_free (e);
}

/* Remove DIRFD/NAME (PATH, absolute) unless someone holds a lock on it.  */
static void
remove_unlocked (struct gc *g, int dirfd, const char *name, const char *path, const char *shown)
{
  _cleanup_close_ int fd
      = TEMP_FAILURE_RETRY (openat (dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  esbx_error_t e = NULL;
  /* A discard's remover (remove_detached.c) holds its directory until it
     is gone and only deletes: wait for it.  Any other holder is alive and
     using its entry.  */
  bool removing = esbx_has_prefix (name, ESBX_DISCARD_PREFIX);

  if (fd < 0 && errno == ENOENT)
    return;
  if (fd >= 0 && esbx_lock_fd (fd, true, removing, name, NULL) < 0)
    return;
  if (removing && !esbx_exists_at (dirfd, name))
    return;
  esbx_failpoint ("gc-remove");
  if (unmount_beneath (path, &e) < 0 || esbx_rm_rf_at (dirfd, name, &e) < 0)
    {
      gc_failed (g, shown, &e);
      return;
    }
  if (g->report)
    fprintf (g->report, "removed %s\n", shown);
}

static int
gc_tmp (struct gc *g, int dfd, const char *where, esbx_error_t *err)
{
  _cleanup_strv_ char **names = esbx_list_dir_at (dfd, ".", err);
  size_t i;

  if (names == NULL)
    return -1;
  for (i = 0; names[i]; i++)
    {
      _cleanup_free_ char *shown = xasprintf ("%s/%s", where, names[i]);
      _cleanup_free_ char *path = xasprintf ("%s/%s", g->store->root, shown);
      remove_unlocked (g, dfd, names[i], path, shown);
    }
  return 0;
}

/* The layers PROJECT's sessions build on (their bases and what they
   published), in one walk of the sessions; -1 when a record could not be
   read: then any layer may be in use.  */
static int
layers_in_use (esbx_store_t *store, const char *project, struct strv *used, esbx_error_t *err)
{
  _cleanup_sessions_ struct esbx_sessions it = { 0 };
  struct esbx_session *s;

  if (esbx_sessions_open (store, project, &it, err) < 0)
    return -1;
  while ((s = esbx_sessions_next (&it)))
    {
      strv_push (used, xstrdup (s->base));
      for (char **p = s->published; *p; p++)
        strv_push (used, xstrdup (*p));
    }
  return it.unreadable > 0 ? -1 : 0;
}

/* Layers no stack names, no session builds on and no request of the merge
   queue tests; then frozen layers nothing names (frozen.c).  */
static int
gc_layers (struct gc *g, const char *project, esbx_error_t *err)
{
  esbx_store_t *store = g->store;
  _cleanup_close_ int lock = -1;
  _cleanup_strv_ char **ids = NULL;
  _cleanup_strv_ char **layers = NULL;
  _cleanup_free_ char *rel = esbx_project_file (project, "layers");
  _cleanup_close_ int lfd = -1;
  struct strv used = { 0 };
  esbx_error_t fe = NULL;
  size_t n, i, k;
  int ret = 0;

  lock = esbx_project_lock (store, project, err);
  if (lock < 0)
    return -1;
  if (esbx_project_stack (store, project, &ids, &n, err) < 0)
    return -1;
  lfd = esbx_open_dir_at (store->rootfd, rel, err);
  if (lfd < 0)
    return -1;
  layers = esbx_list_dir_at (lfd, ".", err);
  if (layers == NULL)
    return -1;
  /* Unknown state: keep every layer.  */
  if (layers_in_use (store, project, &used, &fe) < 0)
    {
      esbx_error_free (&fe);
      strv_free (&used);
      return 0;
    }
  for (i = 0; layers[i]; i++)
    {
      _cleanup_free_ char *shown = NULL;
      esbx_error_t e = NULL;
      bool in_use = false;

      for (k = 0; k < n && !in_use; k++)
        in_use = strcmp (ids[k], layers[i]) == 0;
      for (k = 0; k < used.n && !in_use; k++)
        in_use = strcmp (used.v[k], layers[i]) == 0;
      if (in_use || esbx_snapshot_uses_layer (store, project, layers[i])
          || esbx_queue_uses_layer (store, project, layers[i]))
        continue;
      shown = esbx_layer_rel (project, layers[i]);
      if (esbx_rm_rf_at (lfd, layers[i], &e) < 0)
        gc_failed (g, shown, &e);
      else if (g->report)
        fprintf (g->report, "removed %s\n", shown);
    }
  strv_free (&used);
  if (esbx_frozen_gc (store, project, g->report, &fe) < 0)
    gc_failed (g, "unused frozen layers", &fe);
  return ret;
}

/* A create that crashed before its first stack: its creator holds the
   project lock while it works.  One that crashed before it made the lock
   file gets one from us, and loses the race to a creator that is still
   running (project.c checks that its directory survived).  */
static void
gc_half_project (struct gc *g, const char *name)
{
  _cleanup_free_ char *rel = esbx_project_rel (name);
  _cleanup_free_ char *lockrel = xasprintf ("%s/lock", rel);
  _cleanup_close_ int lock = -1;
  esbx_error_t e = NULL;

  lock = esbx_lock_at (g->store->rootfd, lockrel, true, false, NULL);
  if (lock < 0)
    return;
  if (esbx_rm_rf_at (g->store->rootfd, rel, &e) < 0)
    {
      gc_failed (g, rel, &e);
      return;
    }
  if (g->report)
    fprintf (g->report, "removed %s\n", rel);
}

/* Every temp area: ROOT/tmp and each project's tmp/.  Runs under the
   creation lock, so it must not wait for any other lock (squash holds a
   project lock while it makes temp dirs).  */
static int
gc_temp_areas (struct gc *g, char **projects, esbx_error_t *err)
{
  _cleanup_close_ int guard = -1;
  _cleanup_close_ int tfd = -1;
  size_t i;

  guard = esbx_store_creation_lock (g->store, true, err);
  if (guard < 0)
    return -1;
  tfd = esbx_open_dir_at (g->store->rootfd, "tmp", err);
  if (tfd < 0 || gc_tmp (g, tfd, "tmp", err) < 0)
    return -1;
  for (i = 0; projects[i]; i++)
    {
      _cleanup_free_ char *tmprel = esbx_project_file (projects[i], "tmp");
      _cleanup_close_ int pfd = -1;
      esbx_error_t e = NULL;

      if (!esbx_project_exists (g->store, projects[i]))
        {
          gc_half_project (g, projects[i]);
          continue;
        }
      pfd = esbx_open_dir_at (g->store->rootfd, tmprel, &e);
      if (pfd < 0)
        {
          esbx_error_free (&e);
          continue;
        }
      if (gc_tmp (g, pfd, tmprel, &e) < 0)
        gc_failed (g, tmprel, &e);
    }
  return 0;
}

/* Trees that no session names.  Called with the creation lock held
   exclusively: no session is being made with one meanwhile.  */
static int
gc_rootfs (esbx_store_t *store, FILE *report, esbx_error_t *err)
{
  _cleanup_sessions_ struct esbx_sessions it = { 0 };
  _cleanup_strv_ char **keys = NULL;
  struct strv used = { 0 };
  struct esbx_session *sess;
  char **k;
  int ret = 0;

  if (!esbx_exists_at (store->rootfd, "rootfs"))
    return 0;
  keys = esbx_list_dir_at (store->rootfd, "rootfs", err);
  if (keys == NULL || esbx_sessions_open (store, NULL, &it, err) < 0)
    return -1;
  while ((sess = esbx_sessions_next (&it)))
    if (sess->rootfs)
      strv_push (&used, xstrdup (sess->rootfs));
  /* A session whose record cannot be read may use any: keep them all.  */
  if (it.unreadable > 0)
    {
      strv_free (&used);
      return 0;
    }
  for (k = keys; *k; k++)
    {
      _cleanup_free_ char *rel = xasprintf ("rootfs/%s", *k);
      bool in_use = false;

      for (size_t i = 0; i < used.n && !in_use; i++)
        in_use = strcmp (used.v[i], *k) == 0;
      if (in_use)
        continue;
      if (esbx_rm_rf_at (store->rootfd, rel, err) < 0)
        {
          ret = -1;
          continue;
        }
      if (report)
        fprintf (report, "removed rootfs `%s`, which no session uses\n", *k);
    }
  strv_free (&used);
  return ret;
}

int
esbx_gc (esbx_store_t *store, FILE *report, esbx_error_t *err)
{
  _cleanup_strv_ char **projects = NULL;
  struct gc g = { .store = store, .report = report };
  struct esbx_progress *progress;
  size_t i;

  projects = esbx_list_dir_at (store->rootfd, "projects", err);
  progress = esbx_progress_begin ("gc", "projects", projects ? strv_len (projects) : 0);
  if (projects == NULL || gc_temp_areas (&g, projects, err) < 0)
    {
      esbx_error_free (&g.first);
      return esbx_error_wrap (err, "gc");
    }
  {
    _cleanup_close_ int guard = esbx_store_creation_lock (store, true, NULL);
    esbx_error_t e = NULL;

    if (guard >= 0 && gc_rootfs (store, report, &e) < 0)
      gc_failed (&g, "unused rootfs", &e);
  }
  {
    esbx_error_t e = NULL;
    size_t failed = 0;

    if (esbx_trash_expire (store, report, &failed, &e) < 0)
      {
        /* Each failure is reported already; count them all, keep the first.  */
        g.failed += failed > 1 ? failed - 1 : 0;
        gc_failed (&g, "expired trash entries", &e);
      }
  }
  {
    esbx_error_t e = NULL;

    if (esbx_session_disk_gc (store, report, &e) < 0)
      gc_failed (&g, "unused loop devices", &e);
  }
  for (i = 0; projects[i]; i++)
    {
      _cleanup_free_ char *what = xasprintf ("unused layers of project `%s`", projects[i]);
      esbx_error_t e = NULL;

      if (esbx_project_exists (store, projects[i]) && gc_layers (&g, projects[i], &e) < 0)
        gc_failed (&g, what, &e);
      esbx_progress_add (progress, 0);
    }
  if (g.failed == 0)
    {
      esbx_progress_end (progress);
      return 0;
    }
  esbx_make_error (err, 0, "gc: %zu leftover%s could not be removed; the first: %s", g.failed,
                   g.failed == 1 ? "" : "s", g.first->msg);
  esbx_error_free (&g.first);
  return -1;
}
