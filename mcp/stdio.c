/* The stdio transport: one message a line on stdin, answers and
   notifications one a line on stdout (JSON as yajl writes it has no raw
   newline).  The reading thread answers what is quick itself (initialize,
   ping, tools/list, notifications: a cancellation is never stuck behind a
   running call) and queues tool calls for up to MAX_WORKERS threads.  A
   line longer than ESBX_MCP_MAX_MESSAGE is read to its end and refused;
   the calls queued are bounded in count and bytes, past which a call is
   refused as busy: the server keeps serving whatever a client sends.  The
   end of stdin is the client's way to stop the server: the commands still
   running are ended, the calls read answer, and it exits; SIGTERM or
   SIGINT drops what is queued too.  */
#include "mcp_internal.h"
#include "fs.h"
#include "log.h"
#include "thread.h"
#include "utils.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#define MAX_WORKERS 32
#define QUEUE_BYTES (64u << 20)
#define READ_CHUNK  (64u * 1024)

struct job
{
  struct job *next;
  json_t *msg;
  size_t bytes;
};

struct stdio
{
  struct esbx_mcp_server *srv;
  int out;
  pthread_mutex_t write_lock;
  bool broken; /* OUT failed: nothing more can be said */

  pthread_mutex_t lock; /* the queue and the workers */
  pthread_cond_t cond;
  struct job *head, *tail;
  size_t queued, bytes, idle;
  bool closing;
  bool stop; /* signalled: what is queued is dropped */
  struct esbx_thread workers[MAX_WORKERS];
  size_t n_workers;
};

static void
send_line (struct stdio *io, json_t *msg)
{
  _cleanup_free_ char *line = NULL;
  size_t len;

  if (msg == NULL)
    return;
  line = json_serialize (msg, false, &len);
  json_free (msg);
  line = xrealloc (line, len + 1);
  line[len] = '\n';
  pthread_mutex_lock (&io->write_lock);
  if (!io->broken && esbx_write_all (io->out, line, len + 1) < 0)
    {
      io->broken = true;
      esbx_warn ("mcp: stdout: %s: cancelling the calls", strerror (errno));
      esbx_mcp_cancel_all (io->srv);
    }
  pthread_mutex_unlock (&io->write_lock);
}

static void
notify (void *data, json_t *msg)
{
  send_line (data, msg);
}

static void *
worker (void *data)
{
  struct stdio *io = data;
  struct esbx_mcp_io mio = { .notify = notify, .data = io };

  pthread_mutex_lock (&io->lock);
  for (;;)
    {
      struct job *j;

      while (io->head == NULL && !io->closing)
        {
          io->idle++;
          pthread_cond_wait (&io->cond, &io->lock);
          io->idle--;
        }
      if (io->head == NULL)
        break;
      j = io->head;
      io->head = j->next;
      if (io->head == NULL)
        io->tail = NULL;
      pthread_mutex_unlock (&io->lock);
      if (!io->stop)
        send_line (io, esbx_mcp_handle (io->srv, j->msg, &mio));
      json_free (j->msg);
      pthread_mutex_lock (&io->lock);
      io->queued--;
      io->bytes -= j->bytes;
      free (j);
    }
  pthread_mutex_unlock (&io->lock);
  return NULL;
}

/* Queue MSG (owned) for a worker; a refusal is answered at once.  */
static void
enqueue (struct stdio *io, json_t *msg, size_t bytes)
{
  struct job *j;

  pthread_mutex_lock (&io->lock);
  if (io->queued >= ESBX_MCP_MAX_CALLS || io->bytes + bytes > QUEUE_BYTES)
    {
      size_t n = io->queued;

      pthread_mutex_unlock (&io->lock);
      send_line (io, esbx_mcp_error (json_get (msg, "id"), ESBX_MCP_BUSY,
                                     "busy: %zu calls are queued or running; try again later", n));
      json_free (msg);
      return;
    }
  j = xmalloc0 (sizeof *j);
  j->msg = msg;
  j->bytes = bytes;
  if (io->tail)
    io->tail->next = j;
  else
    io->head = j;
  io->tail = j;
  io->queued++;
  io->bytes += bytes;
  if (io->idle == 0 && io->n_workers < MAX_WORKERS)
    {
      esbx_error_t err = NULL;

      /* Without a new worker the ones there take the call in turn.  */
      if (esbx_thread_start (&io->workers[io->n_workers], worker, io, "mcp worker", &err) == 0)
        io->n_workers++;
      else if (io->n_workers == 0)
        {
          io->head = io->tail = NULL;
          io->queued--;
          io->bytes -= bytes;
          pthread_mutex_unlock (&io->lock);
          send_line (
              io, esbx_mcp_error (json_get (msg, "id"), ESBX_MCP_INTERNAL_ERROR, "%s", err->msg));
          esbx_error_free (&err);
          json_free (msg);
          free (j);
          return;
        }
      esbx_error_free (&err);
    }
  pthread_cond_signal (&io->cond);
  pthread_mutex_unlock (&io->lock);
}

