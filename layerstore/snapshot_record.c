/* Snapshot records (README, "Snapshots and forks"): where a snapshot is,
   its base and the layers a session made from it mounts: the frozen
   layers it names (frozen.c), or, for a snapshot of a store from before
   them, its own diff/ and its parents'.  The lowest part of snapshots:
   session mounts need it, and it needs nothing of sessions.  */
#include "internal.h"
#include "fs.h"
#include "text.h"
#include "utils.h"

#include <string.h>

/* A chain of snapshots of forks of forks deeper than this is refused: each
   one is a lower layer of the sessions made from the top one.  */
#define MAX_CHAIN 64

char *
esbx_snapshot_rel (const char *project, const char *name)
{
  return esbx_project_file (project, "snapshots/%s", name);
}

int
esbx_snapshot_find_project (esbx_store_t *store, const char *name, char **project,
                            esbx_error_t *err)
{
  _cleanup_strv_ char **projects = NULL;
  size_t i;

  if (esbx_check_name ("snapshot", name, err) < 0)
    return -1;
  projects = esbx_project_list (store, err);
  if (projects == NULL)
    return -1;
  for (i = 0; projects[i]; i++)
    {
      _cleanup_free_ char *dir = esbx_snapshot_rel (projects[i], name);
      _cleanup_free_ char *rel = xasprintf ("%s/record.json", dir);

      if (esbx_exists_at (store->rootfd, rel))
        {
          *project = xstrdup (projects[i]);
          return 0;
        }
    }
  return esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0, "snapshot `%s` does not exist", name);
}

json_t *
esbx_snapshot_load_record (esbx_store_t *store, const char *project, const char *name,
                           esbx_error_t *err)
{
  _cleanup_free_ char *dir = esbx_snapshot_rel (project, name);
  _cleanup_free_ char *rel = xasprintf ("%s/record.json", dir);
  json_t *j;

  if (!esbx_exists_at (store->rootfd, rel))
    return esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0,
                                 "snapshot `%s` of project `%s` does not exist", name, project),
           NULL;
  j = json_parse_file_at (store->rootfd, rel, err);
  if (j == NULL)
    return esbx_error_wrap (err, "snapshot `%s`", name), NULL;
  if (json_get_string (j, "base") == NULL)
    {
      json_free (j);
      return esbx_make_error (err, 0, "snapshot `%s`: record without base", name), NULL;
    }
  return j;
}

int
esbx_snapshot_resolve (esbx_store_t *store, const char *project, const char *name, char **base,
                       esbx_error_t *err)
{
  _cleanup_json_ json_t *j = NULL;

  if (esbx_check_name ("snapshot", name, err) < 0)
    return -1;
  j = esbx_snapshot_load_record (store, project, name, err);
  if (j == NULL)
    return -1;
  *base = xstrdup (json_get_string (j, "base"));
  return 0;
}

int
esbx_frozen_ids (const json_t *record, char ***ids)
{
  const json_t *arr = json_get (record, "frozen"), *item;
  struct strv v = { 0 };
  size_t i;

  *ids = NULL;
  if (arr == NULL || arr->type == JSON_NULL)
    return 0;
  if (arr->type != JSON_ARRAY)
    return -1;
  json_array_foreach (arr, i, item)
    {
      if (item->type != JSON_STRING || !esbx_name_valid (item->text))
        {
          strv_free (&v);
          return -1;
        }
      strv_push (&v, xstrdup (item->text));
    }
  if (v.n > MAX_CHAIN)
    {
      strv_free (&v);
      return -1;
    }
  *ids = v.v;
  return 0;
}

static void
push_frozen (esbx_store_t *store, const char *project, char *const *ids, struct strv *out)
{
  for (; ids && *ids; ids++)
    {
      _cleanup_free_ char *rel = esbx_frozen_rel (project, *ids);
      strv_push (out, xasprintf ("%s/%s/diff", store->root, rel));
    }
}

bool
esbx_session_has_frozen (const struct esbx_session *s)
{
  return s->snapshot != NULL || (s->frozen && s->frozen[0]);
}

int
esbx_session_frozen_lowers (esbx_store_t *store, const struct esbx_session *s, struct strv *out,
                            esbx_error_t *err)
{
  if (s->frozen && s->frozen[0])
    {
      push_frozen (store, s->project, s->frozen, out);
      return 0;
    }
  if (s->snapshot)
    return esbx_snapshot_lowers (store, s->project, s->snapshot, out, err);
  return 0;
}

int
esbx_snapshot_lowers (esbx_store_t *store, const char *project, const char *name, struct strv *out,
                      esbx_error_t *err)
{
  _cleanup_strv_ char **chain = NULL;
  struct strv v = { 0 };
  _cleanup_free_ char *next = xstrdup (name);
  size_t i;

  /* Top down through the parents, then appended bottom up.  */
  while (next)
    {
      json_t *j;
      const char *parent;

      if (v.n >= MAX_CHAIN)
        {
          strv_free (&v);
          return esbx_make_error (err, 0, "snapshot `%s`: chain of parents deeper than %d", name,
                                  MAX_CHAIN);
        }
      j = esbx_snapshot_load_record (store, project, next, err);
      if (j == NULL)
        {
          strv_free (&v);
          return -1;
        }
      if (json_get (j, "frozen"))
        {
          /* Frozen layers: the record names them all, its parents'
             included; legacy parents below it have none.  */
          _cleanup_strv_ char **ids = NULL;

          if (esbx_frozen_ids (j, &ids) < 0)
            {
              json_free (j);
              strv_free (&v);
              return esbx_make_error (err, 0, "snapshot `%s`: malformed frozen layers", next);
            }
          json_free (j);
          if (v.n > 0)
            {
              strv_free (&v);
              return esbx_make_error (err, 0, "snapshot `%s`: malformed chain", name);
            }
          push_frozen (store, project, ids, out);
          return 0;
        }
      strv_push (&v, steal_pointer (&next));
      parent = json_get_string (j, "parent");
      next = parent ? xstrdup (parent) : NULL;
      json_free (j);
    }
  chain = v.v;
  for (i = v.n; i > 0; i--)
    {
      _cleanup_free_ char *dir = esbx_snapshot_rel (project, chain[i - 1]);
      strv_push (out, xasprintf ("%s/%s/diff", store->root, dir));
    }
  return 0;
}
