#include "http.h"
#include "log.h"
#include "thread.h"
#include "utils.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

/* The gate hands a connection over once its request head is in: an empty
   line within this many bytes (more goes over as is, for MHD to refuse).  */
#define HEAD_MAX (16u * 1024)
/* Refusals are logged at most once per this many seconds and listener,
   libmicrohttpd's own messages (a closed connection, a timeout) at most
   MHD_LOG_BURST times: a flood must not turn into a flood of log lines.  */
#define LOG_INTERVAL  10
#define MHD_LOG_BURST 5

/* A connection, in the gate (waiting for its request head, owned by the
   gate's thread) or handed to MHD (from then to MHD's CLOSED notice).  */
struct conn
{
  struct conn *prev, *next;
  int fd;
  pid_t client;          /* the peer process on a unix socket, 0 elsewhere */
  struct timespec since; /* in the gate: accepted; in MHD: waiting since */
  struct sockaddr_storage addr;
  socklen_t addrlen;
  bool started; /* MHD has taken it (its STARTED notice came) */
  bool busy;    /* a request of it is being served */
  bool evicted; /* shut down to make room; MHD is closing it */
};

struct list
{
  struct conn *head, *tail;
  unsigned n;
};

struct esbx_http_server
{
  struct MHD_Daemon *daemon;
  struct esbx_http_config cfg;
  bool unix_socket;
  bool tls;
  int listen_fd, stop_fd, epfd;
  struct esbx_thread gate_thread;
  struct list gate; /* the gate's thread alone, with PEEK */
  char *peek;

  pthread_mutex_t lock; /* the fields below */
  struct list served;   /* handed to MHD */
  unsigned n_evicted;
  unsigned long refused;
  const char *last_refusal;
  time_t refusal_logged;
  time_t mhd_window;
  unsigned long mhd_logged, mhd_dropped;
};

/* Per-request state, from the first callback until MHD reports completion.  */
struct request
{
  struct timespec start;
  char *body;
  size_t len;
  bool too_big;
  void *admission;
};

double
esbx_http_elapsed (const struct esbx_http_request *req)
{
  struct timespec now;

  clock_gettime (CLOCK_MONOTONIC, &now);
  return (double)(now.tv_sec - req->start.tv_sec)
         + (double)(now.tv_nsec - req->start.tv_nsec) / 1e9;
}

static void
list_append (struct list *l, struct conn *c)
{
  c->prev = l->tail;
  c->next = NULL;
  if (l->tail)
    l->tail->next = c;
  else
    l->head = c;
  l->tail = c;
  l->n++;
}

static void
list_remove (struct list *l, struct conn *c)
{
  if (c->prev)
    c->prev->next = c->next;
  else
    l->head = c->next;
  if (c->next)
    c->next->prev = c->prev;
  else
    l->tail = c->prev;
  l->n--;
}

static double
age (const struct conn *c)
{
  struct timespec now;

  clock_gettime (CLOCK_MONOTONIC, &now);
  return (double)(now.tv_sec - c->since.tv_sec) + (double)(now.tv_nsec - c->since.tv_nsec) / 1e9;
}

/* Under the lock, or from the gate's thread before any other runs.  */
static void
note_refusal (struct esbx_http_server *srv, const char *why)
{
  time_t now = time (NULL);

  srv->refused++;
  srv->last_refusal = why;
  if (now - srv->refusal_logged < LOG_INTERVAL)
    return;
  esbx_warn ("%s: refused or dropped %lu connection%s since the last report (%u waiting for "
             "their request head, %u served; last: %s)",
             srv->cfg.name, srv->refused, srv->refused == 1 ? "" : "s", srv->gate.n, srv->served.n,
             srv->last_refusal);
  srv->refused = 0;
  srv->refusal_logged = now;
}

static void
refuse (struct esbx_http_server *srv, const char *why)
{
  pthread_mutex_lock (&srv->lock);
  note_refusal (srv, why);
  pthread_mutex_unlock (&srv->lock);
}

/* ---- the gate: connections until their request head is in -------------- */

static pid_t
client_of (const struct esbx_http_server *srv, int fd)
{
  struct ucred uc;
  socklen_t len = sizeof uc;

  if (!srv->unix_socket || getsockopt (fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) < 0)
    return 0;
  return uc.pid > 0 ? uc.pid : 0;
}

