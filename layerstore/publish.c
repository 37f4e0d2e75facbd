/* Publish and rebase (DESIGN.md, "Conflict-aware publish"); the conflict
 * rules themselves are in conflict.c.
 * The change set is scanned and staged as a layer outside the project lock;
 * the lock covers only reading the head, the conflict check and the append.  */
#include "internal.h"
#include "failpoint.h"
#include "fs.h"
#include "path.h"
#include "text.h"
#include "utils.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

void
esbx_publish_result_free (struct esbx_publish_result *r)
{
  size_t i;

  for (i = 0; i < r->n_conflicts; i++)
    {
      free (r->conflicts[i].path);
      free (r->conflicts[i].layer);
      free (r->conflicts[i].session);
    }
  free (r->conflicts);
  free (r->layer);
  cleanup_strvp (&r->merged);
  memset (r, 0, sizeof *r);
}

static int
conflict_error (esbx_error_t *err, const char *verb, const char *name,
                const struct esbx_publish_result *r)
{
  return esbx_make_error_kind (
      err, ESBX_ERR_CONFLICT, 0,
      "%s `%s`: %zu conflicting path%s with upstream (first: `%s` in layer "
      "`%s`)",
      verb, name, r->n_conflicts, r->n_conflicts == 1 ? "" : "s", r->conflicts[0].path,
      r->conflicts[0].layer);
}

int
esbx_session_publish (esbx_store_t *store, const char *name, const char *message,
                      struct esbx_publish_result *r, esbx_error_t *err)
{
  return esbx_session_publish_flags (store, name, message, 0, r, err);
}

/* A file rebase merged with overlapping hunks is published only once its
   conflict markers are gone.  */
static int
check_unmerged (const struct esbx_session *s, int ufd, esbx_error_t *err)
{
  const json_t *unmerged = json_get (s->record, "unmerged"), *p;
  size_t i;

  json_array_foreach (unmerged, i, p)
    if (p->type == JSON_STRING && esbx_has_conflict_markers (ufd, p->text))
      return esbx_make_error_kind (err, ESBX_ERR_CONFLICT, 0,
                                   "publish `%s`: `%s` still has the conflict markers rebase "
                                   "left; resolve them first",
                                   s->name, p->text);
  return 0;
}

int
esbx_session_publish_flags (esbx_store_t *store, const char *name, const char *message,
                            unsigned flags, struct esbx_publish_result *r, esbx_error_t *err)
{
  return esbx_session_publish_allow (store, name, message, flags, NULL, r, err);
}

int
esbx_session_publish_allow (esbx_store_t *store, const char *name, const char *message,
                            unsigned flags, char *const *allow, struct esbx_publish_result *r,
                            esbx_error_t *err)
{
  struct esbx_session *s = NULL;
  struct esbx_staged staged = { .lockfd = -1 };
  struct esbx_layer layer = { 0 };
  struct esbx_upstream up = { 0 };
  struct esbx_remote_warm *warm = NULL;
  _cleanup_close_ int ufd = -1;
  _cleanup_close_ int slock = -1;
  _cleanup_close_ int plock = -1;
  _cleanup_strv_ char **ids = NULL;
  json_t *pub;
  size_t n;
  int ret = -1;

  memset (r, 0, sizeof *r);
  if (message && !esbx_utf8_valid (message, strlen (message)))
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "publish `%s`: message is not UTF-8",
                                 name);
  slock = esbx_session_lock (store, name, err);
  if (slock < 0)
    return esbx_error_wrap (err, "publish");
  if (esbx_session_load (store, name, &s, err) < 0)
    return esbx_error_wrap (err, "publish");
  if (esbx_project_is_shared (store, s->project))
    warm = esbx_remote_warm_start (store, s->project);
  ufd = esbx_session_scan (store, s, NULL, flags, &layer.changes, NULL, NULL, err);
  if (ufd < 0 || check_unmerged (s, ufd, err) < 0)
    goto out;
  r->n_changes = layer.changes.n;
  if (layer.changes.n == 0)
    {
      r->published = true;
      esbx_counters_publish (store, false);
      ret = 0;
      goto out;
    }
  if (esbx_secret_scan_changes (store, s, ufd, &layer.changes, allow, err) < 0)
    goto out;
  esbx_failpoint ("publish-scanned");
  if (esbx_layer_stage (store, s->project, ufd, &layer.changes, &staged, err) < 0)
    goto out;
  esbx_failpoint ("publish-staged");

  if (warm)
    {
      int k = esbx_remote_commit (store, s, message, &staged, &layer, warm, r, err);
      if (k < 0)
        goto out;
      if (k > 0)
        goto conflicts;
      goto committed;
    }
  plock = esbx_project_lock (store, s->project, err);
  if (plock < 0 || esbx_project_stack (store, s->project, &ids, &n, err) < 0)
    goto out;
  if (esbx_upstream_load (store, s->project, s->base, s->published, ids, n, &up, err) < 0)
    goto out;
  esbx_conflicts_find (&layer.changes, &up, r);
