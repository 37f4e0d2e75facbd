/* Publish (DESIGN.md, "Conflict-aware publish"); the conflict rules
 * themselves are in conflict.c, rebase in rebase.c.
 * The change set is scanned and staged as a layer outside the project lock;
 * the lock covers only reading the head, the conflict check and the append.  */
#include "internal.h"
#include "git.h"
#include "failpoint.h"
#include "fs.h"
#include "path.h"
#include "text.h"
#include "utils.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

void
esbx_publish_result_free (struct esbx_publish_result *r)
{
  size_t i;

  for (i = 0; i < r->n_conflicts; i++)
    {
      free (r->conflicts[i].path);
      free (r->conflicts[i].layer);
      free (r->conflicts[i].session);
      free (r->conflicts[i].renamed);
    }
  free (r->conflicts);
  free (r->layer);
  cleanup_strvp (&r->merged);
  cleanup_strvp (&r->ignored_first);
  json_free (r->unmerged);
  memset (r, 0, sizeof *r);
}

static int
conflict_error (esbx_error_t *err, const char *verb, const char *name,
                const struct esbx_publish_result *r)
{
  return esbx_make_error_kind (
      err, ESBX_ERR_CONFLICT, 0,
      "%s `%s`: %zu conflicting path%s with upstream (first: `%s` in layer "
      "`%s`)",
      verb, name, r->n_conflicts, r->n_conflicts == 1 ? "" : "s", r->conflicts[0].path,
      r->conflicts[0].layer);
}

/* A git project's layer is a commit too (layerstore/git/git_layer.c): its
   author is the session's last commit's if it committed since its base
   (or its last publish), else its `agent` label, else "esbx"; its message
   -m, else the messages of those commits, else a line naming the session.
   The record remembers the commit the session was at, so that the next
   publish takes only later ones.  */
static int
git_commit (esbx_store_t *store, struct esbx_session *s, int ufd, struct esbx_staged *staged,
            struct esbx_layer *layer, char **ids, size_t n, const char *message, esbx_error_t *err)
{
  _cleanup_free_ char *base = NULL, *record = NULL, *text = NULL, *email = NULL;
  struct esbx_git_log log = { 0 };
  const char *agent = json_get_string (s->labels, "agent");
  const char *mark = json_get_string (s->record, "git_published");
  const char *kept = json_get_string (s->record, "git_messages");
  _cleanup_free_ char *all = NULL;
  size_t len;
  int ret = -1;

  record = esbx_layer_name (layer, ids, n, &len);
  if (esbx_git_layer_commit (store, s->project, s->base, &base, err) < 0
      || esbx_git_session_log (store, s, ufd, mark ? mark : base, &log, err) < 0)
    goto out;
  /* Messages a rebase kept come first.  */
  if (kept && log.messages)
    all = xasprintf ("%s\n\n%s", kept, log.messages);
  else if (kept || log.messages)
    all = xstrdup (kept ? kept : log.messages);
  if (message == NULL || message[0] == '\0')
    message = all;
  if (message == NULL)
    message = text = xasprintf ("esbx: publish of session %s", s->name);
  if (log.author_name == NULL && json_get_string (s->record, "git_author"))
    {
      log.author_name = xstrdup (json_get_string (s->record, "git_author"));
      log.author_email = xstrdup (json_get_string (s->record, "git_email"));
    }
  if (log.author_name == NULL)
    email = xasprintf ("%s@esbx.invalid", agent ? agent : "esbx");
  if (esbx_git_layer_make (store, s->project, staged->rel, layer, ids[n - 1],
                           log.author_name ? log.author_name
                           : agent         ? agent
                                           : "esbx",
                           log.author_email ? log.author_email : email, message, err)
      < 0)
    goto out;
  if (log.head)
    json_set_string (s->record, "git_published", log.head);
  json_remove (s->record, "git_messages");
  json_remove (s->record, "git_author");
  json_remove (s->record, "git_email");
  ret = 0;
out:
  esbx_git_log_free (&log);
  return ret;
}

int
esbx_session_publish (esbx_store_t *store, const char *name, const char *message,
                      struct esbx_publish_result *r, esbx_error_t *err)
{
  return esbx_session_publish_flags (store, name, message, 0, r, err);
}

/* What the ignore rules left out of the layer, named in R: how many and
   the first few (an ignored directory is one).  */
#define IGNORED_NAMED 5
static void
name_ignored (struct esbx_publish_result *r, const struct esbx_changeset *ignored)
{
  struct strv first = { 0 };

  r->n_ignored = ignored->n;
  for (size_t i = 0; i < ignored->n && i < IGNORED_NAMED; i++)
    strv_push (&first, ignored->v[i].type == ESBX_TYPE_DIR ? xasprintf ("%s/", ignored->v[i].path)
                                                           : xstrdup (ignored->v[i].path));
  r->ignored_first = first.v ? first.v : xmalloc0 (sizeof (char *));
}

int
esbx_session_publish_flags (esbx_store_t *store, const char *name, const char *message,
                            unsigned flags, struct esbx_publish_result *r, esbx_error_t *err)
{
  return esbx_session_publish_allow (store, name, message, flags, NULL, r, err);
}

