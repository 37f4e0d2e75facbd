/* Layer records and the project's stack file.  */
#include "internal.h"
#include "fs.h"
#include "text.h"
#include "utils.h"

#include <fcntl.h>
#include <string.h>

void
esbx_layer_clear (struct esbx_layer *l)
{
  free (l->id);
  free (l->parent);
  free (l->created);
  free (l->session);
  free (l->message);
  free (l->git_commit);
  json_free (l->labels);
  json_free (l->gate);
  esbx_changeset_free (&l->changes);
  memset (l, 0, sizeof *l);
}

void
esbx_layer_free (struct esbx_layer *l)
{
  if (l == NULL)
    return;
  esbx_layer_clear (l);
  free (l);
}

json_t *
esbx_labels_copy (const json_t *labels)
{
  json_t *copy = json_new (JSON_OBJECT);
  const json_t *value;
  const char *key;
  size_t i;

  json_object_foreach (labels, i, key, value)
    if (value->type == JSON_STRING)
      json_set_string (copy, key, value->text);
  return copy;
}

int
esbx_layer_from_json (const json_t *j, struct esbx_layer **out, esbx_error_t *err)
{
  struct esbx_layer *l;
  json_t *changes;
  const char *id = json_get_string (j, "id");
  size_t i;

  if (id == NULL || !json_get_int (j, "index", &(int64_t){ 0 }))
    return esbx_make_error (err, 0, "layer record without id or index");
  changes = json_get (j, "changes");
  if (changes == NULL || changes->type != JSON_ARRAY)
    return esbx_make_error (err, 0, "layer `%s`: record without a change list", id);
  l = xmalloc0 (sizeof *l);
  l->id = xstrdup (id);
  l->parent = xstrdup (json_get_string (j, "parent"));
  json_get_int (j, "index", &l->index);
  l->created = xstrdup (json_get_string (j, "created"));
  l->session = xstrdup (json_get_string (j, "session"));
  l->message = xstrdup (json_get_string (j, "message"));
  l->labels = esbx_labels_copy (json_get (j, "labels"));
  l->git_commit = xstrdup (json_get_string (j, "git_commit"));
  if (json_get (j, "gate") && json_get (j, "gate")->type == JSON_OBJECT)
    l->gate = json_copy (json_get (j, "gate"));
  for (i = 0; i < json_len (changes); i++)
    {
      struct esbx_change c;
      if (esbx_change_from_json (json_at (changes, i), &c, err) < 0)
        {
          esbx_layer_free (l);
          return esbx_error_wrap (err, "layer `%s`", id);
        }
      esbx_changeset_push (&l->changes, &c);
    }
  esbx_changeset_sort (&l->changes);
  *out = l;
  return 0;
}

json_t *
esbx_layer_to_json (const struct esbx_layer *l)
{
  json_t *j = json_new (JSON_OBJECT), *changes = json_new (JSON_ARRAY);
  size_t i;

  json_set_string (j, "id", l->id);
  json_set (j, "parent", l->parent ? json_new_string (l->parent) : json_new (JSON_NULL));
  json_set_int (j, "index", l->index);
  json_set_string (j, "created", l->created);
  json_set (j, "session", l->session ? json_new_string (l->session) : json_new (JSON_NULL));
  json_set (j, "labels", esbx_labels_copy (l->labels));
  json_set_string (j, "message", l->message ? l->message : "");
  for (i = 0; i < l->changes.n; i++)
    json_append (changes, esbx_change_to_json (&l->changes.v[i]));
  json_set (j, "changes", changes);
  if (l->git_commit)
    json_set_string (j, "git_commit", l->git_commit);
  if (l->gate)
    json_set (j, "gate", json_copy (l->gate));
  return j;
}

