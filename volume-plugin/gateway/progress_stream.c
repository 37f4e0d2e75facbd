/* esbxd: the progress stream of a long route (progress_stream.h).  The
   reports travel through a pipe whose write end never blocks: a client
   that reads slowly misses reports, and the work never waits for it.  The
   end of the work is told by a flag and an eventfd rather than by the end
   of the pipe, which a child forked meanwhile by another request may hold
   open for a while.  */
#include "progress_stream.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include "thread.h"

#include <pthread.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define PROGRESS_BLOCK (64u * 1024)

struct work
{
  esbx_gateway_work_fn fn;
  void *data;
  void (*data_free) (void *);
  struct esbx_thread thread;
  int rd, wr; /* the pipe of report lines, both ends non-blocking */
  int done;   /* eventfd: the work has finished */
  bool finished;
  struct esbx_progress sink;

  /* What the work left, read once it is joined.  */
  json_t *result;
  esbx_error_t err;
  int payload;

  /* The last line, not yet handed to MHD.  */
  char *out;
  size_t len, pos;
  bool ended;
};

bool
esbx_gateway_wants_progress (struct esbx_gateway_ctx *ctx)
{
  return esbx_gateway_query_flag (ctx->conn, "progress");
}

static void
report (const struct esbx_progress *p, void *data)
{
  struct work *w = data;
  _cleanup_json_ json_t *o = json_new (JSON_OBJECT);
  _cleanup_free_ char *line = NULL;
  size_t n;
  ssize_t r;

  json_set_string (o, "phase", p->phase);
  json_set_string (o, "unit", p->unit ? p->unit : "");
  json_set_int (o, "done", (int64_t)p->done);
  json_set_int (o, "total", (int64_t)p->total);
  json_set_int (o, "bytes", (int64_t)p->bytes);
  if (p->in_total)
    {
      json_set_int (o, "in", (int64_t)p->in);
      json_set_int (o, "in_total", (int64_t)p->in_total);
    }
  json_set_int (o, "elapsed_ms", (int64_t)(p->elapsed_ns / 1000000));
  if (p->final)
    json_set (o, "final", json_new_bool (true));
  line = json_serialize (o, false, &n);
  line = xrealloc (line, n + 1);
  line[n++] = '\n';
  /* A line is far shorter than PIPE_BUF: written whole or not at all.  */
  r = write (w->wr, line, n);
  (void)r;
}

static void *
run (void *arg)
{
  struct work *w = arg;
  uint64_t one = 1;
  ssize_t r;

  esbx_progress_set (&w->sink);
  w->result = w->fn (w->data, &w->payload, &w->err);
  esbx_progress_set (NULL);
  if (w->result == NULL && w->err == NULL)
    esbx_make_error (&w->err, 0, "the work failed");
  /* Every report is in the pipe before the flag is set.  */
  __atomic_store_n (&w->finished, true, __ATOMIC_RELEASE);
  r = write (w->done, &one, sizeof one);
  (void)r;
  return NULL;
}

static void
work_free (struct work *w)
{
  esbx_thread_join (&w->thread);
  if (w->rd >= 0)
    close (w->rd);
  if (w->wr >= 0)
    close (w->wr);
  if (w->done >= 0)
    close (w->done);
  if (w->payload >= 0)
    close (w->payload);
  json_free (w->result);
  esbx_error_free (&w->err);
  if (w->data_free)
    w->data_free (w->data);
  free (w->out);
  free (w);
}

/* The next report bytes, waiting for them; 0 once the work has finished
   and every report is read.  */
static ssize_t
pull (struct work *w, char *buf, size_t max)
{
  for (;;)
    {
      bool finished = __atomic_load_n (&w->finished, __ATOMIC_ACQUIRE);
      struct pollfd p[2]
          = { { .fd = w->rd, .events = POLLIN }, { .fd = w->done, .events = POLLIN } };
      ssize_t n = TEMP_FAILURE_RETRY (read (w->rd, buf, max));

      if (n > 0)
        return n;
      if (n == 0 || errno != EAGAIN || finished)
        return 0;
      if (poll (p, 2, -1) < 0 && errno != EINTR)
        return 0;
    }
}

