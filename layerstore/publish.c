/* Conflict-aware publish and rebase (DESIGN.md, "Conflict-aware publish").
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

struct upstream_entry
{
  const struct esbx_change *change;
  const struct esbx_layer *layer;
};

struct upstream
{
  struct esbx_layer **layers;
  size_t n_layers;
  struct upstream_entry *v; /* sorted by path, last writer wins */
  size_t n;
};

static int
entry_cmp (const void *a, const void *b)
{
  const struct upstream_entry *x = a, *y = b;
  return strcmp (x->change->path, y->change->path);
}

static void
upstream_free (struct upstream *u)
{
  size_t i;

  for (i = 0; i < u->n_layers; i++)
    esbx_layer_free (u->layers[i]);
  free (u->layers);
  free (u->v);
  memset (u, 0, sizeof *u);
}

static bool
is_own (char *const *own, const char *id)
{
  for (; own && *own; own++)
    if (strcmp (*own, id) == 0)
      return true;
  return false;
}

/* Layers after BASE in IDS that the session did not publish itself.  */
static int
upstream_load (esbx_store_t *store, const char *project, const char *base, char *const *own,
               char **ids, size_t n, struct upstream *u, esbx_error_t *err)
{
  size_t i, k, start = n, total = 0, m = 0;

  memset (u, 0, sizeof *u);
  for (i = 0; i < n; i++)
    if (strcmp (ids[i], base) == 0)
      start = i + 1;
  if (start > n)
    return esbx_make_error (err, 0, "project `%s`: base layer `%s` is no longer in the stack",
                            project, base);
  u->layers = xmalloc0 ((n - start + 1) * sizeof *u->layers);
  for (i = start; i < n; i++)
    {
      if (is_own (own, ids[i]))
        continue;
      if (esbx_layer_load (store, project, ids[i], &u->layers[u->n_layers], err) < 0)
        {
          upstream_free (u);
          return -1;
        }
      total += u->layers[u->n_layers]->changes.n;
      u->n_layers++;
    }
  u->v = xmalloc0 ((total + 1) * sizeof *u->v);
  for (i = 0; i < u->n_layers; i++)
    for (k = 0; k < u->layers[i]->changes.n; k++)
      {
        u->v[m].change = &u->layers[i]->changes.v[k];
        u->v[m].layer = u->layers[i];
        m++;
      }
  /* Sort by path and keep, of each path, the entry of the newest layer.  */
  qsort (u->v, m, sizeof *u->v, entry_cmp);
  {
    size_t w = 0;
    for (i = 0; i < m; i++)
      {
        if (w > 0 && strcmp (u->v[w - 1].change->path, u->v[i].change->path) == 0)
          {
            if (u->v[i].layer->index > u->v[w - 1].layer->index)
              u->v[w - 1] = u->v[i];
            continue;
          }
        u->v[w++] = u->v[i];
      }
    u->n = w;
  }
  return 0;
}

static const struct upstream_entry *
upstream_find (const struct upstream *u, const char *path)
{
  struct esbx_change c = { .path = (char *)path };
  struct upstream_entry key = { .change = &c };

  if (u->n == 0)
    return NULL;
  return bsearch (&key, u->v, u->n, sizeof *u->v, entry_cmp);
}

static bool
same_state (const struct esbx_change *a, const struct esbx_change *b)
{
  if ((a->kind == ESBX_DELETED) != (b->kind == ESBX_DELETED))
    return false;
  if (a->kind == ESBX_DELETED)
    return true;
  if (a->type != b->type || a->mode != b->mode)
    return false;
  if (a->type == ESBX_TYPE_FILE)
    return strcmp (a->sha256, b->sha256) == 0;
  if (a->type == ESBX_TYPE_SYMLINK)
    return a->target && b->target && strcmp (a->target, b->target) == 0;
  return true;
}

/* Does the change remove or replace what lies beneath its path?  */
static bool
hides_below (const struct esbx_change *c)
{
  return c->kind == ESBX_DELETED || c->type != ESBX_TYPE_DIR || c->opaque;
}

