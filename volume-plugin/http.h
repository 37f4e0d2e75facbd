/* esbxd: the HTTP layer under the plugin, the gateway and metrics.
   libmicrohttpd serves each listening socket with one thread per connection
   so that a slow request (a Mount that creates a project, a followed event
   stream, a streamed exec) never holds up the others.  The layer does what
   has to happen before a server's own code can run: it admits or refuses a
   request on its head alone (a missing token, a method the server does not
   take, a body over its limit) before any body is read, collects the body
   up to the limit, and keeps the per-request state; the server sees each
   request once, whole, and fills in the answer.

   Each listener has its own threads and budget, so that a flood on one
   never takes a descriptor or a thread from another: the Docker plugin
   socket and /metrics keep answering whatever happens on the gateway.  A
   new connection first waits in the listener's gate, one thread watching
   them all, until its request head is in; only then does it get a thread
   of its own.  The gate holds MAX_CONNECTIONS at most (when it is full,
   the connection that has waited longest goes), closes a connection whose
   head is not complete HEAD_TIMEOUT seconds after the connect, and on a
   unix socket lets one client process have MAX_WAITING_PER_CLIENT there.
   Past the gate, MAX_CONNECTIONS more are served at once; a kept-alive
   one that waits for its next request gives way when they are all taken.
   A refused request (no token, say) closes its connection.

   With TLS the gate cannot see the head: it hands a connection over once
   the first record of the handshake (the ClientHello) is in, and past the
   gate a connection counts as waiting, and may give way, until its first
   request head is in.  */
#ifndef ESBX_PLUGIN_HTTP_H
#define ESBX_PLUGIN_HTTP_H

#include "error.h"

#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>

struct esbx_http_request
{
  struct MHD_Connection *conn; /* for header and query lookups */
  const char *method;
  const char *url;
  const char *body; /* NUL-terminated, "" when there is none */
  size_t len;
  struct timespec start; /* CLOCK_MONOTONIC, at the first sight of the request */
  void *admission;       /* what the server's ADMIT returned for this request */

  /* 0, or the status the layer refused the request with: 401 when ADMIT
     refused it, 405 for a method the server does not take, 413 for a body
     over its limit.  The body was not read; the handler only words the
     refusal in its own format, WHY being the reason as a sentence.  */
  unsigned refused;
  const char *why;
};

struct esbx_http_answer
{
  unsigned status;          /* 200 when left 0 */
  const char *content_type; /* not copied; NULL sends none */
  char *body;               /* owned by the layer once set */
  size_t len;
  struct MHD_Response *stream; /* instead of BODY: an answer MHD pulls, headers and all */
};

typedef void (*esbx_http_handler) (void *data, const struct esbx_http_request *req,
                                   struct esbx_http_answer *answer);

/* Decide on a request's head (METHOD, URL), before its body is read:
   return 0 and set *ADMISSION (handed to the handler, then to
   ADMISSION_FREE), or refuse with 401 and *WHY (owned).  */
typedef unsigned (*esbx_http_admit) (void *data, struct MHD_Connection *conn, const char *method,
                                     const char *url, void **admission, char **why);

struct esbx_http_config
{
  const char *name;         /* prefixes libmicrohttpd's own messages in the log */
  bool post_only;           /* refuse other methods with 405 */
  size_t max_body;          /* larger bodies are refused with 413 */
  unsigned timeout;         /* seconds a connection may stay idle once its request head is in */
  unsigned head_timeout;    /* seconds of silence allowed to a waiting connection */
  unsigned max_connections; /* open at once on this listener */
  unsigned max_waiting_per_client; /* on a unix socket, per client process; 0: no limit */
  esbx_http_admit admit;           /* NULL: every request head is admitted */
  void (*admission_free) (void *admission);
  esbx_http_handler handler;
  void *data;
  /* TLS (GnuTLS through libmicrohttpd): the certificate chain and its
     private key, PEM, both or neither; they must outlive the server.  */
  const char *tls_cert;
  const char *tls_key;
};

struct esbx_http_server;

/* Serve CFG (copied; its strings must outlive the server) on the listening
   socket FD, which belongs to the server from now on, also on failure.  */
int esbx_http_start (int fd, const struct esbx_http_config *cfg, struct esbx_http_server **out,
                     esbx_error_t *err);
/* Stop serving, waiting for the requests in flight, and close the socket.  */
void esbx_http_stop (struct esbx_http_server *srv);

/* Seconds since REQ was first seen.  */
double esbx_http_elapsed (const struct esbx_http_request *req);

/* The HTTP status of a failed request, from the kind of its error: the one
   map of the plugin and the gateway, as esbx_error_exit_status is the CLI's.
   Usage, exists and busy 400, forbidden 403, not-found 404, conflict and unmerged 409,
   too-large 413, a command that could not run 422; a plain failure is the
   request's (400) without a system error behind it, the server's (500)
   with one.  */
unsigned esbx_http_status_of_error (const struct esbx_error *err);

#endif