int
esbx_layer_load (esbx_store_t *store, const char *project, const char *id, struct esbx_layer **out,
                 esbx_error_t *err)
{
  _cleanup_free_ char *path = esbx_layer_file (project, id, "record.json");
  _cleanup_json_ json_t *j = NULL;

  j = json_parse_file_at_limit (store->rootfd, path, ESBX_MAX_RECORD, err);
  if (j == NULL)
    return esbx_error_wrap (err, "project `%s`: layer `%s`", project, id);
  if (esbx_layer_from_json (j, out, err) < 0)
    return esbx_error_wrap (err, "project `%s`", project);
  if (strcmp ((*out)->id, id) != 0)
    {
      esbx_make_error (err, 0, "project `%s`: layer `%s`: record names id `%s`", project, id,
                       (*out)->id);
      esbx_layer_free (*out);
      *out = NULL;
      return -1;
    }
  return 0;
}

bool
esbx_project_exists (esbx_store_t *store, const char *name)
{
  _cleanup_free_ char *path = NULL;

  if (!esbx_name_valid (name))
    return false;
  path = esbx_project_file (name, "stack");
  return esbx_exists_at (store->rootfd, path);
}

int
esbx_project_check (esbx_store_t *store, const char *name, esbx_error_t *err)
{
  if (esbx_check_name ("project", name, err) < 0)
    return -1;
  if (!esbx_project_exists (store, name))
    return esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0, "project `%s` does not exist", name);
  return 0;
}

char **
esbx_project_list (esbx_store_t *store, esbx_error_t *err)
{
  _cleanup_strv_ char **names = esbx_list_dir_at (store->rootfd, "projects", err);
  struct strv out = { 0 };
  size_t i;

  if (names == NULL)
    return NULL;
  for (i = 0; names[i]; i++)
    if (esbx_project_exists (store, names[i]))
      strv_push (&out, xstrdup (names[i]));
  return out.v ? out.v : xmalloc0 (sizeof (char *));
}

int
esbx_project_stack (esbx_store_t *store, const char *project, char ***ids, size_t *n,
                    esbx_error_t *err)
{
  _cleanup_free_ char *path = NULL;
  _cleanup_free_ char *buf = NULL;
  struct strv v = { 0 };
  char *line, *save = NULL;
  size_t len;

  if (esbx_check_name ("project", project, err) < 0)
    return -1;
  path = esbx_project_file (project, "stack");
  if (esbx_read_file_at (store->rootfd, path, 64u << 20, &buf, &len, err) < 0)
    {
      if ((*err)->status == ENOENT)
        {
          esbx_error_free (err);
          return esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0, "project `%s` does not exist",
                                       project);
        }
      return esbx_error_wrap (err, "project `%s`", project);
    }
  for (line = strtok_r (buf, "\n", &save); line; line = strtok_r (NULL, "\n", &save))
    if (line[0])
      strv_push (&v, xstrdup (line));
  if (v.n == 0)
    return esbx_make_error (err, 0, "project `%s`: empty stack file", project);
  *ids = v.v;
  *n = v.n;
  return 0;
}

int
esbx_project_write_stack (esbx_store_t *store, const char *project, char *const *ids, size_t n,
                          esbx_error_t *err)
{
  _cleanup_free_ char *dir = esbx_project_rel (project);
  _cleanup_close_ int dfd = -1;
  _cleanup_free_ char *buf = NULL;
  size_t i, len = 0;

  for (i = 0; i < n; i++)
    len += strlen (ids[i]) + 1;
  buf = xmalloc (len + 1);
  len = 0;
  for (i = 0; i < n; i++)
    len += (size_t)sprintf (buf + len, "%s\n", ids[i]);
  dfd = esbx_open_dir_at (store->rootfd, dir, err);
  if (dfd < 0)
    return -1;
  if (esbx_write_file_atomic_at (dfd, "stack", buf, len, 0644, err) < 0)
    return esbx_error_wrap (err, "project `%s`: update head", project);
  return 0;
}

