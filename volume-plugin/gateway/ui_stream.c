/* The dashboard's live updates (routes_ui.h): server-sent events made of
   the events the store already writes, the sessions' events.jsonl and the
   queues' events.jsonl, read from where they ended when the stream began,
   of the sessions and projects the token sees (looked at again every
   RESCAN_MS: new sessions, new queues).  A "tick" every TICK_MS tells the
   page to refresh its numbers, and keeps a dead connection from lasting:
   a write to it fails.  A stream ends after STREAM_MAX_MS; the page
   connects again.  */
#include "routes_ui.h"
#include "auth.h"
#include "fs.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define POLL_MS       300
#define TICK_MS       2000
#define RESCAN_MS     2000
#define STREAM_MAX_MS (10 * 60 * 1000)
#define LINE_MAX_SENT (256u * 1024) /* longer event lines are left out */

struct source
{
  char *rel;     /* the events file, under the store */
  char *session; /* its session, or NULL for a queue's */
  char *project;
  off_t offset;
};

struct ui_stream
{
  esbx_store_t *store;
  struct esbx_token token; /* what the token sees: a copy, the request's may go first */
  struct source *v;
  size_t n;
  int64_t started, last_tick, last_scan;
  char *pending;
  size_t len, pos;
  bool first;
};

static int64_t
now_ms (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool
known (struct ui_stream *u, const char *rel)
{
  for (size_t i = 0; i < u->n; i++)
    if (strcmp (u->v[i].rel, rel) == 0)
      return true;
  return false;
}

static void
add (struct ui_stream *u, char *rel, const char *session, const char *project)
{
  struct stat st;

  if (known (u, rel))
    {
      free (rel);
      return;
    }
  u->v = xrealloc (u->v, (u->n + 1) * sizeof *u->v);
  u->v[u->n].rel = rel;
  u->v[u->n].session = session ? xstrdup (session) : NULL;
  u->v[u->n].project = xstrdup (project);
  /* At the start what is there is history; a source found later is new:
     all of it is news.  */
  u->v[u->n].offset = u->first && fstatat (u->store->rootfd, rel, &st, 0) == 0 ? st.st_size : 0;
  u->n++;
}

static void
scan (struct ui_stream *u)
{
  _cleanup_sessions_ struct esbx_sessions it = { 0 };
  _cleanup_strv_ char **projects = NULL;
  struct esbx_session *s;
  esbx_error_t e = NULL;

  if (esbx_sessions_open (u->store, NULL, &it, &e) == 0)
    while ((s = esbx_sessions_next (&it)))
      if (esbx_auth_sees_session (u->store, &u->token, s))
        add (u, esbx_session_file (s->name, "events.jsonl"), s->name, s->project);
  esbx_error_free (&e);
  projects = esbx_project_list (u->store, &e);
  esbx_error_free (&e);
  for (size_t i = 0; projects && projects[i]; i++)
    if (esbx_auth_sees_project (u->store, &u->token, projects[i]))
      {
        _cleanup_free_ char *q = esbx_queue_rel (projects[i]);
        add (u, xasprintf ("%s/events.jsonl", q), NULL, projects[i]);
      }
  u->first = false;
}

static void
emit (struct ui_stream *u, const char *event, const char *data)
{
  _cleanup_free_ char *frame = xasprintf ("event: %s\ndata: %s\n\n", event, data);
  size_t l = strlen (frame);

  u->pending = xrealloc (u->pending, u->len + l + 1);
  memcpy (u->pending + u->len, frame, l + 1);
  u->len += l;
}

/* The complete lines of SRC past its offset, each a JSON event.  */
static void
read_source (struct ui_stream *u, struct source *src)
{
  _cleanup_close_ int fd = -1;
  char buf[65536];
  _cleanup_free_ char *line = NULL;
  size_t llen = 0;
  ssize_t n;
  off_t at = src->offset;

  fd = openat (u->store->rootfd, src->rel, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0)
    return;
  while ((n = pread (fd, buf, sizeof buf, at)) > 0)
    {
      for (ssize_t i = 0; i < n; i++)
        {
          if (buf[i] != '\n')
            {
              if (llen < LINE_MAX_SENT)
                {
                  line = xrealloc (line, llen + 2);
                  line[llen] = buf[i];
                }
              llen++;
              continue;
            }
          src->offset = at + i + 1;
          if (llen > 0 && llen < LINE_MAX_SENT)
            {
              _cleanup_json_ json_t *ev = NULL;
              esbx_error_t e = NULL;

              line[llen] = '\0';
              ev = json_parse (line, llen, &e);
              esbx_error_free (&e);
              if (ev && ev->type == JSON_OBJECT)
                {
                  _cleanup_free_ char *doc = NULL;

                  if (src->session)
                    json_set_string (ev, "session", src->session);
                  json_set_string (ev, "project", src->project);
                  doc = json_serialize (ev, false, NULL);
                  emit (u, src->session ? "session" : "queue", doc);
                }
            }
          llen = 0;
        }
      at += n;
    }
}

static ssize_t
stream_read (void *cls, uint64_t pos, char *buf, size_t max)
{
  struct ui_stream *u = cls;
  size_t n;

  (void)pos;
  while (u->pos == u->len)
    {
      int64_t now = now_ms ();
      struct timespec ts = { 0, POLL_MS * 1000000L };

      free (u->pending);
      u->pending = NULL;
      u->len = u->pos = 0;
      if (now - u->started > STREAM_MAX_MS)
        return MHD_CONTENT_READER_END_OF_STREAM;
      if (now - u->last_scan >= RESCAN_MS)
        {
          scan (u);
          u->last_scan = now;
        }
      for (size_t i = 0; i < u->n; i++)
        read_source (u, &u->v[i]);
      if (now - u->last_tick >= TICK_MS)
        {
          _cleanup_free_ char *t = esbx_rfc3339_now ();
          _cleanup_free_ char *d = xasprintf ("{\"time\":\"%s\"}", t);
          emit (u, "tick", d);
          u->last_tick = now;
        }
      if (u->len)
        break;
      nanosleep (&ts, NULL);
    }
  n = u->len - u->pos < max ? u->len - u->pos : max;
  memcpy (buf, u->pending + u->pos, n);
  u->pos += n;
  return (ssize_t)n;
}

static void
stream_free (void *cls)
{
  struct ui_stream *u = cls;

  for (size_t i = 0; i < u->n; i++)
    {
      free (u->v[i].rel);
      free (u->v[i].session);
      free (u->v[i].project);
    }
  free (u->v);
  free (u->pending);
  free (u->token.id);
  free (u->token.project);
  free (u->token.project_id);
  free (u->token.session);
  free (u->token.session_id);
  free (u);
}

void
esbx_gateway_ui_stream (struct esbx_gateway_ctx *ctx)
{
  struct ui_stream *u = xmalloc0 (sizeof *u);
  const struct esbx_token *t = ctx->token;

  u->store = ctx->store;
  u->token.id = xstrdup (t->id);
  u->token.scopes = t->scopes;
  u->token.project = t->project ? xstrdup (t->project) : NULL;
  u->token.project_id = t->project_id ? xstrdup (t->project_id) : NULL;
  u->token.session = t->session ? xstrdup (t->session) : NULL;
  u->token.session_id = t->session_id ? xstrdup (t->session_id) : NULL;
  u->started = now_ms ();
  u->first = true;
  scan (u);
  u->last_scan = u->started;
  emit (u, "hello", "{}");
  ctx->stream
      = MHD_create_response_from_callback (MHD_SIZE_UNKNOWN, 16384, stream_read, u, stream_free);
  if (ctx->stream == NULL)
    {
      stream_free (u);
      return esbx_gateway_reply_fail (ctx, ESBX_ERR_FAILED, 0, "cannot start the event stream");
    }
  MHD_add_response_header (ctx->stream, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
  MHD_add_response_header (ctx->stream, "Cache-Control", "no-store");
  MHD_add_response_header (ctx->stream, "X-Content-Type-Options", "nosniff");
  ctx->status = MHD_HTTP_OK;
}
