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
  struct esbx_session *s = NULL;
  struct esbx_staged staged = { .lockfd = -1 };
  struct esbx_layer layer = { 0 };
  struct esbx_upstream up = { 0 };
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
  ufd = esbx_session_scan (store, s, NULL, &layer.changes, NULL, err);
  if (ufd < 0)
    goto out;
  r->n_changes = layer.changes.n;
  if (layer.changes.n == 0)
    {
      r->published = true;
      esbx_counters_publish (store, false);
      ret = 0;
      goto out;
    }
  esbx_failpoint ("publish-scanned");
  if (esbx_layer_stage (store, s->project, ufd, &layer.changes, &staged, err) < 0)
    goto out;
  esbx_failpoint ("publish-staged");

  plock = esbx_project_lock (store, s->project, err);
  if (plock < 0 || esbx_project_stack (store, s->project, &ids, &n, err) < 0)
    goto out;
  if (esbx_upstream_load (store, s->project, s->base, s->published, ids, n, &up, err) < 0)
    goto out;
  esbx_conflicts_find (&layer.changes, &up, r);
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
  r->layer = xstrdup (layer.id);

  /* Remember the layer so that the next publish carries only what is new.  */
  pub = json_get (s->record, "published");
  if (pub == NULL || pub->type != JSON_ARRAY)
    {
      pub = json_new (JSON_ARRAY);
      json_set (s->record, "published", pub);
    }
  json_append (pub, json_new_string (layer.id));
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
  size_t n, i;
  int ret = -1;

  memset (r, 0, sizeof *r);
  slock = esbx_session_lock (store, name, err);
  if (slock < 0)
    return esbx_error_wrap (err, "rebase");
  if (esbx_session_load (store, name, &s, err) < 0)
    return esbx_error_wrap (err, "rebase");
  ufd = esbx_session_scan (store, s, NULL, &cs, &same, err);
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
      conflict_error (err, "rebase", name, r);
      goto out;
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
  json_set_string (s->record, "base", ids[n - 1]);
  json_set (s->record, "published", json_new (JSON_ARRAY));
  if (esbx_session_save (store, name, s->record, err) < 0)
    goto out;
  close (plock);
  plock = -1;
  if (esbx_session_mount (store, name, err) < 0)
    goto out;
  r->layer = xstrdup (ids[n - 1]);
  ret = 0;

out:
  if (ret < 0 && !(err && *err && (*err)->kind == ESBX_ERR_CONFLICT))
    esbx_error_wrap (err, "rebase `%s`", name);
  esbx_upstream_free (&up);
  esbx_changeset_free (&cs);
  esbx_changeset_free (&same);
  esbx_session_free (s);
  return ret;
}
