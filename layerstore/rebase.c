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

/* A git session's branch after a rebase.  A session whose work was all
   committed (its work tree is its HEAD's tree: the agents' way, a commit
   after each edit) gets one commit on the head's, squashing its own: the
   merged work tree, its messages, its last author; `git status` is clean.
   Otherwise the branch moves to the head's commit and the session's work
   shows as changes against it (as after `git reset`), the messages and
   author of its commits kept in the record for the next publish.  */
struct git_rebase
{
  struct esbx_git_log log;
  bool squash;
};

static int
git_before (esbx_store_t *store, struct esbx_session *s, int ufd, const struct esbx_changeset *cs,
            struct git_rebase *g, esbx_error_t *err)
{
  _cleanup_free_ char *base = NULL;
  const char *mark = json_get_string (s->record, "git_published");
  const char *kept = json_get_string (s->record, "git_messages");
  char tree[41];

  if (esbx_git_layer_commit (store, s->project, s->base, &base, err) < 0
      || esbx_git_session_log (store, s, ufd, mark ? mark : base, &g->log, err) < 0)
    return -1;
  g->squash = g->log.n_commits > 0 && g->log.head_tree && kept == NULL
              && esbx_git_tree_of (store, s->project, s->base, ufd, cs, tree, err) == 0
              && strcmp (tree, g->log.head_tree) == 0;
  if (err && *err)
    esbx_error_free (err);
  return 0;
}

/* Before the record is saved: what the branch's commits said, unless they
   are squashed onto the head.  */
static void
git_keep (struct esbx_session *s, const struct git_rebase *g)
{
  _cleanup_free_ char *all = NULL;
  const char *kept = json_get_string (s->record, "git_messages");

  json_remove (s->record, "git_published");
  if (g->squash)
    return;
  if (g->log.messages)
    {
      all = kept ? xasprintf ("%s\n\n%s", kept, g->log.messages) : xstrdup (g->log.messages);
      json_set_string (s->record, "git_messages", all);
    }
  if (g->log.author_name)
    {
      json_set_string (s->record, "git_author", g->log.author_name);
      json_set_string (s->record, "git_email", g->log.author_email);
    }
}

static int
git_after (esbx_store_t *store, struct esbx_session *s, int ufd, const char *head,
           struct git_rebase *g, esbx_error_t *err)
{
  _cleanup_free_ char *commit = NULL;
  struct esbx_changeset cs = { 0 };
  struct esbx_session *now = NULL;
  char squashed[41];
  int ret = -1, fd;

  if (!g->squash)
    {
      if (esbx_git_layer_commit (store, s->project, head, &commit, err) < 0)
        return -1;
      return esbx_git_session_rebase (ufd, commit, false, err);
    }
  /* The session's changes against its new base (the record as saved),
     merged.  */
  if (esbx_session_load (store, s->name, &now, err) < 0)
    return -1;
  fd = esbx_session_scan (store, now, NULL, 0, &cs, NULL, NULL, err);
  esbx_session_free (now);
  if (fd < 0)
    return -1;
  close (fd);
  if (esbx_git_session_commit (store, s->project, head, ufd, &cs, g->log.author_name,
                               g->log.author_email, g->log.messages, squashed, err)
          == 0
      && esbx_git_session_rebase (ufd, squashed, true, err) == 0)
    ret = 0;
  esbx_changeset_free (&cs);
  return ret;
}

int
esbx_session_rebase (esbx_store_t *store, const char *name, struct esbx_publish_result *r,
                     esbx_error_t *err)
{
  return esbx_session_rebase_onto (store, name, NULL, r, err);
}

int
esbx_session_rebase_onto (esbx_store_t *store, const char *name, const char *target,
                          struct esbx_publish_result *r, esbx_error_t *err)
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
  struct git_rebase g = { 0 };
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
  /* A fork first gets an upper of its own: the merge is written into the
     upper, and its frozen layers are not its own (snapshot.c).  */
  if (esbx_session_has_frozen (s)
      && (esbx_session_unmount (store, name, err) < 0 || esbx_session_flatten (store, s, err) < 0
          || esbx_session_mount (store, name, err) < 0))
    goto out;
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
  if (plock < 0 || esbx_layer_chain (store, s->project, target, &ids, &n, err) < 0)
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
  if (git && git_before (store, s, ufd, &cs, &g, err) < 0)
    goto out;
  if (esbx_session_unmount (store, name, err) < 0 || esbx_rebase_plan_apply (plan, &same, err) < 0)
    goto out;
  r->unmerged = esbx_rebase_plan_entries (plan);
  r->merged = esbx_rebase_plan_merged (plan);
  json_set_string (s->record, "base", ids[n - 1]);
  json_set (s->record, "published", json_new (JSON_ARRAY));
  json_set (s->record, "unmerged", json_copy (r->unmerged));
  if (git)
    {
      /* No squashed commit of files left with markers.  */
      g.squash = g.squash && json_len (r->unmerged) == 0;
      git_keep (s, &g);
    }
  if (esbx_session_save (store, name, s->record, err) < 0)
    goto out;
  /* Once the base moved: the branch must not name a commit its layers do
     not hold.  A session that broke its own .git keeps it broken.  */
  if (git)
    {
      esbx_error_t e = NULL;
      if (git_after (store, s, ufd, ids[n - 1], &g, &e) < 0)
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
  esbx_git_log_free (&g.log);
  esbx_rebase_plan_free (plan);
  esbx_upstream_free (&up);
  esbx_changeset_free (&cs);
  esbx_changeset_free (&same);
  esbx_session_free (s);
  return ret;
}