conflicts:
  if (r->n_conflicts > 0)
    {
      esbx_counters_publish (store, true);
      conflict_error (err, "publish", name, r);
      goto out;
    }
  layer.session = xstrdup (name);
  layer.message = xstrdup (message ? message : "");
  layer.labels = esbx_labels_copy (s->labels);
  if (esbx_layer_commit (store, s->project, &staged, &layer, ids, n, err) < 0)
    goto out;
  esbx_failpoint ("publish-head-moved");
  close (plock);
  plock = -1;
committed:
  r->layer = xstrdup (layer.id);

  /* Remember the layer so that the next publish carries only what is new.  */
  pub = json_get (s->record, "published");
  if (pub == NULL || pub->type != JSON_ARRAY)
    {
      pub = json_new (JSON_ARRAY);
      json_set (s->record, "published", pub);
    }
  json_append (pub, json_new_string (layer.id));
  json_set (s->record, "unmerged", json_new (JSON_ARRAY));
  if (esbx_session_save (store, name, s->record, err) < 0)
    goto out;
  esbx_failpoint ("publish-done");
  r->published = true;
  esbx_counters_publish (store, false);
  ret = 0;

out:
  /* The conflict message already names the session.  */
  if (ret < 0 && !(err && *err && (*err)->kind == ESBX_ERR_CONFLICT))
    esbx_error_wrap (err, "publish `%s`", name);
  esbx_layer_unstage (store, &staged);
  esbx_remote_warm_free (warm);
  esbx_upstream_free (&up);
  free (layer.id);
  free (layer.parent);
  free (layer.created);
  free (layer.session);
  free (layer.message);
  json_free (layer.labels);
  esbx_changeset_free (&layer.changes);
  esbx_session_free (s);
  return ret;
}

/* The paths rebase left with conflict markers, in the record until a
   publish finds them resolved.  */
static void
record_unmerged (json_t *record, const struct esbx_merges *m)
{
  json_t *arr = json_new (JSON_ARRAY);
  size_t i;

  for (i = 0; i < m->n; i++)
    if (m->v[i].markers)
      json_append (arr, json_new_string (m->v[i].path));
  json_set (record, "unmerged", arr);
}

/* After the merges of rebase: R's conflicts become those with markers
   (flagged), the clean ones R->merged.  Returns how many have markers.  */
static size_t
keep_marked (struct esbx_publish_result *r, const struct esbx_merges *m)
{
  struct strv merged = { 0 };
  size_t i, kept = 0;

  for (i = 0; i < r->n_conflicts && i < m->n; i++)
    {
      if (!m->v[i].markers)
        {
          strv_push (&merged, r->conflicts[i].path);
          free (r->conflicts[i].layer);
          free (r->conflicts[i].session);
          continue;
        }
      r->conflicts[i].markers = true;
      r->conflicts[kept++] = r->conflicts[i];
    }
  if (m->n > 0)
    r->n_conflicts = kept;
  r->merged = merged.v ? merged.v : xmalloc0 (sizeof (char *));
  return kept;
}

static int
merged_error (esbx_error_t *err, const char *name, const struct esbx_publish_result *r)
{
  return esbx_make_error_kind (err, ESBX_ERR_CONFLICT, 0,
                               "rebase `%s`: %zu path%s merged with conflict markers (first: "
                               "`%s`); the base moved: resolve them, then publish",
                               name, r->n_conflicts, r->n_conflicts == 1 ? "" : "s",
                               r->conflicts[0].path);
}

