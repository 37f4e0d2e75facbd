/* esbx rebase: move a session's base to the project's head, merging what
 * both sides changed (rebase_plan.c says how), as git's rebase moves a
 * branch.  The base moves even when some paths are left unmerged (as git's
 * rebase stops on the new base): those wait in the record, with their three
 * versions, until the session resolves them, and publish refuses until
 * then.  */
#include "internal.h"
#include "git.h"
#include "fs.h"
#include "log.h"
#include "utils.h"

#include <string.h>

static int
unmerged_error (esbx_error_t *err, const char *name, const struct esbx_publish_result *r)
{
  const json_t *first = json_at (r->unmerged, 0);
  size_t n = json_len (r->unmerged);

  return esbx_make_error_kind (err, ESBX_ERR_UNMERGED, 0,
                               "rebase `%s`: %zu path%s left unmerged (first: `%s`, %s); the base "
                               "is `%s`: resolve them, then publish",
                               name, n, n == 1 ? "" : "s", json_get_string (first, "path"),
                               json_get_string (first, "kind"), r->layer);
}

/* The record's entries that are not resolved in UFD.  */
static json_t *
still_unmerged (const struct esbx_session *s, int ufd)
{
  _cleanup_json_ json_t *all = esbx_unmerged_entries (s->record);
  json_t *left = json_new (JSON_ARRAY);

  for (size_t i = 0; i < json_len (all); i++)
    if (!esbx_unmerged_resolved (ufd, json_at (all, i)))
      json_append (left, json_copy (json_at (all, i)));
  return left;
}

/* A git session's commits since its base (or its last publish) are
   replaced by the move of its branch: what they said is kept in the record
   for the next publish (publish.c).  */
static int
keep_git_log (esbx_store_t *store, struct esbx_session *s, int ufd, esbx_error_t *err)
{
  _cleanup_free_ char *base = NULL, *all = NULL;
  struct esbx_git_log log = { 0 };
  const char *mark = json_get_string (s->record, "git_published");
  const char *kept = json_get_string (s->record, "git_messages");
  int ret = -1;

  if (esbx_git_layer_commit (store, s->project, s->base, &base, err) < 0
      || esbx_git_session_log (store, s, ufd, mark ? mark : base, &log, err) < 0)
    goto out;
  if (log.messages)
    {
      all = kept ? xasprintf ("%s\n\n%s", kept, log.messages) : xstrdup (log.messages);
      json_set_string (s->record, "git_messages", all);
    }
  if (log.author_name)
    {
      json_set_string (s->record, "git_author", log.author_name);
      json_set_string (s->record, "git_email", log.author_email);
    }
  json_remove (s->record, "git_published");
  ret = 0;
out:
  esbx_git_log_free (&log);
  return ret;
}

/* The session's branch onto the head's commit, its index the head's.  */
static int
move_branch (esbx_store_t *store, const struct esbx_session *s, int ufd, const char *head,
             esbx_error_t *err)
{
  _cleanup_free_ char *commit = NULL;

  if (esbx_git_layer_commit (store, s->project, head, &commit, err) < 0)
    return -1;
  return esbx_git_session_rebase (ufd, commit, err);
}

int
esbx_session_rebase (esbx_store_t *store, const char *name, struct esbx_publish_result *r,
                     esbx_error_t *err)
{
  struct esbx_session *s = NULL;
  struct esbx_changeset cs = { 0 }, same = { 0 };
  struct esbx_upstream up = { 0 };
  struct esbx_rebase_plan *plan = NULL;
  _cleanup_close_ int ufd = -1;
  _cleanup_close_ int slock = -1;
  _cleanup_close_ int plock = -1;
  _cleanup_close_ int sdfd = -1;
  _cleanup_strv_ char **ids = NULL;
  size_t n;
  bool git;
  int ret = -1;

  memset (r, 0, sizeof *r);
  slock = esbx_session_lock (store, name, err);
  if (slock < 0)
    return esbx_error_wrap (err, "rebase");
  if (esbx_session_load (store, name, &s, err) < 0)
    return esbx_error_wrap (err, "rebase");
  git = esbx_project_is_git (store, s->project);
  /* Onto the head in etcd for a shared project.  */
  if (esbx_project_is_shared (store, s->project)
      && esbx_remote_sync (store, s->project, NULL, err) < 0)
    goto out;
  ufd = esbx_session_scan (store, s, NULL, 0, &cs, &same, NULL, err);
  if (ufd < 0)
    goto out;
  r->n_changes = cs.n;
  sdfd = esbx_session_open_dir (store, name, err);
  if (sdfd < 0)
    goto out;

  plock = esbx_project_lock (store, s->project, err);
  if (plock < 0 || esbx_project_stack (store, s->project, &ids, &n, err) < 0)
    goto out;
  if (strcmp (ids[n - 1], s->base) == 0)
    {
      r->layer = xstrdup (s->base);
      r->merged = xmalloc0 (sizeof (char *));
      r->unmerged = still_unmerged (s, ufd);
      if (json_len (r->unmerged) > 0)
        {
          unmerged_error (err, name, r);
          goto out;
        }
      ret = 0;
      goto out;
    }
  if (esbx_upstream_load (store, s->project, s->base, s->published, ids, n, &up, err) < 0)
    goto out;
  esbx_conflicts_find (&cs, &up, r);
  if (esbx_rebase_plan_make (store, s, sdfd, ufd, &cs, &up, ids[n - 1], r, &plan, err) < 0)
    goto out;
  if (git && keep_git_log (store, s, ufd, err) < 0)
    goto out;
  if (esbx_session_unmount (store, name, err) < 0 || esbx_rebase_plan_apply (plan, &same, err) < 0)
    goto out;
  r->unmerged = esbx_rebase_plan_entries (plan);
  r->merged = esbx_rebase_plan_merged (plan);
  json_set_string (s->record, "base", ids[n - 1]);
  json_set (s->record, "published", json_new (JSON_ARRAY));
  json_set (s->record, "unmerged", json_copy (r->unmerged));
  if (esbx_session_save (store, name, s->record, err) < 0)
    goto out;
  /* Once the base moved: the branch must not name a commit its layers do
     not hold.  A session that broke its own .git keeps it broken.  */
  if (git)
    {
      esbx_error_t e = NULL;
      if (move_branch (store, s, ufd, ids[n - 1], &e) < 0)
        {
          esbx_warn ("rebase `%s`: the session's branch did not move: %s", name, e->msg);
          esbx_error_free (&e);
        }
    }
  esbx_unmerged_prune (sdfd, r->unmerged);
  close (plock);
  plock = -1;
  if (esbx_session_mount (store, name, err) < 0)
    goto out;
  r->layer = xstrdup (ids[n - 1]);
  if (json_len (r->unmerged) > 0)
    {
      unmerged_error (err, name, r);
      goto out;
    }
  ret = 0;

out:
  if (ret < 0 && !(err && *err && (*err)->kind == ESBX_ERR_UNMERGED))
    esbx_error_wrap (err, "rebase `%s`", name);
  esbx_rebase_plan_free (plan);
  esbx_upstream_free (&up);
  esbx_changeset_free (&cs);
  esbx_changeset_free (&same);
  esbx_session_free (s);
  return ret;
}
