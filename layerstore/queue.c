/* The merge queue's requests (README, "The gate"): their records in
 * ROOT/projects/P/queue/ID/request.json, filing one from a prepared
 * publish, approving, rejecting, cancelling, listing, and the queue's
 * events (queue/events.jsonl), audit lines (ROOT/audit.log) and counters
 * (queue/stats.json).  Building and landing a request's layer is
 * queue_merge.c; running its checks is the shim's (shim/lib/queue_run.c).
 *
 * Every change of a record is made under the queue's lock (queue/lock),
 * taken after the project lock where both are held, and written atomically,
 * so that a runner killed at any point leaves each record whole.  */
#include "internal.h"
#include "git.h"
#include "fs.h"
#include "path.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SEQ_FILE  "queue.seq"
#define SEQ_LOCK  "queue.lock"
#define LOG_LIMIT (4u << 20)

bool
esbx_request_is_final (const json_t *rec)
{
  const char *s = json_get_string (rec, "state");

  return s
         && (strcmp (s, "landed") == 0 || strcmp (s, "rejected") == 0
             || strcmp (s, "cancelled") == 0);
}

/* "r" and digits.  */
static bool
id_valid (const char *id)
{
  size_t i;

  if (id == NULL || id[0] != 'r' || id[1] == '\0' || strlen (id) > 20)
    return false;
  for (i = 1; id[i]; i++)
    if (id[i] < '0' || id[i] > '9')
      return false;
  return true;
}

int
esbx_queue_lock (esbx_store_t *store, const char *project, esbx_error_t *err)
{
  _cleanup_free_ char *dir = esbx_queue_rel (project);
  _cleanup_free_ char *lock = xasprintf ("%s/lock", dir);
  int fd;

  if (mkdirat (store->rootfd, dir, 0700) < 0 && errno != EEXIST)
    return esbx_make_error (err, errno, "project `%s`: mkdir `%s`", project, dir);
  fd = esbx_lock_at (store->rootfd, lock, true, true, err);
  if (fd < 0)
    return esbx_error_wrap (err, "project `%s`: the queue", project);
  return fd;
}

json_t *
esbx_request_read (esbx_store_t *store, const char *project, const char *id, esbx_error_t *err)
{
  _cleanup_free_ char *rel = esbx_request_file (project, id, "request.json");
  json_t *j = json_parse_file_at (store->rootfd, rel, err);

  if (j == NULL)
    return esbx_error_wrap (err, "request `%s`", id), NULL;
  return j;
}

int
esbx_request_write (esbx_store_t *store, const char *project, const char *id, json_t *rec,
                    esbx_error_t *err)
{
  _cleanup_free_ char *dir = esbx_request_file (project, id, ".");
  _cleanup_free_ char *text = NULL, *now = esbx_rfc3339_now ();
  _cleanup_close_ int dfd = -1;
  size_t len;

  json_set_string (rec, "updated", now);
  dfd = esbx_open_dir_at (store->rootfd, dir, err);
  if (dfd < 0)
    return esbx_error_wrap (err, "request `%s`", id);
  text = json_serialize (rec, true, &len);
  if (esbx_write_file_atomic_at (dfd, "request.json", text, len, 0644, err) < 0)
    return esbx_error_wrap (err, "request `%s`", id);
  return 0;
}

/* ---- events, audit, counters ------------------------------------------ */

