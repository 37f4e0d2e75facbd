/* The merge queue's layers (README, "The gate"): a request's candidate is
 * built by the three-way merge rebase does, in a session of the request's
 * own (ID.merge: the request's base, the changes it filed, rebased onto
 * the head or onto the candidate of the request ahead of it), and
 * published as a layer that is installed in layers/ but that no stack
 * names yet (layer.c, esbx_layer_chain: its parents lead to the stack).
 * Its checks run on that very layer (shim/lib/queue_run.c), and landing
 * only appends its id to the stack when the head is still its parent: the
 * tree that lands is the tree that was checked, byte for byte.
 *
 * Crash safety: a candidate is named in its request before it is
 * installed; a runner killed at any point leaves a request whose candidate
 * is in the stack (landed: esbx_queue_drop finishes the record), or not
 * (it is removed and the request tested again), never both.  */
#include "internal.h"
#include "git.h"
#include "fs.h"
#include "log.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <string.h>

char *
esbx_request_session (const char *id, const char *role)
{
  return xasprintf ("%s.%s", id, role);
}

int
esbx_request_update (esbx_store_t *store, const char *project, const char *id, bool any,
                     void (*fn) (json_t *rec, void *arg), void *arg, esbx_error_t *err)
{
  _cleanup_close_ int lock = esbx_queue_lock (store, project, err);
  _cleanup_json_ json_t *rec = NULL;

  if (lock < 0 || (rec = esbx_request_read (store, project, id, err)) == NULL)
    return -1;
  if (esbx_request_is_final (rec) && !any)
    return 0;
  fn (rec, arg);
  return esbx_request_write (store, project, id, rec, err);
}

static bool
in_stack (char **ids, size_t n, const char *id)
{
  for (size_t i = 0; i < n; i++)
    if (strcmp (ids[i], id) == 0)
      return true;
  return false;
}

/* A throwaway session NAME left by a runner that was killed.  */
static void
discard_leftover (esbx_store_t *store, const char *name)
{
  esbx_error_t e = NULL;

  if (esbx_session_exists (store, name)
      && esbx_session_discard (store, name, ESBX_DISCARD_FORCE | ESBX_DISCARD_SCRATCH, &e) < 0)
    {
      esbx_warn ("%s", e->msg);
      esbx_error_free (&e);
    }
}

static json_t *
refusal (const char *kind, const char *message)
{
  json_t *o = json_new (JSON_OBJECT);

  json_set_string (o, "kind", kind);
  json_set_string (o, "message", message);
  return o;
}

/* The merge session of request REC: on its base, with its published layers
   and the changes it filed in its upper, unmounted.  */
static int
merge_session (esbx_store_t *store, const char *project, const char *id, const json_t *rec,
               const char *name, esbx_error_t *err)
{
  _cleanup_free_ char *label = xasprintf ("esbx.queue=%s", id), *made = NULL;
  _cleanup_free_ char *diffrel = esbx_request_file (project, id, "diff");
  char *labels[] = { label, (char *)"esbx.role=merge", NULL };
  struct esbx_session_opts o = { 0 };
  struct esbx_session *s = NULL;
  _cleanup_close_ int src = -1, sdfd = -1, ufd = -1;
  int ret = -1;

  o.name = name;
  o.base = json_get_string (rec, "base");
  o.labels = labels;
  o.network = "none";
  o.disk = ESBX_DISK_NONE;
  if (esbx_session_create (store, project, &o, &made, err) < 0
      || esbx_session_unmount (store, name, err) < 0
      || esbx_session_load (store, name, &s, err) < 0)
    return -1;
  json_set (s->record, "published", json_copy (json_get (rec, "published")));
  if (esbx_session_save (store, name, s->record, err) < 0)
    goto out;
  src = esbx_open_dir_at (store->rootfd, diffrel, err);
  sdfd = src < 0 ? -1 : esbx_session_open_dir (store, name, err);
  ufd = sdfd < 0 ? -1 : esbx_open_dir_at (sdfd, "upper", err);
  if (ufd < 0 || esbx_upper_copy (src, ufd, err) < 0)
    goto out;
  ret = 0;
out:
  esbx_session_free (s);
  return ret;
}

struct testing
{
  const char *candidate, *parent;
};

static void
set_testing (json_t *rec, void *arg)
{
  struct testing *t = arg;
  _cleanup_free_ char *now = esbx_rfc3339_now ();
  int64_t runs = 0;

  json_set (rec, "candidate", t->candidate ? json_new_string (t->candidate) : json_new (JSON_NULL));
  json_set (rec, "parent", json_new_string (t->parent));
  json_set_string (rec, "state", "testing");
  json_set_string (rec, "tested", now);
  json_set (rec, "checks", json_new (JSON_ARRAY));
  json_get_int (rec, "runs", &runs);
  json_set_int (rec, "runs", runs + 1);
}

