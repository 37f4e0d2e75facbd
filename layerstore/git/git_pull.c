/* pull-git: new commits of another repository's ref as layers.
 *
 * The ref (the source and ref git.json recorded at create, or those the
 * caller names) is fetched into a scratch repository over the layers'
 * objects (git_remote.c), so only what the project lacks travels.  It must
 * descend from the head's commit: commits that do not (upstream rewrote its
 * history, or the project has layers upstream has not merged) are refused,
 * and a ref the head already holds is up to date.  Each commit of the
 * ref's first-parent chain back to the head's becomes one layer
 * (git_land.c), oldest first; where the head's commit joined that chain
 * through a merge, the merge is the first commit and brings the side it
 * joined as one layer.  The layers land under the project lock as a
 * publish's do, so a session based below them meets their paths in the
 * conflict gate of its publish (exit 3) and merges them on rebase.  */
#include "internal.h"
#include "git.h"
#include "git_remote.h"
#include "fs.h"
#include "utils.h"

#include <string.h>

#define FETCHED "refs/esbx/pull"
#define BASE    "refs/esbx/base"

/* The remote's name for REF: itself, or under refs/heads/, refs/tags/.  */
static const char *
resolve_ref (struct esbx_git_remote *r, const char *ref, char **owned)
{
  static const char *const prefixes[] = { "", "refs/heads/", "refs/tags/" };

  for (size_t i = 0; i < ARRAY_SIZE (prefixes); i++)
    {
      free (*owned);
      *owned = xasprintf ("%s%s", prefixes[i], ref);
      if (esbx_git_remote_ref (r, *owned))
        return *owned;
    }
  return NULL;
}

/* Fetch REF of R into FETCHED; *TIP its commit.  */
static int
fetch (struct esbx_git_remote *r, const char *ref, const git_oid *head, git_oid *tip,
       esbx_error_t *err)
{
  _cleanup_free_ char *name = NULL, *spec = NULL;
  git_reference *base = NULL;
  git_object *obj = NULL, *peeled = NULL;
  git_fetch_options fo;
  git_strarray specs;
  int rc;

  /* The head's commit as a ref of the scratch repository: the fetch tells
     the remote it has it, and gets only what is new.  */
  if (git_reference_create (&base, r->repo, BASE, head, 1, NULL) < 0)
    return esbx_make_error (err, 0, "scratch repository: %s", esbx_git_error ());
  git_reference_free (base);
  if (esbx_git_remote_connect (r, GIT_DIRECTION_FETCH, err) < 0)
    return -1;
  if (resolve_ref (r, ref, &name) == NULL)
    return esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0, "`%s` has no ref `%s`", r->shown, ref);
  spec = xasprintf ("+%s:" FETCHED, name);
  specs = (git_strarray){ .strings = &spec, .count = 1 };
  git_fetch_options_init (&fo, GIT_FETCH_OPTIONS_VERSION);
  esbx_git_remote_callbacks (r, &fo.callbacks);
  fo.follow_redirects = r->password ? GIT_REMOTE_REDIRECT_NONE : GIT_REMOTE_REDIRECT_INITIAL;
  fo.download_tags = GIT_REMOTE_DOWNLOAD_TAGS_NONE;
  fo.update_fetchhead = 0;
  rc = git_remote_fetch (r->remote, &specs, &fo, NULL);
  if (rc < 0)
    return esbx_git_remote_fail (r, "fetch from", err);
  if (git_revparse_single (&obj, r->repo, FETCHED) < 0
      || git_object_peel (&peeled, obj, GIT_OBJECT_COMMIT) < 0)
    {
      git_object_free (obj);
      return esbx_make_error (err, 0, "`%s` of `%s` is not a commit: %s", ref, r->shown,
                              esbx_git_error ());
    }
  *tip = *git_object_id (peeled);
  git_object_free (peeled);
  git_object_free (obj);
  return 0;
}

/* The commits to land, oldest first, from TIP down its first parents to
   HEAD (which TIP descends from).  */
static int
chain (git_repository *repo, const git_oid *tip, const git_oid *head, git_oid **out, size_t *n,
       esbx_error_t *err)
{
  git_oid at = *tip;
  size_t cap = 16;

  *n = 0;
  *out = xmalloc (cap * sizeof **out);
  while (!git_oid_equal (&at, head))
    {
      git_commit *c = NULL;
      const git_oid *parent;

      if (*n == cap)
        *out = xrealloc (*out, (cap *= 2) * sizeof **out);
      (*out)[(*n)++] = at;
      if (*n > 2 * ESBX_MAX_LAYERS)
        break;
      if (git_commit_lookup (&c, repo, &at) < 0)
        return esbx_make_error (err, 0, "commit: %s", esbx_git_error ());
      parent = git_commit_parentcount (c) ? git_commit_parent_id (c, 0) : NULL;
      /* HEAD reached through another parent: this merge brings it.  */
      if (parent == NULL || !esbx_git_descends (repo, parent, head))
        {
          git_commit_free (c);
          break;
        }
      at = *parent;
      git_commit_free (c);
    }
  for (size_t i = 0; i < *n / 2; i++)
    {
      git_oid t = (*out)[i];
      (*out)[i] = (*out)[*n - 1 - i];
      (*out)[*n - 1 - i] = t;
    }
  return 0;
}