static void
drop (struct esbx_http_server *srv, struct conn *c)
{
  list_remove (&srv->gate, c);
  close (c->fd); /* leaves the epoll set with it */
  free (c);
}

/* Room in MHD for a connection whose head is in: when every place is
   taken, a kept-alive connection that waits for its next request gives
   way (its client connects again).  Under the lock.  */
static const char *
make_room (struct esbx_http_server *srv)
{
  unsigned max = srv->cfg.max_connections;
  struct conn *c, *oldest = NULL;

  if (srv->served.n - srv->n_evicted < max)
    return NULL;
  /* Evicted connections hold a descriptor until MHD has closed them.  */
  if (srv->served.n >= max + max / 2)
    return "evicted connections are still closing";
  for (c = srv->served.head; c; c = c->next)
    if (!c->busy && !c->evicted && c->started && (oldest == NULL || age (c) > age (oldest)))
      oldest = c;
  if (oldest == NULL)
    return "every connection is being served";
  shutdown (oldest->fd, SHUT_RDWR);
  oldest->evicted = true;
  srv->n_evicted++;
  return NULL;
}

static void
hand_over (struct esbx_http_server *srv, struct conn *c)
{
  const char *why;
  int fd = c->fd;

  list_remove (&srv->gate, c);
  epoll_ctl (srv->epfd, EPOLL_CTL_DEL, fd, NULL);
  pthread_mutex_lock (&srv->lock);
  why = make_room (srv);
  if (why)
    {
      note_refusal (srv, why);
      pthread_mutex_unlock (&srv->lock);
      close (fd);
      free (c);
      return;
    }
  /* A record of FD that MHD never took (it failed before its STARTED
     notice and closed FD, which accept reused) goes.  */
  for (struct conn *o = srv->served.head; o; o = o->next)
    if (o->fd == fd && !o->started)
      {
        list_remove (&srv->served, o);
        free (o);
        break;
      }
  clock_gettime (CLOCK_MONOTONIC, &c->since);
  /* Its request is about to be served; with TLS, its handshake first.  */
  c->busy = !srv->tls;
  list_append (&srv->served, c);
  pthread_mutex_unlock (&srv->lock);
  if (MHD_add_connection (srv->daemon, fd, (struct sockaddr *)&c->addr, c->addrlen) != MHD_YES)
    {
      pthread_mutex_lock (&srv->lock);
      if (!c->started)
        {
          list_remove (&srv->served, c);
          free (c);
        }
      pthread_mutex_unlock (&srv->lock);
    }
}

/* Whether the N bytes at P hold a whole first TLS record: its 5-byte
   header (type, version, length) and what the length says.  Anything but
   a handshake record goes over at once, for MHD to refuse.  */
static bool
tls_record_in (const unsigned char *p, size_t n)
{
  if (n >= 1 && p[0] != 0x16)
    return true;
  return n >= 5 && n >= 5 + (((size_t)p[3] << 8) | p[4]);
}

/* New data on C: hand it over once its head (with TLS: the ClientHello) is
   complete, drop it when its client has gone.  The gate only peeks: MHD
   reads the head itself.  */
static void
look (struct esbx_http_server *srv, struct conn *c)
{
  ssize_t n = recv (c->fd, srv->peek, HEAD_MAX, MSG_PEEK | MSG_DONTWAIT);

  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return;
  if (n <= 0)
    return drop (srv, c);
  if ((size_t)n == HEAD_MAX
      || (srv->tls ? tls_record_in ((const unsigned char *)srv->peek, (size_t)n)
                   : memmem (srv->peek, (size_t)n, "\r\n\r\n", 4)
                         || memmem (srv->peek, (size_t)n, "\n\n", 2)))
    hand_over (srv, c);
}

/* A new connection waits in the gate unless its client already has
   MAX_WAITING_PER_CLIENT there; when the gate is full the connection that
   has waited longest goes, so that a client that opens connections and
   never finishes a request only ever pushes out its own.  */