static void
join (struct work *w)
{
  esbx_thread_join (&w->thread);
}

/* The line that ends the reports: the result, or the error.  */
static void
end_line (struct work *w)
{
  _cleanup_json_ json_t *o = json_new (JSON_OBJECT);
  size_t n;

  join (w);
  if (w->result)
    json_set (o, "result", steal_pointer (&w->result));
  else
    {
      json_set_error (o, w->err);
    }
  free (w->out);
  w->out = json_serialize (o, false, &n);
  w->out = xrealloc (w->out, n + 1);
  w->out[n++] = '\n';
  w->len = n;
  w->pos = 0;
  w->ended = true;
}

static ssize_t
stream_read (void *cls, uint64_t pos, char *buf, size_t max)
{
  struct work *w = cls;
  ssize_t n;

  (void)pos;
  if (w->pos == w->len && !w->ended)
    {
      n = pull (w, buf, max);
      if (n > 0)
        return n;
      end_line (w);
    }
  if (w->pos < w->len)
    {
      n = (ssize_t)(w->len - w->pos < max ? w->len - w->pos : max);
      memcpy (buf, w->out + w->pos, (size_t)n);
      w->pos += (size_t)n;
      return n;
    }
  if (w->payload < 0)
    return MHD_CONTENT_READER_END_OF_STREAM;
  n = TEMP_FAILURE_RETRY (read (w->payload, buf, max));
  if (n > 0)
    return n;
  return n == 0 ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
}

static void
stream_free (void *cls)
{
  work_free (cls);
}

void
esbx_gateway_reply_progress (struct esbx_gateway_ctx *ctx, esbx_gateway_work_fn fn, void *data,
                             void (*data_free) (void *))
{
  struct work *w = xmalloc0 (sizeof *w);
  char first[4096];
  ssize_t n;
  int p[2];

  w->fn = fn;
  w->data = data;
  w->data_free = data_free;
  w->rd = w->wr = w->done = w->payload = -1;
  w->sink.report = report;
  w->sink.data = w;
  if (pipe2 (p, O_CLOEXEC | O_NONBLOCK) < 0)
    goto fail;
  w->rd = p[0];
  w->wr = p[1];
  w->done = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (w->done < 0 || esbx_thread_start (&w->thread, run, w, "progress", &w->err) < 0)
    goto fail;

  /* Until the first report the HTTP status can still tell a failure.  */
  n = pull (w, first, sizeof first);
  if (n == 0)
    {
      join (w);
      if (w->result == NULL)
        {
          esbx_gateway_reply_err (ctx, &w->err);
          return work_free (w);
        }
    }
  w->out = xmalloc ((size_t)n + 1);
  memcpy (w->out, first, (size_t)n);
  w->len = (size_t)n;

  ctx->stream = MHD_create_response_from_callback (MHD_SIZE_UNKNOWN, PROGRESS_BLOCK, stream_read, w,
                                                   stream_free);
  if (ctx->stream == NULL)
    {
      esbx_gateway_reply_fail (ctx, ESBX_ERR_FAILED, errno, "cannot start the progress stream");
      return work_free (w);
    }
  MHD_add_response_header (ctx->stream, MHD_HTTP_HEADER_CONTENT_TYPE, ESBX_GATEWAY_PROGRESS_TYPE);
  ctx->status = MHD_HTTP_OK;
  return;
fail:
  if (w->err)
    esbx_gateway_reply_err (ctx, &w->err);
  else
    esbx_gateway_reply_fail (ctx, ESBX_ERR_FAILED, errno, "progress stream: %s", strerror (errno));
  work_free (w);
}