int
esbx_session_rebase (esbx_store_t *store, const char *name, struct esbx_publish_result *r,
                     esbx_error_t *err)
{
  struct esbx_session *s = NULL;
  struct esbx_changeset cs = { 0 }, same = { 0 };
  struct esbx_upstream up = { 0 };
  _cleanup_close_ int ufd = -1;
  _cleanup_close_ int slock = -1;
  _cleanup_close_ int plock = -1;
  _cleanup_strv_ char **ids = NULL;
  _cleanup_close_ int sdfd = -1;
  struct esbx_merges merges = { 0 };
  size_t n, i;
  int ret = -1, k;

  memset (r, 0, sizeof *r);
  slock = esbx_session_lock (store, name, err);
  if (slock < 0)
    return esbx_error_wrap (err, "rebase");
  if (esbx_session_load (store, name, &s, err) < 0)
    return esbx_error_wrap (err, "rebase");
  /* Onto the head in etcd for a shared project.  */
  if (esbx_project_is_shared (store, s->project)
      && esbx_remote_sync (store, s->project, NULL, err) < 0)
    goto out;
  ufd = esbx_session_scan (store, s, NULL, 0, &cs, &same, NULL, err);
  if (ufd < 0)
    goto out;
  r->n_changes = cs.n;

  plock = esbx_project_lock (store, s->project, err);
  if (plock < 0 || esbx_project_stack (store, s->project, &ids, &n, err) < 0)
    goto out;
  if (strcmp (ids[n - 1], s->base) == 0)
    {
      r->layer = xstrdup (s->base);
      ret = 0;
      goto out;
    }
  if (esbx_upstream_load (store, s->project, s->base, s->published, ids, n, &up, err) < 0)
    goto out;
  esbx_conflicts_find (&cs, &up, r);
  if (r->n_conflicts > 0)
    {
      /* Text files both sides changed are merged; anything else keeps the
         whole rebase from happening.  */
      sdfd = esbx_session_open_dir (store, name, err);
      if (sdfd < 0)
        goto out;
      k = esbx_merges_prepare (store, s, sdfd, ufd, ids[n - 1], r, &merges, err);
      if (k < 0)
        goto out;
      if (k > 0)
        {
          conflict_error (err, "rebase", name, r);
          goto out;
        }
    }
  if (esbx_session_unmount (store, name, err) < 0)
    goto out;
  /* A copy-up identical to the old base would hide what upstream did to
     that path once the base moves: drop it.  */
  for (i = 0; i < same.n; i++)
    if (same.v[i].type != ESBX_TYPE_DIR)
      {
        _cleanup_free_ char *pbase = NULL;
        _cleanup_close_ int pfd = esbx_open_parent_beneath (ufd, same.v[i].path + 1, &pbase, err);
        if (pfd < 0 || unlinkat (pfd, pbase, 0) < 0)
          {
            if (pfd >= 0)
              esbx_make_error (err, errno, "remove stale copy-up `%s`", same.v[i].path);
            goto out;
          }
      }
  if (esbx_merges_apply (sdfd, ufd, &merges, err) < 0)
    goto out;
  json_set_string (s->record, "base", ids[n - 1]);
  json_set (s->record, "published", json_new (JSON_ARRAY));
  record_unmerged (s->record, &merges);
  if (esbx_session_save (store, name, s->record, err) < 0)
    goto out;
  close (plock);
  plock = -1;
  if (esbx_session_mount (store, name, err) < 0)
    goto out;
  r->layer = xstrdup (ids[n - 1]);
  if (keep_marked (r, &merges) > 0)
    {
      merged_error (err, name, r);
      goto out;
    }
  ret = 0;

out:
  if (ret < 0 && !(err && *err && (*err)->kind == ESBX_ERR_CONFLICT))
    esbx_error_wrap (err, "rebase `%s`", name);
  esbx_merges_free (&merges, sdfd);
  esbx_upstream_free (&up);
  esbx_changeset_free (&cs);
  esbx_changeset_free (&same);
  esbx_session_free (s);
  return ret;
}