static void
append_line (int dirfd, const char *rel, json_t *o)
{
  _cleanup_free_ char *doc = NULL, *line = NULL;
  _cleanup_close_ int fd = -1;
  size_t len;

  doc = json_serialize (o, false, &len);
  line = xasprintf ("%s\n", doc);
  fd = openat (dirfd, rel, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  /* One write with O_APPEND: lines of several writers never interleave.  */
  if (fd >= 0)
    (void)esbx_write_all (fd, line, len + 1);
}

void
esbx_queue_event (esbx_store_t *store, const char *project, const char *id, const char *type,
                  json_t *fields)
{
  _cleanup_free_ char *rel = esbx_queue_rel (project), *file = NULL;
  _cleanup_free_ char *now = esbx_rfc3339_now ();
  _cleanup_json_ json_t *o = json_new (JSON_OBJECT);

  json_set_string (o, "time", now);
  json_set_string (o, "type", type);
  json_set_string (o, "project", project);
  json_set_string (o, "request", id);
  for (size_t i = 0; i < json_len (fields); i++)
    json_set (o, json_key_at (fields, i), json_copy (json_at (fields, i)));
  json_free (fields);
  file = xasprintf ("%s/events.jsonl", rel);
  append_line (store->rootfd, file, o);
}

void
esbx_queue_audit (esbx_store_t *store, const char *action, const char *by, const char *project,
                  const char *id, const char *reason)
{
  _cleanup_free_ char *now = esbx_rfc3339_now ();
  _cleanup_json_ json_t *o = json_new (JSON_OBJECT);

  json_set_string (o, "time", now);
  json_set_string (o, "action", action);
  json_set_string (o, "by", by ? by : "esbx");
  json_set_string (o, "project", project);
  json_set_string (o, "request", id);
  if (reason)
    json_set_string (o, "reason", reason);
  append_line (store->rootfd, "audit.log", o);
}

json_t *
esbx_queue_stats (esbx_store_t *store, const char *project)
{
  _cleanup_free_ char *q = esbx_queue_rel (project), *rel = NULL;
  esbx_error_t e = NULL;
  json_t *j;

  rel = xasprintf ("%s/stats.json", q);
  if (!esbx_exists_at (store->rootfd, rel))
    return json_new (JSON_OBJECT);
  j = json_parse_file_at (store->rootfd, rel, &e);
  esbx_error_free (&e);
  return j ? j : json_new (JSON_OBJECT);
}

/* Add VALUE to counter KEY (and, with SUB, to KEY.SUB) of PROJECT's queue;
   the caller holds the queue lock.  Counters are best effort.  */
void
esbx_queue_count (esbx_store_t *store, const char *project, const char *key, const char *sub,
                  double value)
{
  _cleanup_json_ json_t *j = esbx_queue_stats (store, project);
  _cleanup_free_ char *q = esbx_queue_rel (project), *text = NULL, *num = NULL;
  _cleanup_close_ int dfd = -1;
  json_t *target = j, *v;
  esbx_error_t e = NULL;
  double have = 0;
  size_t len;

  if (sub)
    {
      target = json_get (j, key);
      if (target == NULL || target->type != JSON_OBJECT)
        {
          target = json_new (JSON_OBJECT);
          json_set (j, key, target);
        }
      key = sub;
    }
  v = json_get (target, key);
  if (v && v->type == JSON_STRING)
    have = strtod (v->text, NULL);
  else if (v)
    {
      int64_t i;
      if (json_int_value (v, &i))
        have = (double)i;
    }
  /* Seconds keep their fraction: strings, as the JSON layer has integers
     only.  */
  num = xasprintf ("%.6f", have + value);
  json_set_string (target, key, num);
  text = json_serialize (j, true, &len);
  dfd = esbx_open_dir_at (store->rootfd, q, &e);
  if (dfd < 0 || esbx_replace_file_at (dfd, "stats.json", text, len, 0644, &e) < 0)
    esbx_error_free (&e);
}

/* ---- finding requests --------------------------------------------------- */

static int
seq_cmp (const void *a, const void *b)
{
  const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
  int64_t i = 0, k = 0;

  json_get_int (x, "seq", &i);
  json_get_int (y, "seq", &k);
  return i < k ? -1 : i > k;
}

static void
list_project (esbx_store_t *store, const char *project, bool all, struct strv *ids, json_t ***recs,
              size_t *n)
{
  _cleanup_free_ char *q = esbx_queue_rel (project);
  _cleanup_strv_ char **names = NULL;
  esbx_error_t e = NULL;

  if (!esbx_exists_at (store->rootfd, q))
    return;
  names = esbx_list_dir_at (store->rootfd, q, &e);
  esbx_error_free (&e);
  for (size_t i = 0; names && names[i]; i++)
    {
      json_t *rec;

      if (!id_valid (names[i]))
        continue;
      rec = esbx_request_read (store, project, names[i], &e);
      if (rec == NULL)
        {
          esbx_error_free (&e);
          continue;
        }
      if (!all && esbx_request_is_final (rec))
        {
          json_free (rec);
          continue;
        }
      *recs = xrealloc (*recs, (*n + 1) * sizeof **recs);
      (*recs)[(*n)++] = rec;
      if (ids)
        strv_push (ids, xstrdup (names[i]));
    }
}

json_t *
esbx_queue_list (esbx_store_t *store, const char *project, bool all, esbx_error_t *err)
{
  _cleanup_strv_ char **projects = NULL;
  json_t **recs = NULL, *arr;
  size_t n = 0;

  if (project)
    {
      if (esbx_project_check (store, project, err) < 0)
        return NULL;
      list_project (store, project, all, NULL, &recs, &n);
    }
  else
    {
      projects = esbx_project_list (store, err);
      if (projects == NULL)
        return NULL;
      for (size_t i = 0; projects[i]; i++)
        list_project (store, projects[i], all, NULL, &recs, &n);
    }
  esbx_sort (recs, n, sizeof *recs, seq_cmp);
  arr = json_new (JSON_ARRAY);
  for (size_t i = 0; i < n; i++)
    json_append (arr, recs[i]);
  free (recs);
  return arr;
}

json_t *
esbx_request_load (esbx_store_t *store, const char *id, char **project, esbx_error_t *err)
{
  _cleanup_strv_ char **projects = NULL;

  if (!id_valid (id))
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "invalid request id `%s`: expected r and a number", id ? id : ""),
           NULL;
  projects = esbx_project_list (store, err);
  if (projects == NULL)
    return NULL;
  for (size_t i = 0; projects[i]; i++)
    {
      _cleanup_free_ char *rel = esbx_request_file (projects[i], id, "request.json");

      if (!esbx_exists_at (store->rootfd, rel))
        continue;
      if (project)
        *project = xstrdup (projects[i]);
      return esbx_request_read (store, projects[i], id, err);
    }
  return esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0, "request `%s` does not exist", id), NULL;
}

