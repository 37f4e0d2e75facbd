/* liblayerstore: watching the heads of every project in etcd (what esbxd
 * prefetches by; docs/SCALE-OUT.md, "esbxd").  The JSON gateway's
 * POST /v3/watch streams one JSON object per watch response,
 *   {"result": {"header": {"revision": "N"}, "created": true}}
 *   {"result": {"header": ..., "events": [{"type": "DELETE"?, "kv": {"key",
 *     "mod_revision", ...}}]}}
 * or {"error": {...}}; a watch asked to start at a compacted revision is
 * answered {"result": {"canceled": true, "compact_revision": "N"}}.  */
#include "remote.h"
#include "fs.h"
#include "http_client.h"
#include "text.h"
#include "utils.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HEADS_PREFIX "esbx/projects/"
/* The end of the prefix's range: its last byte plus one ('/' + 1).  */
#define HEADS_END   "esbx/projects0"
#define HEAD_SUFFIX "/head"
/* Held (OFD write lock) while a watch is connected; its content is the
   etcd URL watched.  */
#define WATCH_MARK "remote.watch"
/* One watch response is small (keys, revisions; values of heads): more
   than this without the end of an object is not etcd.  */
#define MAX_OBJECT (16u * 1024 * 1024)

struct watch
{
  esbx_store_t *store;
  const struct esbx_remote *rm;
  int mark; /* ROOT/remote.watch, locked while connected; -1 */
  const struct esbx_remote_watch_ops *ops;
  int64_t *next;
  bool resumed; /* asked with a start revision */
  /* The bytes of the object being received and the splitter's state.  */
  char *buf;
  size_t len;
  int depth;
  bool in_string, escaped;
  esbx_error_t error; /* why the stream was ended here */
};

/* PROJECT of the head key KEY[0..LEN), or NULL.  */
static char *
project_of_key (const char *key, size_t len)
{
  size_t plen = strlen (HEADS_PREFIX), slen = strlen (HEAD_SUFFIX);
  char *name;

  if (len <= plen + slen || memcmp (key, HEADS_PREFIX, plen) != 0
      || memcmp (key + len - slen, HEAD_SUFFIX, slen) != 0)
    return NULL;
  name = xstrndup (key + plen, len - plen - slen);
  if (!esbx_name_valid (name))
    {
      free (name);
      return NULL;
    }
  return name;
}

static bool
fail (struct watch *w, const char *what)
{
  _cleanup_free_ char *why = esbx_escape_line (what);

  if (w->error == NULL)
    esbx_make_error (&w->error, 0, "etcd `%s`: watch: %s", w->rm->etcd, why);
  return false;
}

/* Connected: creates on this store may trust its stacks.  Best effort
   (another esbxd watching the same store holds it already).  */
static void
mark (struct watch *w)
{
  size_t len = strlen (w->rm->etcd);
  int fd;

  if (w->mark >= 0)
    return;
  fd = openat (w->store->rootfd, WATCH_MARK, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0)
    return;
  if (esbx_lock_fd (fd, true, false, WATCH_MARK, NULL) < 0 || ftruncate (fd, 0) < 0
      || pwrite (fd, w->rm->etcd, len, 0) != (ssize_t)len)
    {
      close (fd);
      return;
    }
  w->mark = fd;
}

/* Not connected, or behind: creates ask etcd again (closing unlocks it;
   the content is not trusted without the lock).  */
static void
unmark (struct watch *w)
{
  if (w->mark < 0)
    return;
  close (w->mark);
  w->mark = -1;
}

bool
esbx_remote_watched (esbx_store_t *store)
{
  struct esbx_remote rm = { 0 };
  esbx_error_t ignored = NULL;
  _cleanup_close_ int fd = -1;
  char buf[4096];
  ssize_t n;
  bool watched;

  fd = openat (store->rootfd, WATCH_MARK, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 || !esbx_lock_is_held (fd))
    return false;
  n = pread (fd, buf, sizeof buf - 1, 0);
  if (n <= 0)
    return false;
  buf[n] = '\0';
  if (esbx_remote_load (store, &rm, &ignored) < 0)
    {
      esbx_error_free (&ignored);
      return false;
    }
  /* The etcd this process would ask: esbxd may watch another one.  */
  watched = strcmp (buf, rm.etcd) == 0;
  esbx_remote_free (&rm);
  return watched;
}

static bool
on_events (struct watch *w, const json_t *events)
{
  const json_t *ev;
  size_t i;

  json_array_foreach (events, i, ev)
    {
      const json_t *kv = json_get (ev, "kv");
      const char *type = json_get_string (ev, "type");
      const char *key = json_get_string (kv, "key");
      _cleanup_free_ char *raw = NULL, *project = NULL;
      int64_t rev = 0;
      size_t len;

      if (key == NULL || !esbx_etcd_int64 (kv, "mod_revision", &rev)
          || esbx_etcd_unb64 (key, &raw, &len) < 0)
        return fail (w, "malformed event");
      /* A response may hold any number of events: stopping is asked
         about for each.  */
      if (w->ops->stop && w->ops->stop (w->ops->arg))
        return false;
      project = project_of_key (raw, len);
      /* Only projects shared here: the others cost nothing, and do not
         drop the mark (an etcd naming many of them would keep every
         create of this store asking etcd).  */
      if (project && w->ops->head && !(type && strcmp (type, "DELETE") == 0)
          && esbx_project_is_shared (w->store, project))
        {
          /* Behind this head until it is synced: creates meanwhile ask
             etcd (and wait on the project lock the sync holds).  */
          unmark (w);
          if (!w->ops->head (project, w->ops->arg))
            return fail (w, "a head could not be synced"); /* resumed at this event */
          mark (w);
        }
      if (rev >= *w->next)
        *w->next = rev + 1;
    }
  return true;
}

