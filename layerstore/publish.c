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
   MESSAGE, else the messages of those commits, else a line naming the
   session.  ID->head is the commit the session is at (NULL: it made
   none since), which the session's record remembers once the layer
   lands, so that its next publish takes only later commits.  */
static int
git_identity (esbx_store_t *store, struct esbx_session *s, int ufd, const char *message,
              struct esbx_git_identity *id, esbx_error_t *err)
{
  _cleanup_free_ char *base = NULL, *all = NULL;
  struct esbx_git_log log = { 0 };
  const char *agent = json_get_string (s->labels, "agent");
  const char *mark = json_get_string (s->record, "git_published");
  const char *kept = json_get_string (s->record, "git_messages");

  memset (id, 0, sizeof *id);
  if (esbx_git_layer_commit (store, s->project, s->base, &base, err) < 0
      || esbx_git_session_log (store, s, ufd, mark ? mark : base, &log, err) < 0)
    {
      esbx_git_log_free (&log);
      return -1;
    }
  /* Messages a rebase kept come first.  */
  if (kept && log.messages)
    all = xasprintf ("%s\n\n%s", kept, log.messages);
  else if (kept || log.messages)
    all = xstrdup (kept ? kept : log.messages);
  if (message && message[0])
    id->message = xstrdup (message);
  else if (all)
    id->message = steal_pointer (&all);
  else
    id->message = xasprintf ("esbx: publish of session %s", s->name);
  if (log.author_name)
    {
      id->author = steal_pointer (&log.author_name);
      id->email = steal_pointer (&log.author_email);
    }
  else if (json_get_string (s->record, "git_author"))
    {
      id->author = xstrdup (json_get_string (s->record, "git_author"));
      id->email = xstrdup (json_get_string (s->record, "git_email"));
    }
  else
    {
      id->author = xstrdup (agent ? agent : "esbx");
      id->email = xasprintf ("%s@esbx.invalid", agent ? agent : "esbx");
    }
  id->head = steal_pointer (&log.head);
  esbx_git_log_free (&log);
  return 0;
}

void
esbx_git_identity_clear (struct esbx_git_identity *id)
{
  free (id->author);
  free (id->email);
  free (id->message);
  free (id->head);
  memset (id, 0, sizeof *id);
}

int
esbx_publish_git_identity (struct esbx_publish *p, struct esbx_git_identity *id, esbx_error_t *err)
{
  return git_identity (p->store, p->s, p->ufd, p->message, id, err);
}

void
esbx_git_session_landed (json_t *record, const char *head)
{
  if (head)
    json_set_string (record, "git_published", head);
  json_remove (record, "git_messages");
  json_remove (record, "git_author");
  json_remove (record, "git_email");
}

static int
git_commit (esbx_store_t *store, struct esbx_session *s, int ufd, struct esbx_staged *staged,
            struct esbx_layer *layer, char **ids, size_t n, const char *message, esbx_error_t *err)
{
  _cleanup_free_ char *record = NULL;
  struct esbx_git_identity id;
  size_t len;
  int ret;

  /* The layer's id first: the commit's trailer names it.  */
  record = esbx_layer_name (layer, ids, n, &len);
  if (git_identity (store, s, ufd, message, &id, err) < 0)
    return -1;
  ret = esbx_git_layer_make (store, s->project, staged->rel, layer, ids[n - 1], id.author, id.email,
                             id.message, err);
  if (ret == 0)
    esbx_git_session_landed (s->record, id.head);
  esbx_git_identity_clear (&id);
  return ret;
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

void
esbx_publish_free (struct esbx_publish *p)
{
  if (p == NULL)
    return;
  esbx_layer_unstage (p->store, &p->staged);
  esbx_layer_clear (&p->layer);
  esbx_changeset_free (&p->ignored);
  esbx_session_free (p->s);
  if (p->ufd >= 0)
    close (p->ufd);
  if (p->slock >= 0)
    close (p->slock);
  free (p->name);
  free (p->message);
  free (p);
}

/* Errors of a publish name it, but a refusal's own message does.  */
static int
failed (struct esbx_publish *p, esbx_error_t *err)
{
  if (!(err && *err && ((*err)->kind == ESBX_ERR_CONFLICT || (*err)->kind == ESBX_ERR_UNMERGED)))
    esbx_error_wrap (err, "publish `%s`", p->name);
  return -1;
}

int
esbx_publish_open (esbx_store_t *store, const char *name, const char *message,
                   struct esbx_publish **out, esbx_error_t *err)
{
  struct esbx_publish *p;

  *out = NULL;
  if (message && !esbx_utf8_valid (message, strlen (message)))
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "publish `%s`: message is not UTF-8",
                                 name);
  p = xmalloc0 (sizeof *p);
  p->store = store;
  p->name = xstrdup (name);
  p->message = message ? xstrdup (message) : NULL;
  p->staged.lockfd = -1;
  p->ufd = -1;
  p->slock = esbx_session_lock (store, name, err);
  if (p->slock < 0 || esbx_session_load (store, name, &p->s, err) < 0)
    {
      esbx_error_wrap (err, "publish");
      esbx_publish_free (p);
      return -1;
    }
  p->git = esbx_project_is_git (store, p->s->project);
  *out = p;
  return 0;
}

