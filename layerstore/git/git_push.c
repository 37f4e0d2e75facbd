/* push-git: the project's layers into another repository, as the commits
 * they already are (git_layer.c makes one per published layer).
 *
 * The head's commit goes to the remote's refs/heads/BRANCH, so the remote
 * gets every layer it lacks, one commit each, and nothing else: esbx
 * project log and git log of the branch are one to one.  Only a
 * fast-forward is pushed: a branch the head's commit does not descend from
 * (someone else pushed there, or the branch is another history) is refused
 * before anything is sent, the message naming both commits.  What was
 * pushed where is remembered in git.json ("pushed": remote, branch, commit,
 * layer, time), the remote as it was named (it holds no password).  */
#include "internal.h"
#include "git.h"
#include "git_remote.h"
#include "fs.h"
#include "text.h"
#include "utils.h"

#include <string.h>

#define DEFAULT_BRANCH "esbx"

/* ROOT/projects/P/git.json with "pushed" saying that REMOTE's REF is at
   COMMIT (layer LAYER), under the project lock.  */
static int
remember (esbx_store_t *store, const char *project, const char *remote, const char *ref,
          const char *commit, const char *layer, esbx_error_t *err)
{
  _cleanup_free_ char *rel = esbx_project_rel (project), *text = NULL, *now = NULL;
  _cleanup_close_ int pfd = -1, lock = -1;
  _cleanup_json_ json_t *rec = NULL;
  json_t *pushed, *kept, *e;
  size_t len, i;

  pfd = esbx_open_dir_at (store->rootfd, rel, err);
  lock = pfd < 0 ? -1 : esbx_project_lock (store, project, err);
  if (lock < 0 || (rec = json_parse_file_at (pfd, "git.json", err)) == NULL)
    return -1;
  pushed = json_get (rec, "pushed");
  kept = json_new (JSON_ARRAY);
  for (i = 0; pushed && pushed->type == JSON_ARRAY && i < json_len (pushed); i++)
    {
      e = json_at (pushed, i);
      if (e->type != JSON_OBJECT || json_get_string (e, "remote") == NULL
          || json_get_string (e, "ref") == NULL
          || (strcmp (json_get_string (e, "remote"), remote) == 0
              && strcmp (json_get_string (e, "ref"), ref) == 0))
        continue;
      json_append (kept, json_copy (e));
    }
  now = esbx_rfc3339_now ();
  e = json_new (JSON_OBJECT);
  json_set_string (e, "remote", remote);
  json_set_string (e, "ref", ref);
  json_set_string (e, "commit", commit);
  json_set_string (e, "layer", layer);
  json_set_string (e, "time", now);
  json_append (kept, e);
  json_set (rec, "pushed", kept);
  text = json_serialize (rec, true, &len);
  return esbx_write_file_atomic_at (pfd, "git.json", text, len, 0644, err);
}

/* How many layers of IDS[0..N) the remote lacks when its branch is at OLD
   (NULL: absent): those whose commit OLD is not, nor descends from.  */
static int
count_new (esbx_store_t *store, const char *project, git_repository *repo, char *const *ids,
           size_t n, const git_oid *old, size_t *count, esbx_error_t *err)
{
  *count = 0;
  for (size_t i = n; i > 0; i--)
    {
      _cleanup_free_ char *hex = NULL;
      git_oid c;

      if (old)
        {
          if (esbx_git_layer_commit (store, project, ids[i - 1], &hex, err) < 0
              || git_oid_fromstr (&c, hex) < 0)
            return -1;
          if (esbx_git_descends (repo, old, &c))
            break;
        }
      (*count)++;
    }
  return 0;
}

static int
push (esbx_store_t *store, const char *project, const struct esbx_git_sync_opts *o,
      struct esbx_git_remote *r, json_t *view, esbx_error_t *err)
{
  const char *branch = o->branch ? o->branch : DEFAULT_BRANCH;
  _cleanup_free_ char *ref = xasprintf ("refs/heads/%s", branch), *head = NULL;
  _cleanup_strv_ char **ids = NULL;
  const git_remote_head *theirs;
  git_reference *mine = NULL;
  git_oid hoid, old;
  bool has_old = false;
  char old_hex[GIT_OID_HEXSZ + 1] = "";
  size_t n, count;
  int valid = 0;

