/* The conflict rules of publish and rebase (DESIGN.md, "Conflict-aware
   publish", step 3): a session's change set against what the layers
   published after its base changed.  */
#include "internal.h"
#include "utils.h"

#include <string.h>

static int
entry_cmp (const void *a, const void *b)
{
  const struct esbx_upstream_entry *x = a, *y = b;
  return strcmp (x->change->path, y->change->path);
}

void
esbx_upstream_free (struct esbx_upstream *u)
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

void
esbx_upstream_index (struct esbx_upstream *u)
{
  size_t i, k, total = 0, m = 0, w = 0;

  for (i = 0; i < u->n_layers; i++)
    total += u->layers[i]->changes.n;
  free (u->v);
  u->v = xmalloc0 ((total + 1) * sizeof *u->v);
  for (i = 0; i < u->n_layers; i++)
    for (k = 0; k < u->layers[i]->changes.n; k++)
      {
        u->v[m].change = &u->layers[i]->changes.v[k];
        u->v[m].layer = u->layers[i];
        m++;
      }
  /* Sort by path and keep, of each path, the entry of the newest layer.  */
  esbx_sort (u->v, m, sizeof *u->v, entry_cmp);
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

int
esbx_upstream_load (esbx_store_t *store, const char *project, const char *base, char *const *own,
                    char **ids, size_t n, struct esbx_upstream *u, esbx_error_t *err)
{
  size_t i, start = n + 1;

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
          esbx_upstream_free (u);
          return -1;
        }
      u->n_layers++;
    }
  esbx_upstream_index (u);
  return 0;
}

const struct esbx_upstream_entry *
esbx_upstream_find (const struct esbx_upstream *u, const char *path)
{
  struct esbx_change c = { .path = (char *)path };
  struct esbx_upstream_entry key = { .change = &c };

  if (u->n == 0)
    return NULL;
  return bsearch (&key, u->v, u->n, sizeof *u->v, entry_cmp);
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
  r->conflicts[r->n_conflicts] = (struct esbx_conflict){ .path = xstrdup (path),
                                                         .layer = xstrdup (l->id),
                                                         .session = xstrdup (l->session) };
  r->n_conflicts++;
}

void
esbx_conflicts_find (const struct esbx_changeset *cs, const struct esbx_upstream *u,
                     struct esbx_publish_result *r)
{
  size_t i, k;

  for (i = 0; i < cs->n; i++)
    {
      const struct esbx_change *c = &cs->v[i];
      const struct esbx_upstream_entry *e = esbx_upstream_find (u, c->path);
      _cleanup_free_ char *prefix = xstrdup (c->path);
      char *slash;
      size_t plen = strlen (c->path);

      if (e && !esbx_change_same_state (c, e->change))
        add_conflict (r, c->path, e->layer);
      /* Upstream removed or replaced a directory above this path.  */
      while ((slash = strrchr (prefix, '/')) != NULL && slash != prefix)
        {
          *slash = '\0';
          e = esbx_upstream_find (u, prefix);
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