static void
add_conflict (struct esbx_publish_result *r, const char *path, const struct esbx_layer *l)
{
  size_t i;

  for (i = 0; i < r->n_conflicts; i++)
    if (strcmp (r->conflicts[i].path, path) == 0)
      return;
  r->conflicts = xrealloc (r->conflicts, (r->n_conflicts + 1) * sizeof *r->conflicts);
  r->conflicts[r->n_conflicts].path = xstrdup (path);
  r->conflicts[r->n_conflicts].layer = xstrdup (l->id);
  r->conflicts[r->n_conflicts].session = xstrdup (l->session);
  r->n_conflicts++;
}

static void
check_conflicts (const struct esbx_changeset *cs, const struct upstream *u,
                 struct esbx_publish_result *r)
{
  size_t i, k;

  for (i = 0; i < cs->n; i++)
    {
      const struct esbx_change *c = &cs->v[i];
      const struct upstream_entry *e = upstream_find (u, c->path);
      _cleanup_free_ char *prefix = xstrdup (c->path);
      char *slash;
      size_t plen = strlen (c->path);

      if (e && !same_state (c, e->change))
        add_conflict (r, c->path, e->layer);
      /* Upstream removed or replaced a directory above this path.  */
      while ((slash = strrchr (prefix, '/')) != NULL && slash != prefix)
        {
          *slash = '\0';
          e = upstream_find (u, prefix);
          if (e && hides_below (e->change))
            add_conflict (r, c->path, e->layer);
        }
      /* This path removes or replaces a directory under which upstream
         changed something.  */
      if (!hides_below (c))
        continue;
      for (k = 0; k < u->n; k++)
        {
          const char *p = u->v[k].change->path;
          if (strncmp (p, c->path, plen) == 0 && p[plen] == '/')
            add_conflict (r, c->path, u->v[k].layer);
        }
    }
}

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
  return esbx_make_error_code (
      err, ESBX_EXIT_CONFLICT, 0,
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
  struct upstream up = { 0 };
  _cleanup_close_ int ufd = -1;
  _cleanup_close_ int slock = -1;
  _cleanup_close_ int plock = -1;
  _cleanup_strv_ char **ids = NULL;
  json_t *pub;
  size_t n;
  int ret = -1;

  memset (r, 0, sizeof *r);
  if (message && !esbx_utf8_valid (message, strlen (message)))
    return esbx_make_error_code (err, ESBX_EXIT_USAGE, 0, "publish `%s`: message is not UTF-8",
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
  if (upstream_load (store, s->project, s->base, s->published, ids, n, &up, err) < 0)
    goto out;
  check_conflicts (&layer.changes, &up, r);
  if (r->n_conflicts > 0)
    {
      conflict_error (err, "publish", name, r);
      goto out;
    }
  layer.session = xstrdup (name);
  layer.message = xstrdup (message ? message : "");
  layer.labels = json_new (JSON_OBJECT);
  for (size_t i = 0; i < s->labels->n; i++)
    json_set_string (layer.labels, s->labels->keys[i], s->labels->items[i]->text);
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
  ret = 0;

out:
  /* The conflict message already names the session.  */
  if (ret < 0 && !(err && *err && (*err)->code == ESBX_EXIT_CONFLICT))
    esbx_error_wrap (err, "publish `%s`", name);
  esbx_layer_unstage (store, &staged);
  upstream_free (&up);
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
  struct upstream up = { 0 };
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
  if (upstream_load (store, s->project, s->base, s->published, ids, n, &up, err) < 0)
    goto out;
  check_conflicts (&cs, &up, r);
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
  if (ret < 0 && !(err && *err && (*err)->code == ESBX_EXIT_CONFLICT))
    esbx_error_wrap (err, "rebase `%s`", name);
  upstream_free (&up);
  esbx_changeset_free (&cs);
  esbx_changeset_free (&same);
  esbx_session_free (s);
  return ret;
}