  if (git_reference_name_is_valid (&valid, ref) < 0 || !valid || strchr (branch, ':'))
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "`%s` is no branch name", branch);
  if (esbx_project_stack (store, project, &ids, &n, err) < 0
      || esbx_git_layer_commit (store, project, ids[n - 1], &head, err) < 0
      || git_oid_fromstr (&hoid, head) < 0)
    return -1;
  if (esbx_git_remote_open (store, project, o->remote, o->secret, o->urls_only, ids, n, r, err) < 0)
    return -1;
  if (git_reference_create (&mine, r->repo, ref, &hoid, 1, NULL) < 0)
    return esbx_make_error (err, 0, "%s: %s", ref, esbx_git_error ());
  git_reference_free (mine);
  if (esbx_git_remote_connect (r, GIT_DIRECTION_PUSH, err) < 0)
    return -1;
  theirs = esbx_git_remote_ref (r, ref);
  if (theirs)
    {
      old = theirs->oid;
      has_old = true;
      git_oid_tostr (old_hex, sizeof old_hex, &old);
      if (!esbx_git_descends (r->repo, &hoid, &old))
        return esbx_make_error_kind (err, ESBX_ERR_CONFLICT, 0,
                                     "`%s` has %s at %s, which the project's head commit %s "
                                     "(layer %s) does not descend from: not a fast-forward, "
                                     "nothing pushed",
                                     r->shown, ref, old_hex, head, ids[n - 1]);
    }
  if (count_new (store, project, r->repo, ids, n, has_old ? &old : NULL, &count, err) < 0)
    return -1;
  if (count > 0)
    {
      char *spec = xasprintf ("%s:%s", ref, ref);
      git_strarray specs = { .strings = &spec, .count = 1 };
      git_push_options po;
      int rc;

      git_push_options_init (&po, GIT_PUSH_OPTIONS_VERSION);
      esbx_git_remote_callbacks (r, &po.callbacks);
      po.follow_redirects = r->password ? GIT_REMOTE_REDIRECT_NONE : GIT_REMOTE_REDIRECT_INITIAL;
      rc = git_remote_push (r->remote, &specs, &po);
      free (spec);
      if (rc < 0)
        return esbx_git_remote_fail (r, "push to", err);
      if (r->refused)
        return esbx_make_error_kind (err, ESBX_ERR_CONFLICT, 0, "`%s` refused %s", r->shown,
                                     r->refused);
    }
  if (remember (store, project, r->url, ref, head, ids[n - 1], err) < 0)
    return esbx_error_wrap (err, "pushed, but not remembered");
  json_set_string (view, "remote", r->shown);
  json_set_string (view, "ref", ref);
  json_set_string (view, "commit", head);
  json_set_string (view, "layer", ids[n - 1]);
  json_set (view, "previous", has_old ? json_new_string (old_hex) : json_new (JSON_NULL));
  json_set_int (view, "layers", (int64_t)count);
  json_set (view, "pushed", json_new_bool (count > 0));
  return 0;
}

json_t *
esbx_project_push_git (esbx_store_t *store, const char *project, const struct esbx_git_sync_opts *o,
                       esbx_error_t *err)
{
  struct esbx_git_remote r = { .tmpfd = -1 };
  json_t *view;

  if (esbx_git_sync_project (store, project, "push-git", err) < 0)
    return NULL;
  if (o->remote == NULL)
    {
      esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "push-git `%s`: expected a remote", project);
      return NULL;
    }
  view = json_new (JSON_OBJECT);
  if (esbx_git_load (err) < 0 || push (store, project, o, &r, view, err) < 0)
    {
      esbx_error_wrap (err, "push-git `%s`", project);
      json_free (view);
      view = NULL;
    }
  esbx_git_remote_close (&r);
  return view;
}