static void
enter (struct esbx_http_server *srv, int fd, const struct sockaddr_storage *ss, socklen_t sl)
{
  struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP | EPOLLET };
  pid_t client = client_of (srv, fd);
  unsigned waiting = 0;
  struct conn *c;

  if (client && srv->cfg.max_waiting_per_client)
    {
      for (c = srv->gate.head; c; c = c->next)
        waiting += c->client == client;
      if (waiting >= srv->cfg.max_waiting_per_client)
        {
          close (fd);
          return refuse (srv, "a client process has too many connections without a complete "
                              "request head");
        }
    }
  if (srv->gate.n >= srv->cfg.max_connections)
    {
      drop (srv, srv->gate.head);
      refuse (srv, "the oldest connection without a complete request head made room");
    }
  c = xmalloc0 (sizeof *c);
  c->fd = fd;
  c->client = client;
  c->addr = *ss;
  c->addrlen = sl;
  clock_gettime (CLOCK_MONOTONIC, &c->since);
  ev.data.ptr = c;
  list_append (&srv->gate, c);
  /* Data already there is reported at once.  */
  if (epoll_ctl (srv->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
    drop (srv, c);
}

static void
accept_all (struct esbx_http_server *srv)
{
  struct sockaddr_storage ss;
  socklen_t sl;
  int fd;

  for (;;)
    {
      sl = sizeof ss;
      fd = accept4 (srv->listen_fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd >= 0)
        {
          enter (srv, fd, &ss, sl);
          continue;
        }
      /* Out of descriptors or memory: the connection stays queued and is
         taken at the next round.  */
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
        refuse (srv, strerror (errno));
      return;
    }
}

/* Milliseconds until the oldest waiting connection's time is up (-1: none
   waits), after dropping those whose time is up: a request head must be
   complete within HEAD_TIMEOUT seconds of the connect, trickle or not.  */
static int
expire (struct esbx_http_server *srv)
{
  double left;

  while (srv->gate.head)
    {
      left = srv->cfg.head_timeout - age (srv->gate.head);
      if (left > 0)
        return (int)(left * 1000) + 1;
      drop (srv, srv->gate.head);
    }
  return -1;
}

static void *
gate_loop (void *arg)
{
  struct esbx_http_server *srv = arg;
  struct epoll_event ev[64];
  int n, i, timeout;
  bool arrived;

  for (;;)
    {
      timeout = expire (srv);
      n = epoll_wait (srv->epfd, ev, ARRAY_SIZE (ev), timeout);
      if (n < 0 && errno != EINTR)
        break;
      arrived = false;
      for (i = 0; i < n; i++)
        {
          if (ev[i].data.ptr == &srv->stop_fd)
            return NULL;
          if (ev[i].data.ptr == &srv->listen_fd)
            arrived = true;
          else
            look (srv, ev[i].data.ptr);
        }
      /* After the others: a connection dropped above may be what a new
         one would have reused the descriptor of.  */
      if (arrived)
        accept_all (srv);
    }
  return NULL;
}

/* ---- connections MHD serves --------------------------------------------- */

static void
on_connection (void *cls, struct MHD_Connection *conn, void **socket_context,
               enum MHD_ConnectionNotificationCode code)
{
  struct esbx_http_server *srv = cls;
  const union MHD_ConnectionInfo *ci;
  struct conn *c;

  pthread_mutex_lock (&srv->lock);
  if (code == MHD_CONNECTION_NOTIFY_STARTED)
    {
      ci = MHD_get_connection_info (conn, MHD_CONNECTION_INFO_CONNECTION_FD);
      for (c = srv->served.head; ci && c; c = c->next)
        if (c->fd == ci->connect_fd && !c->started)
          {
            c->started = true;
            *socket_context = c;
            break;
          }
    }
  else if ((c = *socket_context))
    {
      list_remove (&srv->served, c);
      if (c->evicted)
        srv->n_evicted--;
      free (c);
      *socket_context = NULL;
    }
  pthread_mutex_unlock (&srv->lock);
}

/* A request starts or ends: between two, a kept-alive connection waits
   for the next head, HEAD_TIMEOUT seconds at most, and may give way.  */
static void
set_busy (struct esbx_http_server *srv, struct MHD_Connection *conn, bool busy)
{
  const union MHD_ConnectionInfo *ci
      = MHD_get_connection_info (conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  struct conn *c = ci ? ci->socket_context : NULL;

  MHD_set_connection_option (conn, MHD_CONNECTION_OPTION_TIMEOUT,
                             busy ? srv->cfg.timeout : srv->cfg.head_timeout);
  if (c == NULL)
    return;
  pthread_mutex_lock (&srv->lock);
  c->busy = busy;
  clock_gettime (CLOCK_MONOTONIC, &c->since);
  pthread_mutex_unlock (&srv->lock);
}

/* ---- requests ----------------------------------------------------------- */

/* MHD refuses a Content-Length that is not a number before this runs; the
   strict parse only keeps anything it lets through from passing as small.  */
static bool
declared_too_big (const struct esbx_http_config *cfg, struct MHD_Connection *conn)
{
  const char *cl = MHD_lookup_connection_value (conn, MHD_HEADER_KIND, "Content-Length");
  unsigned long long n;
  char *end;

  if (cl == NULL)
    return false;
  errno = 0;
  n = strtoull (cl, &end, 10);
  return errno != 0 || *end != '\0' || n > cfg->max_body;
}

/* Hand the request to the server's handler and queue what it answers.
   WHY (owned) words a refusal.  */
static enum MHD_Result
answer (struct esbx_http_server *srv, struct MHD_Connection *conn, const char *method,
        const char *url, const struct request *st, unsigned refused, char *why)
{
  struct esbx_http_request req = {
    .conn = conn,
    .method = method,
    .url = url,
    .body = st->body ? st->body : "",
    .len = st->len,
    .start = st->start,
    .admission = st->admission,
    .refused = refused,
    .why = why,
  };
  struct esbx_http_answer ans = { 0 };
  struct MHD_Response *resp;
  enum MHD_Result ret;

  srv->cfg.handler (srv->cfg.data, &req, &ans);
  free (why);

  resp = ans.stream;
  if (resp == NULL)
    {
      resp = MHD_create_response_from_buffer (ans.len, ans.body ? ans.body : (char *)"",
                                              MHD_RESPMEM_MUST_COPY);
      if (resp && ans.content_type)
        MHD_add_response_header (resp, MHD_HTTP_HEADER_CONTENT_TYPE, ans.content_type);
    }
  free (ans.body);
  if (resp == NULL)
    return MHD_NO;
  /* A refused client (no token, say) does not keep the connection for a
     next try: back to the gate with a new one.  */
  if (refused)
    MHD_add_response_header (resp, MHD_HTTP_HEADER_CONNECTION, "close");
  ret = MHD_queue_response (conn, ans.status ? ans.status : MHD_HTTP_OK, resp);
  MHD_destroy_response (resp);
  return ret;
}

/* The first sight of a request, its head complete: admit it or refuse it
   before a byte of its body is read.  */
static enum MHD_Result
on_head (struct esbx_http_server *srv, struct MHD_Connection *conn, const char *method,
         const char *url, struct request *st)
{
  char *why = NULL;
  unsigned status;

  if (srv->cfg.admit
      && (status = srv->cfg.admit (srv->cfg.data, conn, method, url, &st->admission, &why)))
    return answer (srv, conn, method, url, st, status, why);
  set_busy (srv, conn, true);
  /* Answer before the body is sent: MHD then skips it (and curl's
     Expect: 100-continue never gets its 100).  */
  if (srv->cfg.post_only && strcmp (method, MHD_HTTP_METHOD_POST) != 0)
    return answer (srv, conn, method, url, st, MHD_HTTP_METHOD_NOT_ALLOWED,
                   xasprintf ("method %s not allowed", method));
  if (declared_too_big (&srv->cfg, conn))
    return answer (srv, conn, method, url, st, MHD_HTTP_CONTENT_TOO_LARGE,
                   xasprintf ("request body too large (limit %zu bytes)", srv->cfg.max_body));
  return MHD_YES;
}

static enum MHD_Result
on_request (void *cls, struct MHD_Connection *conn, const char *url, const char *method,
            const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls)
{
  struct esbx_http_server *srv = cls;
  struct request *st = *con_cls;

  if (st == NULL)
    {
      st = xmalloc0 (sizeof *st);
      clock_gettime (CLOCK_MONOTONIC, &st->start);
      *con_cls = st;
      return on_head (srv, conn, method, url, st);
    }

  if (*upload_data_size > 0)
    {
      /* Chunked bodies have no Content-Length: count as they come and keep
         draining after the limit so that the answer can still be sent.  */
      if (!st->too_big && st->len + *upload_data_size <= srv->cfg.max_body)
        {
          st->body = xrealloc (st->body, st->len + *upload_data_size + 1);
          memcpy (st->body + st->len, upload_data, *upload_data_size);
          st->len += *upload_data_size;
          st->body[st->len] = '\0';
        }
      else
        {
          st->too_big = true;
          free (st->body);
          st->body = NULL;
          st->len = 0;
        }
      *upload_data_size = 0;
      return MHD_YES;
    }

  if (st->too_big)
    return answer (srv, conn, method, url, st, MHD_HTTP_CONTENT_TOO_LARGE,
                   xasprintf ("request body too large (limit %zu bytes)", srv->cfg.max_body));
  return answer (srv, conn, method, url, st, 0, NULL);
}

static void
on_completed (void *cls, struct MHD_Connection *conn, void **con_cls,
              enum MHD_RequestTerminationCode toe)
{
  struct esbx_http_server *srv = cls;
  struct request *st = *con_cls;

  if (st == NULL)
    return;
  if (st->admission && srv->cfg.admission_free)
    srv->cfg.admission_free (st->admission);
  free (st->body);
  free (st);
  *con_cls = NULL;
  /* Kept alive, the connection waits for its next request head.  */
  set_busy (srv, conn, false);
}

/* Marked printf-like for -Wformat-nonliteral: FMT is libmicrohttpd's, never a
   request's.  */
static void __attribute__ ((format (printf, 2, 0)))
on_mhd_error (void *cls, const char *fmt, va_list ap)
{
  struct esbx_http_server *srv = cls;
  time_t now = time (NULL);
  char line[1024];

  vsnprintf (line, sizeof line, fmt, ap);
  line[strcspn (line, "\n")] = '\0';
  /* MHD 0.9 cannot be told that a connection it is handed
     (MHD_add_connection) is a unix socket: it tries TCP options on it and
     says so at every answer.  Nothing is wrong: there is no Nagle to turn
     off on a unix socket.  */
  if (srv->unix_socket
      && (strstr (line, "TCP_NODELAY") || strstr (line, "TCP_CORK")
          || strstr (line, "Failed to push the data")))
    return;
  pthread_mutex_lock (&srv->lock);
  if (now - srv->mhd_window >= LOG_INTERVAL)
    {
      if (srv->mhd_dropped)
        esbx_warn ("%s: %lu more messages of libmicrohttpd were not logged", srv->cfg.name,
                   srv->mhd_dropped);
      srv->mhd_window = now;
      srv->mhd_logged = srv->mhd_dropped = 0;
    }
  if (srv->mhd_logged++ < MHD_LOG_BURST)
    esbx_warn ("%s: %s", srv->cfg.name, line);
  else
    srv->mhd_dropped++;
  pthread_mutex_unlock (&srv->lock);
}

/* ---- the server --------------------------------------------------------- */

static bool
is_unix_socket (int fd)
{
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;

  return getsockname (fd, (struct sockaddr *)&ss, &sl) == 0 && ss.ss_family == AF_UNIX;
}

/* TLS 1.2 and 1.3 only.  */
#define TLS_PRIORITIES "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"

static int
start_daemon (struct esbx_http_server *srv, esbx_error_t *err)
{
  unsigned max = srv->cfg.max_connections;
  unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL
                   | MHD_USE_ITC | MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ERROR_LOG;
  struct MHD_OptionItem tls[] = {
    { MHD_OPTION_HTTPS_MEM_KEY, 0, (char *)srv->cfg.tls_key },
    { MHD_OPTION_HTTPS_MEM_CERT, 0, (char *)srv->cfg.tls_cert },
    { MHD_OPTION_HTTPS_PRIORITIES, 0, (char *)TLS_PRIORITIES },
    { MHD_OPTION_END, 0, NULL },
  };

  if (srv->tls)
    {
      if (MHD_is_feature_supported (MHD_FEATURE_TLS) != MHD_YES)
        return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                     "TLS: this libmicrohttpd was built without it");
      flags |= MHD_USE_TLS;
    }
  /* Connections come from the gate (MHD_add_connection, hence ITC).  Poll,
     not select: descriptors beyond 1,024 work.  MHD's own limit stays
     above ours, which counts the same connections from the hand-over on.  */
  srv->daemon = MHD_start_daemon (
      flags, 0, NULL, NULL, on_request, srv, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_error, srv,
      MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv, MHD_OPTION_NOTIFY_CONNECTION, on_connection,
      srv, MHD_OPTION_CONNECTION_LIMIT, max * 2, MHD_OPTION_CONNECTION_TIMEOUT,
      srv->cfg.head_timeout, MHD_OPTION_ARRAY, srv->tls ? tls : &tls[ARRAY_SIZE (tls) - 1],
      MHD_OPTION_END);
  if (srv->daemon == NULL && srv->tls)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "libmicrohttpd did not start: the TLS certificate or key is not "
                                 "usable (PEM, a key that matches the certificate)");
  if (srv->daemon == NULL)
    return esbx_make_error (err, 0, "libmicrohttpd did not start");
  /* Its threads are none of esbx's making, but they run.  */
  esbx_threads_foreign ();
  return 0;
}