bool
esbx_queue_uses_layer (esbx_store_t *store, const char *project, const char *layer)
{
  json_t **recs = NULL;
  size_t n = 0;
  bool used = false;

  list_project (store, project, false, NULL, &recs, &n);
  for (size_t i = 0; i < n; i++)
    {
      const char *c = json_get_string (recs[i], "candidate");
      if (c && strcmp (c, layer) == 0)
        used = true;
      json_free (recs[i]);
    }
  free (recs);
  return used;
}

/* ---- filing ------------------------------------------------------------- */

/* The next request id of the store: ROOT/queue.seq under ROOT/queue.lock.  */
static int
next_id (esbx_store_t *store, int64_t *seq, esbx_error_t *err)
{
  _cleanup_close_ int lock = esbx_lock_at (store->rootfd, SEQ_LOCK, true, true, err);
  _cleanup_free_ char *buf = NULL, *text = NULL;
  size_t len;
  int64_t v = 0;

  if (lock < 0)
    return -1;
  if (esbx_exists_at (store->rootfd, SEQ_FILE))
    {
      if (esbx_read_file_at (store->rootfd, SEQ_FILE, 64, &buf, &len, err) < 0)
        return -1;
      v = strtoll (buf, NULL, 10);
    }
  *seq = v + 1;
  text = xasprintf ("%lld\n", (long long)*seq);
  return esbx_write_file_atomic_at (store->rootfd, SEQ_FILE, text, strlen (text), 0644, err);
}