int
esbx_layer_resolve (esbx_store_t *store, const char *project, const char *ref, char **id,
                    esbx_error_t *err)
{
  _cleanup_strv_ char **ids = NULL;
  const char *found = NULL;
  size_t n, i, len;
  char *end;

  if (esbx_project_stack (store, project, &ids, &n, err) < 0)
    return -1;
  if (ref == NULL || strcmp (ref, "head") == 0)
    {
      *id = xstrdup (ids[n - 1]);
      return 0;
    }
  /* A plain number is a layer index.  */
  len = strlen (ref);
  if (len > 0 && len < 8)
    {
      unsigned long idx = strtoul (ref, &end, 10);
      if (*end == '\0')
        {
          if (idx >= n)
            return esbx_make_error (err, 0, "project `%s`: no layer %lu (head is %zu)", project,
                                    idx, n - 1);
          *id = xstrdup (ids[idx]);
          return 0;
        }
    }
  for (i = 0; i < n; i++)
    {
      if (strncmp (ids[i], ref, len) != 0)
        continue;
      if (found)
        return esbx_make_error (err, 0, "project `%s`: layer `%s` is ambiguous", project, ref);
      found = ids[i];
    }
  if (found == NULL)
    return esbx_make_error (err, 0, "project `%s`: no layer `%s`", project, ref);
  *id = xstrdup (found);
  return 0;
}

char *
esbx_layer_diff_path (esbx_store_t *store, const char *project, const char *id)
{
  _cleanup_free_ char *rel = esbx_layer_file (project, id, "diff");

  return esbx_store_abs (store, rel);
}

/* A layer the merge queue is testing is installed in layers/ but not in the
   stack: its record names the request and its parent, the layer below it,
   which is in the stack or another such layer.  */
#define PENDING_MAX_DEPTH 256

int
esbx_layer_chain (esbx_store_t *store, const char *project, const char *upto, char ***out,
                  size_t *n, esbx_error_t *err)
{
  _cleanup_strv_ char **ids = NULL;
  struct strv pending = { 0 };
  _cleanup_free_ char *want = upto ? xstrdup (upto) : NULL;
  size_t count, i, depth;

  if (esbx_project_stack (store, project, &ids, &count, err) < 0)
    return -1;
  for (depth = 0;; depth++)
    {
      struct esbx_layer *l = NULL;

      for (i = 0; i < count; i++)
        if (want == NULL || strcmp (ids[i], want) == 0)
          break;
      if (want == NULL)
        i = count - 1;
      if (i < count)
        break;
      if (depth >= PENDING_MAX_DEPTH || !esbx_name_valid (want)
          || esbx_layer_load (store, project, want, &l, NULL) < 0 || l->gate == NULL
          || l->parent == NULL)
        {
          esbx_layer_free (l);
          strv_free (&pending);
          return esbx_make_error (err, 0, "project `%s`: layer `%s` is not in the stack", project,
                                  upto);
        }
      strv_push (&pending, xstrdup (want));
      free (want);
      want = xstrdup (l->parent);
      esbx_layer_free (l);
    }
  {
    struct strv v = { 0 };
    size_t k;

    for (k = 0; k <= i; k++)
      strv_push (&v, xstrdup (ids[k]));
    for (k = pending.n; k > 0; k--)
      strv_push (&v, steal_pointer (&pending.v[k - 1]));
    strv_free (&pending);
    *out = v.v;
    *n = v.n;
  }
  return 0;
}

int
esbx_stack_lowers (esbx_store_t *store, const char *project, const char *upto, char *const *extra,
                   char ***paths, size_t *n, esbx_error_t *err)
{
  _cleanup_strv_ char **ids = NULL;
  struct strv v = { 0 };
  size_t count, i;

  if (esbx_layer_chain (store, project, upto, &ids, &count, err) < 0)
    return -1;
  for (i = 0; i < count; i++)
    strv_push (&v, esbx_layer_diff_path (store, project, ids[i]));
  for (i = 0; extra && extra[i]; i++)
    strv_push (&v, esbx_layer_diff_path (store, project, extra[i]));
  *paths = v.v;
  *n = v.n;
  return 0;
}