static void
set_landed_empty (json_t *rec, void *arg)
{
  _cleanup_free_ char *now = esbx_rfc3339_now ();

  (void)arg;
  json_set_string (rec, "state", "landed");
  json_set (rec, "layer", json_new (JSON_NULL));
  json_set_string (rec, "landed", now);
}

/* Name the layer of P as the candidate of request ID on TARGET, record it
   in the request, install it.  */
static int
install_candidate (esbx_store_t *store, const char *project, const char *id, const json_t *rec,
                   const struct esbx_gate *gate, struct esbx_publish *p, const char *target,
                   esbx_error_t *err)
{
  _cleanup_strv_ char **ids = NULL;
  _cleanup_close_ int plock = -1;
  _cleanup_free_ char *text = NULL;
  struct testing t = { .parent = target };
  json_t *g;
  size_t n, len;

  free (p->layer.session);
  p->layer.session = xstrdup (json_get_string (rec, "session"));
  free (p->layer.message);
  p->layer.message
      = xstrdup (json_get_string (rec, "message") ? json_get_string (rec, "message") : "");
  json_free (p->layer.labels);
  p->layer.labels = esbx_labels_copy (json_get (rec, "labels"));
  g = json_new (JSON_OBJECT);
  json_set_string (g, "request", id);
  json_set (g, "approvals",
            json_get (rec, "approvals") ? json_copy (json_get (rec, "approvals"))
                                        : json_new (JSON_ARRAY));
  json_set (g, "checks", json_new_strings (gate->checks));
  json_free (p->layer.gate);
  p->layer.gate = g;
  if (esbx_layer_adopt_parents (store, project, &p->staged, &p->layer.changes, target, NULL, err)
      < 0)
    return -1;
  plock = esbx_project_lock (store, project, err);
  if (plock < 0 || esbx_layer_chain (store, project, target, &ids, &n, err) < 0)
    return -1;
  text = esbx_layer_name (&p->layer, ids, n, &len);
  if (p->git)
    {
      const json_t *gid = json_get (rec, "git");

      if (gid == NULL)
        return esbx_make_error (err, 0, "request `%s` of a git project has no author", id);
      if (esbx_git_layer_make (store, project, p->staged.rel, &p->layer, target,
                               json_get_string (gid, "author"), json_get_string (gid, "email"),
                               json_get_string (gid, "message"), err)
          < 0)
        return -1;
    }
  t.candidate = p->layer.id;
  /* Named in the request first: gc keeps it, a runner killed next finds
     it.  */
  if (esbx_request_update (store, project, id, false, set_testing, &t, err) < 0)
    return -1;
  return esbx_layer_install (store, project, &p->staged, &p->layer, ids, n, err);
}

int
esbx_queue_candidate (esbx_store_t *store, const char *project, const char *id, const char *target,
                      char **candidate, json_t **refused, esbx_error_t *err)
{
  _cleanup_free_ char *name = esbx_request_session (id, "merge"), *base = NULL;
  _cleanup_json_ json_t *rec = NULL;
  struct esbx_publish_result r = { 0 };
  struct esbx_publish *p = NULL;
  struct esbx_gate gate = { 0 };
  esbx_error_t e = NULL;
  int ret = -1;

  *candidate = NULL;
  *refused = NULL;
  rec = esbx_request_read (store, project, id, err);
  if (rec == NULL || esbx_gate_load (store, project, &gate, err) < 0)
    return -1;
  discard_leftover (store, name);
  if (esbx_layer_resolve (store, project, json_get_string (rec, "base"), &base, &e) < 0)
    {
      _cleanup_free_ char *msg
          = xasprintf ("request `%s`: its base layer `%s` is no longer in the stack (squashed?)",
                       id, json_get_string (rec, "base"));
      esbx_error_free (&e);
      *refused = refusal ("base", msg);
      ret = 0;
      goto out;
    }
  if (merge_session (store, project, id, rec, name, err) < 0)
    goto out;
  if (esbx_session_rebase_onto (store, name, target, &r, &e) < 0)
    {
      if (e->kind != ESBX_ERR_UNMERGED && e->kind != ESBX_ERR_CONFLICT)
        {
          *err = e;
          goto out;
        }
      *refused = refusal (e->kind == ESBX_ERR_UNMERGED ? "unmerged" : "conflict", e->msg);
      if (r.unmerged)
        json_set (*refused, "unmerged", esbx_unmerged_json (&r));
      esbx_error_free (&e);
      ret = 0;
      goto out;
    }
  esbx_publish_result_free (&r);
  if (esbx_publish_open (store, name, json_get_string (rec, "message"), &p, err) < 0
      || esbx_publish_prepare (
             p, json_get_bool (rec, "include_ignored", false) ? ESBX_CHANGES_INCLUDE_IGNORED : 0,
             NULL, &r, err)
             < 0)
    goto out;
  if (esbx_publish_is_empty (p))
    {
      /* Upstream has every change of it already: nothing to land, at any
         place in the queue.  */
      if (esbx_request_update (store, project, id, false, set_landed_empty, NULL, err) < 0)
        goto out;
      esbx_queue_event (store, project, id, "queue.landed", NULL);
      ret = 0;
      goto out;
    }
  if (install_candidate (store, project, id, rec, &gate, p, target, err) < 0)
    goto out;
  *candidate = xstrdup (p->layer.id);
  ret = 0;
out:
  esbx_publish_result_free (&r);
  esbx_publish_free (p);
  discard_leftover (store, name);
  esbx_gate_clear (&gate);
  if (ret < 0)
    esbx_error_wrap (err, "request `%s`", id);
  return ret;
}