int
esbx_queue_file (struct esbx_publish *p, const char *by, bool discard, unsigned flags, char **id,
                 esbx_error_t *err)
{
  esbx_store_t *store = p->store;
  struct esbx_session *s = p->s;
  struct esbx_gate gate = { 0 };
  _cleanup_close_ int qlock = -1;
  _cleanup_free_ char *q = NULL, *tmp = NULL, *dest = NULL, *rid = NULL, *now = NULL;
  _cleanup_free_ char *from = NULL, *to = NULL;
  _cleanup_json_ json_t *rec = NULL, *waiting = NULL;
  _cleanup_close_ int tfd = -1;
  int64_t seq;
  size_t i;
  int ret = -1;

  *id = NULL;
  if (esbx_gate_load (store, s->project, &gate, err) < 0)
    return -1;
  qlock = esbx_queue_lock (store, s->project, err);
  if (qlock < 0)
    goto out;
  waiting = esbx_queue_list (store, s->project, false, err);
  if (waiting == NULL)
    goto out;
  for (i = 0; i < json_len (waiting); i++)
    {
      const json_t *w = json_at (waiting, i);
      const char *sid = json_get_string (w, "session_id");

      if (sid && strcmp (sid, s->id) == 0)
        {
          esbx_make_error_kind (err, ESBX_ERR_BUSY, 0,
                                "publish `%s`: the session already has request `%s` waiting "
                                "(%s); wait for it or withdraw it (`esbx queue cancel %s`)",
                                p->name, json_get_string (w, "id"), json_get_string (w, "state"),
                                json_get_string (w, "id"));
          goto out;
        }
    }
  if (next_id (store, &seq, err) < 0)
    goto out;
  rid = xasprintf ("r%lld", (long long)seq);
  q = esbx_queue_rel (s->project);
  tmp = xasprintf ("%s/.new-%s", q, rid);
  dest = xasprintf ("%s/%s", q, rid);
  if (mkdirat (store->rootfd, tmp, 0700) < 0)
    {
      esbx_make_error (err, errno, "mkdir `%s`", tmp);
      goto out;
    }
  /* The staged layer's tree is the request's: the session's changes as
     they were, whatever the session does next.  */
  from = xasprintf ("%s/diff", p->staged.rel);
  to = xasprintf ("%s/diff", tmp);
  if (renameat (store->rootfd, from, store->rootfd, to) < 0)
    {
      esbx_make_error (err, errno, "request `%s`: keep the changes", rid);
      goto fail;
    }
  now = esbx_rfc3339_now ();
  rec = json_new (JSON_OBJECT);
  json_set_string (rec, "id", rid);
  json_set_int (rec, "seq", seq);
  json_set_string (rec, "project", s->project);
  json_set_string (rec, "session", s->name);
  json_set_string (rec, "session_id", s->id);
  json_set_string (rec, "base", s->base);
  json_set (rec, "published", json_new_strings (s->published));
  json_set_string (rec, "message", p->message ? p->message : "");
  json_set (rec, "labels", esbx_labels_copy (s->labels));
  json_set (rec, "discard", json_new_bool (discard));
  json_set (rec, "include_ignored", json_new_bool ((flags & ESBX_CHANGES_INCLUDE_IGNORED) != 0));
  json_set (rec, "changes", esbx_changeset_json (&p->layer.changes));
  json_set_string (rec, "filed", now);
  json_set_string (rec, "filed_by", by);
  json_set_string (rec, "state", gate.approvals > 0 ? "review" : "queued");
  json_set_int (rec, "approvals_needed", gate.approvals);
  json_set (rec, "approvals", json_new (JSON_ARRAY));
  json_set (rec, "candidate", json_new (JSON_NULL));
  json_set (rec, "runs", json_new_int (0));
  json_set (rec, "checks", json_new (JSON_ARRAY));
  if (p->git)
    {
      /* A git project's layer is a commit by the session's author with
         its message, decided now: the candidate is made from a throwaway
         session that has none of its commits.  */
      struct esbx_git_identity gid;
      json_t *g;

      if (esbx_publish_git_identity (p, &gid, err) < 0)
        goto fail;
      g = json_new (JSON_OBJECT);
      json_set_string (g, "author", gid.author);
      json_set_string (g, "email", gid.email);
      json_set_string (g, "message", gid.message);
      json_set (g, "head", gid.head ? json_new_string (gid.head) : json_new (JSON_NULL));
      json_set (rec, "git", g);
      esbx_git_identity_clear (&gid);
    }
  {
    _cleanup_free_ char *text = NULL;
    size_t len;

    text = json_serialize (rec, true, &len);
    tfd = esbx_open_dir_at (store->rootfd, tmp, err);
    if (tfd < 0 || esbx_write_new_file_at (tfd, "request.json", text, len, 0644, err) < 0)
      goto fail;
  }
  if (renameat (store->rootfd, tmp, store->rootfd, dest) < 0)
    {
      esbx_make_error (err, errno, "request `%s`", rid);
      goto fail;
    }
  if (esbx_fsync_at (store->rootfd, q, err) < 0)
    goto out;
  {
    json_t *f = json_new (JSON_OBJECT);
    json_set_string (f, "session", s->name);
    json_set_string (f, "by", by);
    json_set_string (f, "state", json_get_string (rec, "state"));
    json_set_int (f, "changes", (int64_t)p->layer.changes.n);
    esbx_queue_event (store, s->project, rid, "queue.filed", f);
  }
  esbx_queue_audit (store, "file", by, s->project, rid, NULL);
  *id = steal_pointer (&rid);
  ret = 0;
  goto out;
fail:
  {
    esbx_error_t ignored = NULL;
    if (esbx_rm_rf_at (store->rootfd, tmp, &ignored) < 0)
      esbx_error_free (&ignored);
  }
out:
  esbx_gate_clear (&gate);
  return ret;
}