static void
handle_line (struct stdio *io, const char *line, size_t len)
{
  static const struct esbx_mcp_io none = { 0 };
  esbx_error_t err = NULL;
  const char *method;
  json_t *msg;

  while (len && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t'))
    len--;
  if (len == 0)
    return;
  msg = json_parse (line, len, &err);
  if (msg == NULL)
    {
      send_line (io, esbx_mcp_error (NULL, ESBX_MCP_PARSE_ERROR, "parse error: %s", err->msg));
      esbx_error_free (&err);
      return;
    }
  method = json_get_string (msg, "method");
  if (method && strcmp (method, "tools/call") == 0 && json_get (msg, "id"))
    return enqueue (io, msg, len);
  send_line (io, esbx_mcp_handle (io->srv, msg, &none));
  json_free (msg);
}

static int
block_signals (sigset_t *set)
{
  sigemptyset (set);
  sigaddset (set, SIGTERM);
  sigaddset (set, SIGINT);
  sigaddset (set, SIGHUP);
  if (pthread_sigmask (SIG_BLOCK, set, NULL) != 0)
    return -1;
  return signalfd (-1, set, SFD_CLOEXEC | SFD_NONBLOCK);
}

int
esbx_mcp_serve_stdio (struct esbx_mcp_server *s, int in, int out, esbx_error_t *err)
{
  struct stdio io = { .srv = s, .out = out };
  _cleanup_free_ char *buf = NULL;
  _cleanup_close_ int sfd = -1;
  size_t len = 0, cap = 0, i, skipped = 0;
  bool discarding = false, eof = false;
  sigset_t set;
  int ret = 0;

  pthread_mutex_init (&io.write_lock, NULL);
  pthread_mutex_init (&io.lock, NULL);
  pthread_cond_init (&io.cond, NULL);
  sfd = block_signals (&set);
  while (!eof && !io.broken)
    {
      struct pollfd p[2] = { { .fd = in, .events = POLLIN }, { .fd = sfd, .events = POLLIN } };
      size_t start = 0;
      ssize_t n;

      if (poll (p, 2, -1) < 0)
        {
          if (errno == EINTR)
            continue;
          break;
        }
      if (p[1].revents)
        {
          esbx_info ("mcp: signalled: cancelling the calls and ending");
          pthread_mutex_lock (&io.lock);
          io.stop = true;
          pthread_mutex_unlock (&io.lock);
          esbx_mcp_cancel_all (s);
          break;
        }
      if (cap - len < READ_CHUNK)
        buf = xrealloc (buf, cap = len + READ_CHUNK * 2);
      n = TEMP_FAILURE_RETRY (read (in, buf + len, READ_CHUNK));
      if (n < 0 && errno == EAGAIN)
        continue;
      if (n <= 0)
        {
          eof = true;
          n = 0;
        }
      for (i = len; i < len + (size_t)n; i++)
        {
          if (buf[i] != '\n')
            continue;
          if (discarding)
            {
              send_line (&io, esbx_mcp_error (NULL, ESBX_MCP_INVALID_REQUEST,
                                              "message of %zu bytes refused: the limit is %u",
                                              skipped + i - start, ESBX_MCP_MAX_MESSAGE));
              discarding = false;
              skipped = 0;
            }
          else
            handle_line (&io, buf + start, i - start);
          start = i + 1;
        }
      len += (size_t)n;
      memmove (buf, buf + start, len - start);
      len -= start;
      if (len > ESBX_MCP_MAX_MESSAGE)
        {
          /* A line this long is refused whole: what of it came is dropped,
             the rest is read to its newline and dropped too.  */
          discarding = true;
          skipped += len;
          len = 0;
        }
      if (eof && len && !discarding)
        handle_line (&io, buf, len);
      if (eof)
        esbx_mcp_cancel_all (s);
      if (len == 0 && cap > 4 * READ_CHUNK)
        {
          free (buf);
          buf = NULL;
          cap = 0;
        }
    }
  pthread_mutex_lock (&io.lock);
  io.closing = true;
  pthread_cond_broadcast (&io.cond);
  pthread_mutex_unlock (&io.lock);
  for (i = 0; i < io.n_workers; i++)
    esbx_thread_join (&io.workers[i]);
  if (io.broken)
    ret = esbx_make_error (err, EPIPE, "mcp: stdout");
  pthread_sigmask (SIG_UNBLOCK, &set, NULL);
  pthread_mutex_destroy (&io.write_lock);
  pthread_mutex_destroy (&io.lock);
  pthread_cond_destroy (&io.cond);
  return ret;
}