static int
start_gate (struct esbx_http_server *srv, esbx_error_t *err)
{
  struct epoll_event lev = { .events = EPOLLIN, .data.ptr = &srv->listen_fd };
  struct epoll_event sev = { .events = EPOLLIN, .data.ptr = &srv->stop_fd };

  srv->stop_fd = eventfd (0, EFD_CLOEXEC);
  srv->epfd = epoll_create1 (EPOLL_CLOEXEC);
  if (srv->stop_fd < 0 || srv->epfd < 0
      || epoll_ctl (srv->epfd, EPOLL_CTL_ADD, srv->listen_fd, &lev) < 0
      || epoll_ctl (srv->epfd, EPOLL_CTL_ADD, srv->stop_fd, &sev) < 0)
    return esbx_make_error (err, errno, "%s: epoll", srv->cfg.name);
  if (esbx_thread_start (&srv->gate_thread, gate_loop, srv, "connection gate", err) < 0)
    return esbx_error_wrap (err, "%s", srv->cfg.name);
  return 0;
}

int
esbx_http_start (int fd, const struct esbx_http_config *cfg, struct esbx_http_server **out,
                 esbx_error_t *err)
{
  struct esbx_http_server *srv = xmalloc0 (sizeof *srv);

  srv->cfg = *cfg;
  if (srv->cfg.max_connections == 0)
    srv->cfg.max_connections = 256;
  if (srv->cfg.head_timeout == 0 || srv->cfg.head_timeout > srv->cfg.timeout)
    srv->cfg.head_timeout = srv->cfg.timeout;
  srv->listen_fd = fd;
  srv->stop_fd = srv->epfd = -1;
  srv->peek = xmalloc (HEAD_MAX);
  srv->unix_socket = is_unix_socket (fd);
  srv->tls = cfg->tls_cert != NULL;
  pthread_mutex_init (&srv->lock, NULL);
  if (start_daemon (srv, err) < 0 || start_gate (srv, err) < 0)
    {
      esbx_http_stop (srv);
      return -1;
    }
  *out = srv;
  return 0;
}

