/* JSON views of projects, layers, sessions and the results of publish and
   rebase.  `esbx --json` prints them and the gateway sends them, so that the remote CLI prints
   exactly what the embedded one does.  */
#include "fs.h"
#include "git.h"
#include "internal.h"
#include "layerstore.h"
#include "utils.h"

#include <fcntl.h>

json_t *
esbx_layer_summary_json (const struct esbx_layer *l)
{
  json_t *o = json_new (JSON_OBJECT);

  json_set_string (o, "id", l->id);
  json_set_int (o, "index", l->index);
  json_set (o, "parent", l->parent ? json_new_string (l->parent) : json_new (JSON_NULL));
  json_set_string (o, "created", l->created ? l->created : "");
  json_set (o, "session", l->session ? json_new_string (l->session) : json_new (JSON_NULL));
  json_set (o, "labels", esbx_labels_copy (l->labels));
  json_set_string (o, "message", l->message ? l->message : "");
  json_set_int (o, "changes", (int64_t)l->changes.n);
  if (l->git_commit)
    json_set_string (o, "git_commit", l->git_commit);
  if (l->gate)
    json_set (o, "gate", json_copy (l->gate));
  return o;
}

/* A git session's repository: its branch, the commit HEAD names, its base
   layer's commit.  */
static json_t *
session_git_json (esbx_store_t *store, const struct esbx_session *s, const char *upper)
{
  _cleanup_close_ int ufd = open (upper, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  _cleanup_free_ char *branch = NULL, *commit = NULL, *base = NULL;
  json_t *g = json_new (JSON_OBJECT);
  struct strv lowers = { 0 };
  esbx_error_t e = NULL;

  /* A fork's repository is in its frozen layers until git writes.  */
  if (esbx_session_frozen_lowers (store, s, &lowers, &e) < 0)
    esbx_error_free (&e);
  esbx_git_session_head (ufd, lowers.v, lowers.n, &branch, &commit);
  strv_free (&lowers);
  if (esbx_git_layer_commit (store, s->project, s->base, &base, &e) < 0)
    esbx_error_free (&e);
  json_set (g, "branch", branch ? json_new_string (branch) : json_new (JSON_NULL));
  json_set (g, "commit", commit ? json_new_string (commit) : json_new (JSON_NULL));
  json_set (g, "base_commit", base ? json_new_string (base) : json_new (JSON_NULL));
  return g;
}

json_t *
esbx_session_json (esbx_store_t *store, const struct esbx_session *s, json_t *runtime)
{
  json_t *o = json_new (JSON_OBJECT), *pub = json_new (JSON_ARRAY);
  _cleanup_free_ char *merged = esbx_session_merged (store, s->name);
  _cleanup_free_ char *upper = esbx_session_upper (store, s->name);
  size_t i;

  json_set_string (o, "name", s->name);
  json_set_string (o, "id", s->id);
  json_set_string (o, "project", s->project);
  json_set_string (o, "base", s->base);
  for (i = 0; s->published[i]; i++)
    json_append (pub, json_new_string (s->published[i]));
  json_set (o, "published", pub);
  json_set_string (o, "created", s->created ? s->created : "");
  json_set (o, "labels", esbx_labels_copy (s->labels));
  json_set (o, "env", esbx_session_env_copy (s->env));
  if (json_len (json_get (s->record, "secrets")) > 0)
    json_set (o, "secrets", esbx_secret_attach_json (json_get (s->record, "secrets")));
  /* Names a fork keeps for publish to look for (session.c), not given.  */
  if (json_len (json_get (s->record, "kept_secrets")) > 0)
    {
      const json_t *kept = json_get (s->record, "kept_secrets"), *v;
      json_t *names = json_new (JSON_ARRAY);
      size_t k;

      json_array_foreach (kept, k, v)
        if (v->type == JSON_STRING)
          json_append (names, json_new_string (v->text));
      json_set (o, "kept_secrets", names);
    }
  json_set_string (o, "network", s->network);
  json_set_string (o, "workspace", s->workspace);
  json_set (o, "rootfs", s->rootfs ? json_new_string (s->rootfs) : json_new (JSON_NULL));
  json_set (o, "snapshot", s->snapshot ? json_new_string (s->snapshot) : json_new (JSON_NULL));
  {
    /* Its frozen layers (frozen.c), bottom first.  */
    json_t *frozen = json_new (JSON_ARRAY);
    for (char **f = s->frozen; f && *f; f++)
      json_append (frozen, json_new_string (*f));
    json_set (o, "frozen", frozen);
  }
  json_set (o, "lifetime", esbx_session_lifetime_json (store, s));
  json_set (o, "mounted", json_new_bool (esbx_session_is_mounted (store, s->name)));
  json_set_string (o, "path", merged);
  if (runtime)
    {
      unsigned long long bytes = 0;
      esbx_error_t e = NULL;
      _cleanup_strv_ char **ids = NULL;
      size_t n;
      json_t *limits = json_new (JSON_OBJECT);

      if (esbx_project_stack (store, s->project, &ids, &n, &e) == 0)
        json_set_string (o, "head", ids[n - 1]);
      esbx_error_free (&e);
      if (esbx_du_at (AT_FDCWD, upper, &bytes, &e) < 0)
        esbx_error_free (&e);
      json_set_int (o, "upper_bytes", (int64_t)bytes);
      json_set_string (o, "upper", upper);
      json_set (limits, "memory",
                s->memory ? json_new_int ((int64_t)s->memory) : json_new (JSON_NULL));
      json_set (limits, "pids", s->pids ? json_new_int ((int64_t)s->pids) : json_new (JSON_NULL));
      json_set (limits, "cpus", s->cpus ? json_new_string (s->cpus) : json_new (JSON_NULL));
      json_set_int (limits, "tmpfs_size",
                    (int64_t)(s->tmpfs_size ? s->tmpfs_size : ESBX_DEFAULT_TMPFS_SIZE));
      json_set_int (limits, "shm_size",
                    (int64_t)(s->shm_size ? s->shm_size : ESBX_DEFAULT_SHM_SIZE));
      json_set (limits, "disk", s->disk > 0 ? json_new_int (s->disk) : json_new (JSON_NULL));
      json_set (o, "limits", limits);
      json_set (o, "disk", esbx_session_disk_json (store, s));
      json_set (o, "userns", esbx_userns_json (store, s));
      json_set_string (o, "isolation",
                       json_get_string (s->record, "isolation")
                           ? json_get_string (s->record, "isolation")
                           : "namespaces");
      json_set (o, "runtime", runtime);
      if (esbx_project_is_git (store, s->project))
        json_set (o, "git", session_git_json (store, s, upper));
    }
  return o;
}

json_t *
esbx_project_json (esbx_store_t *store, const char *name, esbx_error_t *err)
{
  _cleanup_strv_ char **ids = NULL;
  json_t *o;
  size_t n;

  if (esbx_project_stack (store, name, &ids, &n, err) < 0)
    return NULL;
  o = json_new (JSON_OBJECT);
  json_set_string (o, "name", name);
  json_set_int (o, "layers", (int64_t)n);
  json_set_string (o, "head", ids[n - 1]);
  return o;
}

json_t *
esbx_project_log_json (esbx_store_t *store, const char *name, esbx_error_t *err)
{
  _cleanup_strv_ char **ids = NULL;
  json_t *arr;
  size_t n, i;

  if (esbx_project_stack (store, name, &ids, &n, err) < 0)
    return NULL;
  arr = json_new (JSON_ARRAY);
  /* Newest first, as git log.  */
  for (i = n; i > 0; i--)
    {
      struct esbx_layer *l = NULL;

      if (esbx_layer_load (store, name, ids[i - 1], &l, err) < 0)
        {
          json_free (arr);
          return NULL;
        }
      json_append (arr, esbx_layer_summary_json (l));
      esbx_layer_free (l);
    }
  return arr;
}

json_t *
esbx_publish_result_json (const struct esbx_publish_result *r)
{
  json_t *o = json_new (JSON_OBJECT);

  json_set (o, "layer", r->layer ? json_new_string (r->layer) : json_new (JSON_NULL));
  json_set_int (o, "changes", (int64_t)r->n_changes);
  if (r->n_ignored > 0)
    {
      json_t *ign = json_new (JSON_OBJECT), *first = json_new (JSON_ARRAY);
      char **p;

      json_set_int (ign, "count", (int64_t)r->n_ignored);
      for (p = r->ignored_first; p && *p; p++)
        json_append (first, json_new_string (*p));
      json_set (ign, "first", first);
      json_set (o, "ignored", ign);
    }
  return o;
}

json_t *
esbx_rebase_result_json (const struct esbx_publish_result *r)
{
  json_t *o = json_new (JSON_OBJECT);
  json_t *merged = json_new (JSON_ARRAY);
  char **p;

  json_set (o, "base", r->layer ? json_new_string (r->layer) : json_new (JSON_NULL));
  for (p = r->merged; p && *p; p++)
    json_append (merged, json_new_string (*p));
  json_set (o, "merged", merged);
  json_set (o, "conflicts", esbx_conflicts_json (r));
  json_set (o, "unmerged", esbx_unmerged_json (r));
  return o;
}

json_t *
esbx_refused_json (const struct esbx_publish_result *r)
{
  json_t *o;

  if (r->n_conflicts == 0 && json_len (r->unmerged) == 0)
    return NULL;
  o = json_new (JSON_OBJECT);
  if (r->n_conflicts)
    json_set (o, "conflicts", esbx_conflicts_json (r));
  if (json_len (r->unmerged))
    json_set (o, "unmerged", esbx_unmerged_json (r));
  return o;
}

json_t *
esbx_unmerged_json (const struct esbx_publish_result *r)
{
  json_t *arr = json_new (JSON_ARRAY);
  static const char *const shown[]
      = { "path", "kind", "layer", "session", "renamed", "base", "ours", "theirs" };

  for (size_t i = 0; i < json_len (r->unmerged); i++)
    {
      const json_t *e = json_at (r->unmerged, i);
      json_t *o = json_new (JSON_OBJECT);

      for (size_t k = 0; k < sizeof shown / sizeof shown[0]; k++)
        if (json_get (e, shown[k]))
          json_set (o, shown[k], json_copy (json_get (e, shown[k])));
      json_append (arr, o);
    }
  return arr;
}

json_t *
esbx_conflicts_json (const struct esbx_publish_result *r)
{
  json_t *arr = json_new (JSON_ARRAY);
  size_t i;

  for (i = 0; i < r->n_conflicts; i++)
    {
      json_t *c = json_new (JSON_OBJECT);
      json_set_string (c, "path", r->conflicts[i].path);
      json_set_string (c, "layer", r->conflicts[i].layer);
      json_set (c, "session",
                r->conflicts[i].session ? json_new_string (r->conflicts[i].session)
                                        : json_new (JSON_NULL));
      json_set_string (c, "kind", esbx_conflict_kind_name (r->conflicts[i].kind));
      json_set (c, "blocking", json_new_bool (r->conflicts[i].blocking));
      if (r->conflicts[i].renamed)
        json_set_string (c, "renamed", r->conflicts[i].renamed);
      if (r->conflicts[i].markers)
        json_set (c, "markers", json_new_bool (true));
      json_append (arr, c);
    }
  return arr;
}

json_t *
esbx_changeset_json (const struct esbx_changeset *cs)
{
  json_t *arr = json_new (JSON_ARRAY);

  for (size_t i = 0; i < cs->n; i++)
    json_append (arr, esbx_change_to_json (&cs->v[i]));
  return arr;
}