/* ---- landing ---------------------------------------------------------- */

/* The session of a landed request remembers its layer, as after a publish:
   its next diff and publish carry only what is new.  */
static void
session_published (esbx_store_t *store, const json_t *rec, const char *layer)
{
  const char *name = json_get_string (rec, "session"), *sid = json_get_string (rec, "session_id");
  struct esbx_session *s = NULL;
  _cleanup_close_ int lock = -1;
  esbx_error_t e = NULL;
  json_t *pub;

  if (name == NULL || !esbx_session_exists (store, name))
    return;
  lock = esbx_session_lock (store, name, &e);
  if (lock < 0 || esbx_session_load (store, name, &s, &e) < 0)
    goto out;
  if (sid == NULL || strcmp (s->id, sid) != 0)
    goto out;
  pub = json_get (s->record, "published");
  if (pub == NULL || pub->type != JSON_ARRAY)
    {
      pub = json_new (JSON_ARRAY);
      json_set (s->record, "published", pub);
    }
  json_append (pub, json_new_string (layer));
  if (json_get (rec, "git"))
    esbx_git_session_landed (s->record, json_get_string (json_get (rec, "git"), "head"));
  esbx_session_save (store, name, s->record, &e);
out:
  if (e)
    {
      esbx_warn ("request `%s`: session `%s`: %s", json_get_string (rec, "id"), name, e->msg);
      esbx_error_free (&e);
    }
  esbx_session_free (s);
}

static double
seconds_since (const char *rfc3339)
{
  struct tm tm = { 0 };
  struct timespec now;
  const char *rest;

  if (rfc3339 == NULL || (rest = strptime (rfc3339, "%Y-%m-%dT%H:%M:%S", &tm)) == NULL)
    return 0;
  clock_gettime (CLOCK_REALTIME, &now);
  return difftime (now.tv_sec, timegm (&tm)) + now.tv_nsec / 1e9 - strtod (rest, NULL);
}

/* The record of request ID whose candidate is in the stack now.  */
static int
finish_landed (esbx_store_t *store, const char *project, const char *id, esbx_error_t *err)
{
  _cleanup_close_ int lock = esbx_queue_lock (store, project, err);
  _cleanup_json_ json_t *rec = NULL;
  _cleanup_free_ char *now = esbx_rfc3339_now (), *diff = NULL;
  const char *cand;
  esbx_error_t e = NULL;

  if (lock < 0 || (rec = esbx_request_read (store, project, id, err)) == NULL)
    return -1;
  if (strcmp (json_get_string (rec, "state") ? json_get_string (rec, "state") : "", "landed") == 0)
    return 0;
  cand = json_get_string (rec, "candidate");
  json_set_string (rec, "state", "landed");
  json_set_string (rec, "layer", cand);
  json_set_string (rec, "landed", now);
  if (esbx_request_write (store, project, id, rec, err) < 0)
    return -1;
  esbx_queue_count (store, project, "landed", NULL, 1);
  esbx_queue_count (store, project, "wait_seconds", NULL,
                    seconds_since (json_get_string (rec, "filed")));
  esbx_queue_count (store, project, "waited", NULL, 1);
  esbx_counters_publish (store, false);
  session_published (store, rec, cand);
  {
    json_t *f = json_new (JSON_OBJECT);
    json_set_string (f, "layer", cand);
    json_set_string (f, "session", json_get_string (rec, "session"));
    esbx_queue_event (store, project, id, "queue.landed", f);
  }
  esbx_queue_audit (store, "land", NULL, project, id, cand);
  diff = esbx_request_file (project, id, "diff");
  if (esbx_rm_rf_at (store->rootfd, diff, &e) < 0)
    esbx_error_free (&e);
  return 0;
}