/* ---- review --------------------------------------------------------------- */

/* Load request ID with the queue lock held (*LOCK).  */
static json_t *
load_locked (esbx_store_t *store, const char *id, char **project, int *lock, esbx_error_t *err)
{
  _cleanup_json_ json_t *first = esbx_request_load (store, id, project, err);

  if (first == NULL)
    return NULL;
  *lock = esbx_queue_lock (store, *project, err);
  if (*lock < 0)
    return NULL;
  return esbx_request_read (store, *project, id, err);
}

static int
not_final (const json_t *rec, const char *id, const char *verb, esbx_error_t *err)
{
  if (!esbx_request_is_final (rec))
    return 0;
  return esbx_make_error_kind (err, ESBX_ERR_FAILED, 0, "%s `%s`: the request is %s already", verb,
                               id, json_get_string (rec, "state"));
}

int
esbx_request_approve (esbx_store_t *store, const char *id, const char *by, const char *message,
                      json_t **out, esbx_error_t *err)
{
  _cleanup_free_ char *project = NULL, *now = NULL;
  _cleanup_close_ int lock = -1;
  _cleanup_json_ json_t *rec = NULL;
  const char *filer, *state;
  json_t *approvals, *a;
  int64_t needed = 0;

  rec = load_locked (store, id, &project, &lock, err);
  if (rec == NULL)
    return -1;
  if (not_final (rec, id, "approve", err) < 0)
    return -1;
  if (message && !esbx_utf8_valid (message, strlen (message)))
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "approve `%s`: message is not UTF-8", id);
  filer = json_get_string (rec, "filed_by");
  state = json_get_string (rec, "state");
  /* A token never approves what it filed: an agent cannot pass its own
     review.  On the host, root is the operator.  */
  if (filer && esbx_has_prefix (by, "token:") && strcmp (filer, by) == 0)
    return esbx_make_error_kind (err, ESBX_ERR_FORBIDDEN, 0,
                                 "approve `%s`: %s filed the request and cannot approve it", id,
                                 by);
  if (state == NULL || strcmp (state, "review") != 0)
    return esbx_make_error_kind (err, ESBX_ERR_FAILED, 0,
                                 "approve `%s`: the request is %s, not waiting for review", id,
                                 state ? state : "unknown");
  approvals = json_get (rec, "approvals");
  if (approvals == NULL || approvals->type != JSON_ARRAY)
    {
      approvals = json_new (JSON_ARRAY);
      json_set (rec, "approvals", approvals);
    }
  for (size_t i = 0; i < json_len (approvals); i++)
    {
      const char *who = json_get_string (json_at (approvals, i), "by");
      if (who && strcmp (who, by) == 0)
        return esbx_make_error_kind (err, ESBX_ERR_EXISTS, 0,
                                     "approve `%s`: %s approved it already", id, by);
    }
  now = esbx_rfc3339_now ();
  a = json_new (JSON_OBJECT);
  json_set_string (a, "by", by);
  json_set_string (a, "at", now);
  if (message)
    json_set_string (a, "message", message);
  json_append (approvals, a);
  json_get_int (rec, "approvals_needed", &needed);
  if ((int64_t)json_len (approvals) >= needed)
    json_set_string (rec, "state", "queued");
  if (esbx_request_write (store, project, id, rec, err) < 0)
    return -1;
  {
    json_t *f = json_new (JSON_OBJECT);
    json_set_string (f, "by", by);
    json_set_string (f, "state", json_get_string (rec, "state"));
    esbx_queue_event (store, project, id, "queue.approved", f);
  }
  esbx_queue_audit (store, "approve", by, project, id, message);
  if (out)
    *out = steal_pointer (&rec);
  return 0;
}

