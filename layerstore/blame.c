/* esbx blame: the layer that first produced the current state of a path.

   A layer's record speaks about PATH when it lists PATH itself, or a
   directory above it that it deleted or replaced (a deletion, a
   non-directory, an opaque directory): PATH is then absent in that layer.
   The newest layer that speaks about PATH gives its current state.  Layers
   below it that left PATH in the same state (esbx_change_same_state: same
   type, mode and content for files, same target for symlinks, absent for
   deletions) made it first; the newer ones only repeated it: an agent that
   wrote identical content, or one that accepted a deletion — its record
   deletes PATH, or a directory above it, while PATH was already absent in
   the layer beneath (two sessions removed the same file; publish lets the
   second through as no conflict).  Blame names the lowest layer of that
   identical run.  */
#include "internal.h"
#include "path.h"
#include "utils.h"

#include <string.h>

/* The state that change set CS gives PATH: its own entry, a deletion when
   CS deleted or replaced a directory above it, NULL when CS leaves PATH as
   it was.  */
static const struct esbx_change *
state_in (const struct esbx_changeset *cs, const char *path)
{
  static const struct esbx_change absent = { .kind = ESBX_DELETED };
  _cleanup_free_ char *prefix = xstrdup (path);
  const struct esbx_change *c = esbx_changeset_find (cs, path);
  char *slash;

  if (c)
    return c;
  while ((slash = strrchr (prefix, '/')) != NULL && slash != prefix)
    {
      *slash = '\0';
      c = esbx_changeset_find (cs, prefix);
      if (c && (c->kind == ESBX_DELETED || c->type != ESBX_TYPE_DIR || c->opaque))
        return &absent;
    }
  return NULL;
}

int
esbx_blame (esbx_store_t *store, const char *project, const char *path, struct esbx_layer **out,
            esbx_error_t *err)
{
  _cleanup_strv_ char **ids = NULL;
  _cleanup_free_ char *rel = NULL, *abs = NULL;
  struct esbx_layer *found = NULL;
  const struct esbx_change *state = NULL; /* in FOUND's record */
  size_t n, i;

  if (esbx_clean_relpath (path, false, &rel, err) < 0)
    return esbx_error_wrap (err, "blame");
  abs = xasprintf ("/%s", rel);
  if (esbx_project_stack (store, project, &ids, &n, err) < 0)
    return -1;
  for (i = n; i > 0; i--)
    {
      struct esbx_layer *l = NULL;
      const struct esbx_change *c;

      if (esbx_layer_load (store, project, ids[i - 1], &l, err) < 0)
        {
          esbx_layer_free (found);
          return -1;
        }
      c = state_in (&l->changes, abs);
      if (c && found && !esbx_change_same_state (c, state))
        {
          esbx_layer_free (l);
          break;
        }
      if (c == NULL)
        {
          esbx_layer_free (l);
          continue;
        }
      esbx_layer_free (found);
      found = l;
      state = c;
    }
  if (found == NULL)
    return esbx_make_error (err, 0, "blame: project `%s` has no change to `%s`", project, abs);
  *out = found;
  return 0;
}