static bool
on_object (struct watch *w, const char *text, size_t len)
{
  _cleanup_json_ json_t *j = NULL;
  esbx_error_t e = NULL;
  const json_t *result, *events;
  int64_t rev = 0, compacted = 0;

  j = json_parse (text, len, &e);
  if (j == NULL)
    {
      fail (w, e->msg);
      esbx_error_free (&e);
      return false;
    }
  result = json_get (j, "result");
  if (result == NULL)
    {
      const json_t *error = json_get (j, "error");
      const char *msg = json_get_string (error ? error : j, "message");
      return fail (w, msg ? msg : "unexpected answer");
    }
  if (json_get_bool (result, "canceled", false))
    {
      /* Asked from a compacted revision: start again from now.  */
      if (esbx_etcd_int64 (result, "compact_revision", &compacted) && compacted > 0)
        *w->next = 0;
      return fail (w, compacted > 0 ? "canceled: its start revision was compacted" : "canceled");
    }
  if (json_get_bool (result, "created", false))
    {
      if (!w->resumed && esbx_etcd_int64 (json_get (result, "header"), "revision", &rev))
        *w->next = rev + 1;
      if (w->ops->created && !w->ops->created (w->rm->etcd, w->ops->arg))
        {
          /* Not every project synced: from now again, next time.  */
          *w->next = 0;
          return fail (w, "the projects could not be synced");
        }
      mark (w);
    }
  events = json_get (result, "events");
  if (events && events->type == JSON_ARRAY)
    return on_events (w, events);
  return true;
}

/* The stream cut into JSON objects by their braces (strings and escapes
   followed), each handled as soon as it is complete.  */
static bool
on_data (const char *data, size_t n, void *arg)
{
  struct watch *w = arg;
  size_t i;

  for (i = 0; i < n; i++)
    {
      char c = data[i];

      if (w->depth == 0 && c != '{')
        continue; /* newlines between objects */
      if (w->len >= MAX_OBJECT)
        return fail (w, "an answer larger than 16 MiB");
      if (w->len % 4096 == 0)
        w->buf = xrealloc (w->buf, w->len + 4096);
      w->buf[w->len++] = c;
      if (w->in_string)
        {
          if (w->escaped)
            w->escaped = false;
          else if (c == '\\')
            w->escaped = true;
          else if (c == '"')
            w->in_string = false;
          continue;
        }
      if (c == '"')
        w->in_string = true;
      else if (c == '{' || c == '[')
        w->depth++;
      else if ((c == '}' || c == ']') && --w->depth == 0)
        {
          bool ok = on_object (w, w->buf, w->len);
          w->len = 0;
          if (!ok || (w->ops->stop && w->ops->stop (w->ops->arg)))
            return false;
        }
    }
  return true;
}

static bool
should_stop (void *arg)
{
  const struct watch *w = arg;

  return w->ops->stop && w->ops->stop (w->ops->arg);
}

int
esbx_remote_watch (esbx_store_t *store, int64_t *next, const struct esbx_remote_watch_ops *ops,
                   esbx_error_t *err)
{
  struct esbx_remote rm = { 0 };
  struct watch w = { .store = store, .ops = ops, .next = next, .resumed = *next > 0, .mark = -1 };
  _cleanup_json_ json_t *body = json_new (JSON_OBJECT);
  _cleanup_free_ char *key = esbx_etcd_b64 (HEADS_PREFIX, strlen (HEADS_PREFIX));
  _cleanup_free_ char *end = esbx_etcd_b64 (HEADS_END, strlen (HEADS_END));
  _cleanup_free_ char *text = NULL, *url = NULL, *rev = NULL;
  struct esbx_http_request rq;
  struct esbx_http_response rs;
  json_t *create = json_new (JSON_OBJECT);
  size_t len;
  int r, ret = -1;

  if (esbx_remote_load (store, &rm, err) < 0)
    return -1;
  w.rm = &rm;
  json_set_string (create, "key", key);
  json_set_string (create, "range_end", end);
  if (*next > 0)
    {
      rev = xasprintf ("%lld", (long long)*next);
      json_set_string (create, "start_revision", rev);
    }
  json_set (body, "create_request", create);
  text = json_serialize (body, false, &len);
  url = xasprintf ("%s/v3/watch", rm.etcd);
  esbx_http_request_init (&rq, "POST", url);
  rq.content_type = "application/json";
  rq.body = text;
  rq.body_len = len;
  rq.auth = &rm.etcd_auth;
  rq.on_data = on_data;
  rq.abort = should_stop;
  rq.arg = &w;
  r = esbx_http_do (&rq, &rs, err);
  unmark (&w);
  if (w.error)
    {
      /* Ended here: the answer was not a watch's.  */
      if (r < 0)
        esbx_error_free (err);
      *err = w.error;
      w.error = NULL;
    }
  else if (should_stop (&w))
    {
      esbx_error_free (err);
      ret = 0;
    }
  else if (r < 0)
    {
      esbx_etcd_hint (&rm, err);
      esbx_error_wrap (err, "etcd `%s`: watch", rm.etcd);
    }
  else if (rs.status != 200)
    esbx_make_error (err, 0, "etcd `%s`: watch: HTTP %ld", rm.etcd, rs.status);
  else
    esbx_make_error (err, 0, "etcd `%s`: the watch ended", rm.etcd);
  if (r == 0)
    esbx_http_response_free (&rs);
  free (w.buf);
  esbx_remote_free (&rm);
  return ret;
}
