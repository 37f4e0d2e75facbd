/* esbxd: the HTTP layer under the plugin, the gateway and metrics.
   libmicrohttpd serves each listening socket with one thread per connection
   so that a slow request (a Mount that creates a project, a followed event
   stream) never holds up the others.  The layer does what has to happen
   before a server's own code can run: it refuses a method (the plugin takes
   only POST) or an oversized body before the body is read, collects the
   body up to the limit, and keeps the per-request state; the server sees
   each request once, whole, and fills in the answer.  */
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

  /* 0, or the status the layer refused the request with: 405 for a method
     the server does not take, 413 for a body over its limit.  The body was
     not read; the handler only words the refusal in its own format, WHY
     being the reason as a sentence.  */
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

struct esbx_http_config
{
  const char *name; /* prefixes libmicrohttpd's own messages in the log */
  bool post_only;   /* refuse other methods with 405 */
  size_t max_body;  /* larger bodies are refused with 413 */
  unsigned timeout; /* seconds a connection may stay idle */
  esbx_http_handler handler;
  void *data;
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

#endif