const char *
esbx_publish_project (const struct esbx_publish *p)
{
  return p->s->project;
}

int
esbx_publish_prepare (struct esbx_publish *p, unsigned flags, char *const *allow,
                      struct esbx_publish_result *r, esbx_error_t *err)
{
  struct esbx_session *s = p->s;

  p->ufd
      = esbx_session_scan (p->store, s, NULL, flags | ESBX_CHANGES_IGNORED_TOP, &p->layer.changes,
                           NULL, (flags & ESBX_CHANGES_INCLUDE_IGNORED) ? NULL : &p->ignored, err);
  if (p->ufd < 0 || esbx_unmerged_check (s, p->ufd, r, err) < 0)
    return failed (p, err);
  name_ignored (r, &p->ignored);
  r->n_changes = p->layer.changes.n;
  if (p->layer.changes.n == 0)
    {
      p->empty = true;
      return 0;
    }
  if (esbx_secret_scan_changes (p->store, s, p->ufd, &p->layer.changes, allow, err) < 0)
    return failed (p, err);
  esbx_failpoint ("publish-scanned");
  if (esbx_layer_stage (p->store, s->project, p->ufd, &p->layer.changes, &p->staged, err) < 0)
    return failed (p, err);
  esbx_failpoint ("publish-staged");
  p->layer.session = xstrdup (p->name);
  p->layer.message = xstrdup (p->message ? p->message : "");
  p->layer.labels = esbx_labels_copy (s->labels);
  return 0;
}

bool
esbx_publish_is_empty (const struct esbx_publish *p)
{
  return p->empty;
}

int
esbx_publish_refuse (struct esbx_publish *p, char **ids, size_t n, const struct esbx_upstream *up,
                     struct esbx_publish_result *r, esbx_error_t *err)
{
  if (r->n_conflicts == 0)
    return 0;
  if (esbx_rebase_classify (p->store, p->s, p->ufd, &p->layer.changes, up, ids[n - 1], r, err) < 0)
    return failed (p, err);
  esbx_counters_publish (p->store, true);
  return conflict_error (err, "publish", p->name, r);
}

int
esbx_publish_commit (struct esbx_publish *p, struct esbx_publish_result *r, esbx_error_t *err)
{
  struct esbx_session *s = p->s;
  struct esbx_upstream up = { 0 };
  _cleanup_close_ int plock = -1;
  _cleanup_strv_ char **ids = NULL;
  size_t n;
  int ret = -1;

  if (esbx_project_is_shared (p->store, s->project))
    return esbx_make_error (err, 0,
                            "publish `%s`: project `%s` is shared: its layers go through its "
                            "remote",
                            p->name, s->project);
  plock = esbx_project_lock (p->store, s->project, err);
  if (plock < 0 || esbx_project_stack (p->store, s->project, &ids, &n, err) < 0
      || esbx_upstream_load (p->store, s->project, s->base, s->published, ids, n, &up, err) < 0)
    goto out;
  esbx_conflicts_find (&p->layer.changes, &up, r);
  if (esbx_publish_refuse (p, ids, n, &up, r, err) < 0)
    goto out;
  if (esbx_layer_adopt_parents (p->store, s->project, &p->staged, &p->layer.changes, ids[n - 1],
                                NULL, err)
      < 0)
    goto out;
  if (p->git
      && git_commit (p->store, s, p->ufd, &p->staged, &p->layer, ids, n, p->message, err) < 0)
    goto out;
  if (esbx_layer_commit (p->store, s->project, &p->staged, &p->layer, ids, n, err) < 0)
    goto out;
  esbx_failpoint ("publish-head-moved");
  if (p->git)
    esbx_git_project_dir_update (p->store, s->project);
  ret = 0;
out:
  esbx_upstream_free (&up);
  return ret < 0 ? failed (p, err) : 0;
}

int
esbx_publish_end (struct esbx_publish *p, struct esbx_publish_result *r, esbx_error_t *err)
{
  struct esbx_session *s = p->s;
  json_t *pub;

  if (p->empty)
    {
      r->published = true;
      esbx_counters_publish (p->store, false);
      return 0;
    }
  r->layer = xstrdup (p->layer.id);
  /* Remember the layer so that the next publish carries only what is new.  */
  pub = json_get (s->record, "published");
  if (pub == NULL || pub->type != JSON_ARRAY)
    {
      pub = json_new (JSON_ARRAY);
      json_set (s->record, "published", pub);
    }
  json_append (pub, json_new_string (p->layer.id));
  json_set (s->record, "unmerged", json_new (JSON_ARRAY));
  if (esbx_session_save (p->store, p->name, s->record, err) < 0)
    return failed (p, err);
  {
    _cleanup_close_ int sdfd = esbx_session_open_dir (p->store, p->name, NULL);
    _cleanup_json_ json_t *none = json_new (JSON_ARRAY);
    if (sdfd >= 0)
      esbx_unmerged_prune (sdfd, none);
  }
  esbx_failpoint ("publish-done");
  r->published = true;
  esbx_counters_publish (p->store, false);
  return 0;
}