int
esbx_queue_land (esbx_store_t *store, const char *project, const char *id, esbx_error_t *err)
{
  _cleanup_close_ int plock = esbx_project_lock (store, project, err);
  _cleanup_strv_ char **ids = NULL;
  _cleanup_json_ json_t *rec = NULL;
  const char *cand, *parent;
  size_t n;

  if (plock < 0 || esbx_project_stack (store, project, &ids, &n, err) < 0
      || (rec = esbx_request_read (store, project, id, err)) == NULL)
    return -1;
  cand = json_get_string (rec, "candidate");
  parent = json_get_string (rec, "parent");
  if (cand == NULL || parent == NULL)
    return esbx_make_error (err, 0, "request `%s` has no candidate layer", id);
  if (!in_stack (ids, n, cand))
    {
      char **next;
      int r;

      if (strcmp (ids[n - 1], parent) != 0)
        return 0;
      next = xmalloc ((n + 2) * sizeof (char *));
      memcpy (next, ids, n * sizeof (char *));
      next[n] = (char *)cand;
      next[n + 1] = NULL;
      r = esbx_project_write_stack (store, project, next, n + 1, err);
      free (next);
      if (r < 0)
        return -1;
      {
        _cleanup_free_ char *dir = esbx_project_rel (project);
        if (esbx_fsync_at (store->rootfd, dir, err) < 0)
          return -1;
      }
      if (json_get (rec, "git"))
        esbx_git_project_dir_update (store, project);
    }
  if (finish_landed (store, project, id, err) < 0)
    return -1;
  return 1;
}

struct back
{
  const char *state;
};

static void
set_back (json_t *rec, void *arg)
{
  struct back *b = arg;

  json_set (rec, "candidate", json_new (JSON_NULL));
  json_set (rec, "parent", json_new (JSON_NULL));
  if (!esbx_request_is_final (rec))
    json_set_string (rec, "state", b->state);
}

int
esbx_queue_drop (esbx_store_t *store, const char *project, const char *id, const char *state,
                 esbx_error_t *err)
{
  _cleanup_close_ int plock = esbx_project_lock (store, project, err);
  _cleanup_strv_ char **ids = NULL;
  _cleanup_json_ json_t *rec = NULL;
  struct back b = { .state = state };
  const char *cand;
  size_t n;

  if (plock < 0 || esbx_project_stack (store, project, &ids, &n, err) < 0
      || (rec = esbx_request_read (store, project, id, err)) == NULL)
    return -1;
  cand = json_get_string (rec, "candidate");
  if (cand && in_stack (ids, n, cand))
    return finish_landed (store, project, id, err) < 0 ? -1 : 1;
  if (cand && esbx_name_valid (cand))
    {
      _cleanup_free_ char *rel = esbx_layer_rel (project, cand);
      esbx_error_t e = NULL;

      if (esbx_rm_rf_at (store->rootfd, rel, &e) < 0)
        {
          esbx_warn ("%s", e->msg);
          esbx_error_free (&e);
        }
    }
  if (esbx_request_update (store, project, id, true, set_back, &b, err) < 0)
    return -1;
  return 0;
}

struct rejection
{
  json_t *why;
};

static void
set_rejected (json_t *rec, void *arg)
{
  struct rejection *r = arg;
  _cleanup_free_ char *now = esbx_rfc3339_now ();

  json_set_string (r->why, "at", now);
  json_set (rec, "rejected", json_copy (r->why));
  json_set_string (rec, "state", "rejected");
}

int
esbx_queue_reject (esbx_store_t *store, const char *project, const char *id, json_t *why,
                   esbx_error_t *err)
{
  struct rejection r = { .why = why };
  const char *kind = json_get_string (why, "kind");
  int ret = -1;

  if (esbx_queue_drop (store, project, id, "queued", err) < 0)
    goto out;
  if (esbx_request_update (store, project, id, false, set_rejected, &r, err) < 0)
    goto out;
  {
    _cleanup_close_ int lock = esbx_queue_lock (store, project, err);
    if (lock >= 0)
      esbx_queue_count (store, project, "rejected", kind ? kind : "check", 1);
  }
  {
    json_t *f = json_new (JSON_OBJECT);
    json_set_string (f, "kind", kind ? kind : "check");
    json_set_string (f, "message", json_get_string (why, "message"));
    esbx_queue_event (store, project, id, "queue.rejected", f);
  }
  esbx_queue_audit (store, "reject", NULL, project, id, json_get_string (why, "message"));
  ret = 0;
out:
  json_free (why);
  return ret;
}
