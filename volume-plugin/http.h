/* esbxd: HTTP on a unix socket, served by libmicrohttpd with one thread per
   connection so that a slow request (a Mount that creates a project) never
   holds up the others.  Every request is a POST whose body is collected up
   to a limit and handed whole to one handler.  */
#ifndef ESBX_PLUGIN_HTTP_H
#define ESBX_PLUGIN_HTTP_H

#include "error.h"

#include <stddef.h>

/* Bodies larger than this are refused with 413 and never reach a handler.  */
#define ESBX_HTTP_MAX_BODY (1024u * 1024u)

struct esbx_http_reply
{
  unsigned status; /* HTTP status; 200 unless the handler sets another */
  char *body;      /* owned; sent with the server's content type */
  char *subject;   /* owned, may be NULL: what the request was about, for the log */
  char *result;    /* owned, may be NULL ("ok"): one-line outcome, for the log */
};

typedef void (*esbx_http_handler) (void *data, const char *path, const char *body, size_t len,
                                   struct esbx_http_reply *reply);

struct esbx_http_server;

/* Bind a unix socket at SOCKET_PATH (mode 0660), refusing to steal one that
   another process still answers on, and serve HANDLER on it.  Errors are
   answered as {"Err": "..."} in CONTENT_TYPE.  */
int esbx_http_start (const char *socket_path, const char *content_type, esbx_http_handler handler,
                     void *data, struct esbx_http_server **out, esbx_error_t *err);
/* Stop serving (waiting for requests in flight) and remove the socket.  */
void esbx_http_stop (struct esbx_http_server *server);

/* Fill REPLY with {"Err": MSG}.  */
void esbx_http_reply_error (struct esbx_http_reply *reply, unsigned status, const char *msg);

#endif