/* End request ID as STATE ("rejected", "cancelled") by BY.  */
static int
end_request (esbx_store_t *store, const char *id, const char *state, const char *by,
             const char *message, json_t **out, esbx_error_t *err)
{
  _cleanup_free_ char *project = NULL, *now = NULL;
  _cleanup_close_ int lock = -1;
  _cleanup_json_ json_t *rec = NULL;
  bool reject = strcmp (state, "rejected") == 0;
  json_t *why;

  rec = load_locked (store, id, &project, &lock, err);
  if (rec == NULL)
    return -1;
  if (not_final (rec, id, reject ? "reject" : "cancel", err) < 0)
    return -1;
  if (message && !esbx_utf8_valid (message, strlen (message)))
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "reject `%s`: message is not UTF-8", id);
  now = esbx_rfc3339_now ();
  why = json_new (JSON_OBJECT);
  json_set_string (why, "kind", reject ? "review" : "cancelled");
  json_set_string (why, "by", by);
  json_set_string (why, "at", now);
  json_set_string (why, "message", message ? message : reject ? "rejected in review" : "withdrawn");
  json_set (rec, "rejected", why);
  json_set_string (rec, "state", state);
  if (esbx_request_write (store, project, id, rec, err) < 0)
    return -1;
  if (reject)
    esbx_queue_count (store, project, "rejected", "review", 1);
  {
    json_t *f = json_new (JSON_OBJECT);
    json_set_string (f, "by", by);
    json_set_string (f, "session", json_get_string (rec, "session"));
    if (message)
      json_set_string (f, "message", message);
    esbx_queue_event (store, project, id, reject ? "queue.rejected" : "queue.cancelled", f);
  }
  esbx_queue_audit (store, reject ? "reject" : "cancel", by, project, id, message);
  if (out)
    *out = steal_pointer (&rec);
  return 0;
}

int
esbx_request_reject (esbx_store_t *store, const char *id, const char *by, const char *message,
                     json_t **out, esbx_error_t *err)
{
  return end_request (store, id, "rejected", by, message, out, err);
}

int
esbx_request_cancel (esbx_store_t *store, const char *id, const char *by, esbx_error_t *err)
{
  return end_request (store, id, "cancelled", by, NULL, NULL, err);
}