/* REMOTE and REF as the caller or git.json says.  */
static int
source_of (esbx_store_t *store, const char *project, const struct esbx_git_sync_opts *o,
           char **remote, char **ref, esbx_error_t *err)
{
  _cleanup_free_ char *rel = esbx_project_file (project, "git.json");
  _cleanup_json_ json_t *rec = json_parse_file_at (store->rootfd, rel, err);
  const char *source, *recorded;

  if (rec == NULL)
    return -1;
  source = o->remote ? o->remote : json_get_string (rec, "source");
  recorded = o->remote ? NULL : json_get_string (rec, "ref");
  if (source == NULL)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "git.json names no source: name a remote");
  *remote = xstrdup (source);
  *ref = xstrdup (o->ref ? o->ref : recorded ? recorded : "HEAD");
  return 0;
}

static int
pull (esbx_store_t *store, const char *project, const struct esbx_git_sync_opts *o,
      struct esbx_git_remote *r, json_t *view, esbx_error_t *err)
{
  _cleanup_free_ char *remote = NULL, *ref = NULL, *head = NULL;
  _cleanup_free_ git_oid *todo = NULL;
  _cleanup_strv_ char **ids = NULL;
  _cleanup_close_ int lock = -1;
  char tip_hex[GIT_OID_HEXSZ + 1], head_hex[GIT_OID_HEXSZ + 1];
  git_oid hoid, tip;
  json_t *layers;
  size_t n, k = 0, i;

  if (source_of (store, project, o, &remote, &ref, err) < 0
      || esbx_project_stack (store, project, &ids, &n, err) < 0
      || esbx_git_layer_commit (store, project, ids[n - 1], &head, err) < 0
      || git_oid_fromstr (&hoid, head) < 0)
    return -1;
  /* Through the gateway a remote of the request's must be a URL; the one
     recorded at create was the host's choice.  */
  if (esbx_git_remote_open (store, project, remote, o->secret, o->urls_only && o->remote != NULL,
                            ids, n, r, err)
          < 0
      || fetch (r, ref, &hoid, &tip, err) < 0)
    return -1;
  /* The head may have moved while the fetch ran: decide under the lock.  */
  lock = esbx_project_lock (store, project, err);
  if (lock < 0)
    return -1;
  cleanup_strvp (&ids);
  free (head);
  head = NULL;
  if (esbx_project_stack (store, project, &ids, &n, err) < 0
      || esbx_git_layer_commit (store, project, ids[n - 1], &head, err) < 0
      || git_oid_fromstr (&hoid, head) < 0)
    return -1;
  git_oid_tostr (tip_hex, sizeof tip_hex, &tip);
  git_oid_tostr (head_hex, sizeof head_hex, &hoid);
  if (!esbx_git_descends (r->repo, &tip, &hoid) && !esbx_git_descends (r->repo, &hoid, &tip))
    return esbx_make_error_kind (
        err, ESBX_ERR_CONFLICT, 0,
        "`%s` of `%s` is at %s, which does not descend from the project's head commit %s (layer "
        "%s): its history was rewritten, or the project has commits it lacks (push-git them and "
        "merge them there first); nothing pulled",
        ref, r->shown, tip_hex, head_hex, ids[n - 1]);
  json_set_string (view, "remote", r->shown);
  json_set_string (view, "ref", ref);
  json_set_string (view, "commit", tip_hex);
  json_set_string (view, "previous", head_hex);
  layers = json_new (JSON_ARRAY);
  json_set (view, "layers", layers);
  /* Up to date: the head holds the ref already.  */
  if (esbx_git_descends (r->repo, &hoid, &tip))
    return 0;
  if (chain (r->repo, &tip, &hoid, &todo, &k, err) < 0)
    return -1;
  if (n + k > 2 * ESBX_MAX_LAYERS - 1)
    return esbx_make_error_kind (err, ESBX_ERR_TOO_LARGE, 0,
                                 "%s%zu new commits would make more than the %d layers a stack "
                                 "holds",
                                 k > 2 * ESBX_MAX_LAYERS ? "over " : "", k,
                                 2 * ESBX_MAX_LAYERS - 1);
  for (i = 0; i < k; i++)
    {
      _cleanup_free_ char *id = NULL;
      char hex[GIT_OID_HEXSZ + 1];
      json_t *l;

      if (esbx_git_land (store, project, r->repo, &todo[i], r->shown, &ids, &n, &id, err) < 0)
        {
          if (i > 0)
            esbx_error_wrap (err, "%zu of %zu commits landed, then", i, k);
          esbx_git_project_dir_update (store, project);
          return -1;
        }
      git_oid_tostr (hex, sizeof hex, &todo[i]);
      l = json_new (JSON_OBJECT);
      json_set_string (l, "id", id);
      json_set_string (l, "commit", hex);
      json_append (layers, l);
    }
  esbx_git_project_dir_update (store, project);
  return 0;
}

json_t *
esbx_project_pull_git (esbx_store_t *store, const char *project, const struct esbx_git_sync_opts *o,
                       esbx_error_t *err)
{
  struct esbx_git_remote r = { .tmpfd = -1 };
  json_t *view;

  if (esbx_git_sync_project (store, project, "pull-git", err) < 0)
    return NULL;
  if (esbx_project_is_shared (store, project))
    {
      esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                            "pull-git `%s`: a git project shared through a registry is not "
                            "supported yet",
                            project);
      return NULL;
    }
  view = json_new (JSON_OBJECT);
  if (esbx_git_load (err) < 0 || pull (store, project, o, &r, view, err) < 0)
    {
      esbx_error_wrap (err, "pull-git `%s`", project);
      json_free (view);
      view = NULL;
    }
  esbx_git_remote_close (&r);
  return view;
}
