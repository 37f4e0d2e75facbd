/* esbx blame: the newest layer that changed a path.  */
#include "internal.h"
#include "path.h"
#include "utils.h"

#include <string.h>

/* Did change C touch PATH: the path itself, or a directory above it that it
   deleted or replaced.  */
static bool
touches (const struct esbx_changeset *cs, const char *path)
{
  _cleanup_free_ char *prefix = xstrdup (path);
  const struct esbx_change *c;
  char *slash;

  if (esbx_changeset_find (cs, path))
    return true;
  while ((slash = strrchr (prefix, '/')) != NULL && slash != prefix)
    {
      *slash = '\0';
      c = esbx_changeset_find (cs, prefix);
      if (c && (c->kind == ESBX_DELETED || c->type != ESBX_TYPE_DIR || c->opaque))
        return true;
    }
  return false;
}

int
esbx_blame (esbx_store_t *store, const char *project, const char *path, struct esbx_layer **out,
            esbx_error_t *err)
{
  _cleanup_strv_ char **ids = NULL;
  _cleanup_free_ char *rel = NULL, *abs = NULL;
  size_t n, i;

  if (esbx_clean_relpath (path, false, &rel, err) < 0)
    return esbx_error_wrap (err, "blame");
  abs = xasprintf ("/%s", rel);
  if (esbx_project_stack (store, project, &ids, &n, err) < 0)
    return -1;
  for (i = n; i > 0; i--)
    {
      struct esbx_layer *l = NULL;

      if (esbx_layer_load (store, project, ids[i - 1], &l, err) < 0)
        return -1;
      if (touches (&l->changes, abs))
        {
          *out = l;
          return 0;
        }
      esbx_layer_free (l);
    }
  return esbx_make_error (err, 0, "blame: project `%s` has no change to `%s`", project, abs);
}