/* ---- what a request holds ------------------------------------------------- */

int
esbx_request_open_log (esbx_store_t *store, const char *id, esbx_error_t *err)
{
  _cleanup_free_ char *project = NULL, *rel = NULL;
  _cleanup_json_ json_t *rec = esbx_request_load (store, id, &project, err);
  int fd;

  if (rec == NULL)
    return -1;
  rel = esbx_request_file (project, id, "check.log");
  if (!esbx_exists_at (store->rootfd, rel))
    return memfd_create ("esbx-no-log", MFD_CLOEXEC);
  fd = esbx_open_regular_at (store->rootfd, rel, err);
  return fd < 0 ? esbx_error_wrap (err, "request `%s`", id) : fd;
}

int
esbx_request_show (esbx_store_t *store, const char *id, const char *path, int outfd,
                   esbx_error_t *err)
{
  _cleanup_free_ char *project = NULL, *rel = NULL;
  _cleanup_json_ json_t *rec = esbx_request_load (store, id, &project, err);
  _cleanup_close_ int dfd = -1, pfd = -1, fd = -1;
  _cleanup_free_ char *base = NULL;
  struct stat st;

  if (rec == NULL)
    return -1;
  if (path == NULL || path[0] != '/' || path[1] == '\0')
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "request `%s`: expected an absolute path, e.g. /src/main.c", id);
  rel = esbx_request_file (project, id, "diff");
  dfd = esbx_open_dir_at (store->rootfd, rel, err);
  if (dfd < 0)
    return esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0,
                                 "request `%s`: its changes are gone (it is %s)", id,
                                 json_get_string (rec, "state"));
  pfd = esbx_open_parent_beneath (dfd, path + 1, &base, err);
  if (pfd < 0 || fstatat (pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0 || esbx_is_whiteout (&st))
    {
      esbx_error_free (err);
      return esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0,
                                   "request `%s` does not change `%s` into a file", id, path);
    }
  if (S_ISLNK (st.st_mode))
    {
      char buf[4097];
      ssize_t l = readlinkat (pfd, base, buf, sizeof buf - 1);
      if (l < 0)
        return esbx_make_error (err, errno, "readlink `%s`", path);
      return esbx_write_all (outfd, buf, (size_t)l) < 0 ? esbx_make_error (err, errno, "write") : 0;
    }
  if (!S_ISREG (st.st_mode))
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "request `%s`: `%s` is %s", id, path,
                                 esbx_mode_type_name (st.st_mode));
  fd = esbx_open_regular_at (pfd, base, err);
  if (fd < 0)
    return -1;
  {
    char buf[65536];
    ssize_t n;
    while ((n = TEMP_FAILURE_RETRY (read (fd, buf, sizeof buf))) > 0)
      if (esbx_write_all (outfd, buf, (size_t)n) < 0)
        return esbx_make_error (err, errno, "write");
    if (n < 0)
      return esbx_make_error (err, errno, "read `%s`", path);
  }
  return 0;
}

/* Append what BUF holds to request ID's check log, up to the log's
   limit; the last one to go beyond it writes the note that it did.  */
void
esbx_request_log (esbx_store_t *store, const char *project, const char *id, const char *buf,
                  size_t len)
{
  _cleanup_free_ char *rel = esbx_request_file (project, id, "check.log");
  _cleanup_close_ int fd = -1;
  struct stat st;

  fd = openat (store->rootfd, rel, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0 || fstat (fd, &st) < 0)
    return;
  if ((size_t)st.st_size >= LOG_LIMIT)
    return;
  if ((size_t)st.st_size + len > LOG_LIMIT)
    {
      static const char note[] = "\n[esbx: the log is cut here: 4 MiB]\n";
      (void)esbx_write_all (fd, buf, LOG_LIMIT - (size_t)st.st_size);
      (void)esbx_write_all (fd, note, sizeof note - 1);
      return;
    }
  (void)esbx_write_all (fd, buf, len);
}