int
esbx_session_publish_allow (esbx_store_t *store, const char *name, const char *message,
                            unsigned flags, char *const *allow, struct esbx_publish_result *r,
                            esbx_error_t *err)
{
  struct esbx_session *s = NULL;
  struct esbx_staged staged = { .lockfd = -1 };
  struct esbx_layer layer = { 0 };
  struct esbx_upstream up = { 0 };
  struct esbx_remote_warm *warm = NULL;
  struct esbx_changeset ignored = { 0 };
  _cleanup_close_ int ufd = -1;
  _cleanup_close_ int slock = -1;
  _cleanup_close_ int plock = -1;
  _cleanup_strv_ char **ids = NULL;
  json_t *pub;
  size_t n;
  bool git;
  int ret = -1;

  memset (r, 0, sizeof *r);
  if (message && !esbx_utf8_valid (message, strlen (message)))
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "publish `%s`: message is not UTF-8",
                                 name);
  slock = esbx_session_lock (store, name, err);
  if (slock < 0)
    return esbx_error_wrap (err, "publish");
  if (esbx_session_load (store, name, &s, err) < 0)
    return esbx_error_wrap (err, "publish");
  git = esbx_project_is_git (store, s->project);
  if (esbx_project_is_shared (store, s->project))
    warm = esbx_remote_warm_start (store, s->project);
  ufd = esbx_session_scan (store, s, NULL, flags | ESBX_CHANGES_IGNORED_TOP, &layer.changes, NULL,
                           (flags & ESBX_CHANGES_INCLUDE_IGNORED) ? NULL : &ignored, err);
  if (ufd < 0 || esbx_unmerged_check (s, ufd, r, err) < 0)
    goto out;
  name_ignored (r, &ignored);
  r->n_changes = layer.changes.n;
  if (layer.changes.n == 0)
    {
      r->published = true;
      esbx_counters_publish (store, false);
      ret = 0;
      goto out;
    }
  if (esbx_secret_scan_changes (store, s, ufd, &layer.changes, allow, err) < 0)
    goto out;
  esbx_failpoint ("publish-scanned");
  if (esbx_layer_stage (store, s->project, ufd, &layer.changes, &staged, err) < 0)
    goto out;
  esbx_failpoint ("publish-staged");

  if (warm && git)
    {
      esbx_make_error (err, 0,
                       "publish `%s`: a git project shared through a registry is not supported "
                       "yet",
                       name);
      goto out;
    }
  if (warm)
    {
      int k = esbx_remote_commit (store, s, message, &staged, &layer, warm, r, err);
      if (k < 0)
        goto out;
      if (k == 0)
        goto committed;
      /* The attempt brought the local stack to the remote head: the
         conflicts are told apart from it.  */
      if (esbx_project_stack (store, s->project, &ids, &n, err) < 0
          || esbx_upstream_load (store, s->project, s->base, s->published, ids, n, &up, err) < 0
          || esbx_rebase_classify (store, s, ufd, &layer.changes, &up, ids[n - 1], r, err) < 0)
        goto out;
      goto conflicts;
    }
  plock = esbx_project_lock (store, s->project, err);
  if (plock < 0 || esbx_project_stack (store, s->project, &ids, &n, err) < 0)
    goto out;
  if (esbx_upstream_load (store, s->project, s->base, s->published, ids, n, &up, err) < 0)
    goto out;
  esbx_conflicts_find (&layer.changes, &up, r);
  if (r->n_conflicts > 0
      && esbx_rebase_classify (store, s, ufd, &layer.changes, &up, ids[n - 1], r, err) < 0)
    goto out;
conflicts:
  if (r->n_conflicts > 0)
    {
      esbx_counters_publish (store, true);
      conflict_error (err, "publish", name, r);
      goto out;
    }
  if (esbx_layer_adopt_parents (store, s->project, &staged, &layer.changes, ids[n - 1], NULL, err)
      < 0)
    goto out;
  layer.session = xstrdup (name);
  layer.message = xstrdup (message ? message : "");
  layer.labels = esbx_labels_copy (s->labels);
  if (git && git_commit (store, s, ufd, &staged, &layer, ids, n, message, err) < 0)
    goto out;
  if (esbx_layer_commit (store, s->project, &staged, &layer, ids, n, err) < 0)
    goto out;
  esbx_failpoint ("publish-head-moved");
  if (git)
    esbx_git_project_dir_update (store, s->project);
  close (plock);
  plock = -1;
committed:
  r->layer = xstrdup (layer.id);

  /* Remember the layer so that the next publish carries only what is new.  */
  pub = json_get (s->record, "published");
  if (pub == NULL || pub->type != JSON_ARRAY)
    {
      pub = json_new (JSON_ARRAY);
      json_set (s->record, "published", pub);
    }
  json_append (pub, json_new_string (layer.id));
  json_set (s->record, "unmerged", json_new (JSON_ARRAY));
  if (esbx_session_save (store, name, s->record, err) < 0)
    goto out;
  {
    _cleanup_close_ int sdfd = esbx_session_open_dir (store, name, NULL);
    _cleanup_json_ json_t *none = json_new (JSON_ARRAY);
    if (sdfd >= 0)
      esbx_unmerged_prune (sdfd, none);
  }
  esbx_failpoint ("publish-done");
  r->published = true;
  esbx_counters_publish (store, false);
  ret = 0;

out:
  /* The conflict message already names the session.  */
  if (ret < 0
      && !(err && *err && ((*err)->kind == ESBX_ERR_CONFLICT || (*err)->kind == ESBX_ERR_UNMERGED)))
    esbx_error_wrap (err, "publish `%s`", name);
  esbx_layer_unstage (store, &staged);
  esbx_remote_warm_free (warm);
  esbx_upstream_free (&up);
  free (layer.id);
  free (layer.parent);
  free (layer.created);
  free (layer.session);
  free (layer.message);
  json_free (layer.labels);
  esbx_changeset_free (&layer.changes);
  esbx_changeset_free (&ignored);
  esbx_session_free (s);
  return ret;
}