void
esbx_http_stop (struct esbx_http_server *srv)
{
  uint64_t one = 1;
  struct conn *c;

  if (srv == NULL)
    return;
  if (srv->gate_thread.started)
    {
      if (write (srv->stop_fd, &one, sizeof one) != sizeof one)
        abort ();
      esbx_thread_join (&srv->gate_thread);
    }
  while (srv->gate.head)
    drop (srv, srv->gate.head);
  close (srv->listen_fd);
  /* Waits for the requests in flight and closes their connections.  */
  if (srv->daemon)
    MHD_stop_daemon (srv->daemon);
  while ((c = srv->served.head))
    {
      list_remove (&srv->served, c);
      free (c);
    }
  if (srv->epfd >= 0)
    close (srv->epfd);
  if (srv->stop_fd >= 0)
    close (srv->stop_fd);
  pthread_mutex_destroy (&srv->lock);
  free (srv->peek);
  free (srv);
}

unsigned
esbx_http_status_of_error (const struct esbx_error *err)
{
  switch (err->kind)
    {
    case ESBX_ERR_USAGE:
    case ESBX_ERR_EXISTS:
    case ESBX_ERR_BUSY:
      return MHD_HTTP_BAD_REQUEST;
    case ESBX_ERR_FORBIDDEN:
      return MHD_HTTP_FORBIDDEN;
    case ESBX_ERR_NOT_FOUND:
      return MHD_HTTP_NOT_FOUND;
    case ESBX_ERR_CONFLICT:
    case ESBX_ERR_UNMERGED:
      return MHD_HTTP_CONFLICT;
    case ESBX_ERR_TOO_LARGE:
      return MHD_HTTP_CONTENT_TOO_LARGE;
    case ESBX_ERR_EXEC_FAILED:
    case ESBX_ERR_EXEC_NOT_FOUND:
      return MHD_HTTP_UNPROCESSABLE_CONTENT;
    case ESBX_ERR_FAILED:
    default:
      return err->status == 0 ? MHD_HTTP_BAD_REQUEST : MHD_HTTP_INTERNAL_SERVER_ERROR;
    }
}
