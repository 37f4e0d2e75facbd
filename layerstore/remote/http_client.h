/* esbx: HTTP requests for the registry and etcd clients (layerstore/
   registry.c, etcd.c) over libcurl, which is loaded with dlopen on the
   first request: linked, it and the libraries it pulls in added ~10 ms to
   every start of esbx, and local verbs never talk HTTP (cli/remote.c does
   the same for the gateway).  */
#ifndef ESBX_HTTP_H
#define ESBX_HTTP_H

#include "error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Who the client trusts and who it says it is; every field may be NULL.  */
struct esbx_http_auth
{
  const char *ca;   /* PEM bundle the server is verified with; NULL: the system's */
  const char *cert; /* client certificate (PEM) and its key */
  const char *key;
  const char *userpwd; /* basic authentication, "user:password" */
  const char *bearer;  /* a token sent as "Authorization: Bearer TOKEN" */
};

struct esbx_http_request
{
  const char *method; /* "GET", "HEAD", "PUT", "POST" */
  const char *url;
  const char *content_type; /* of the body; NULL: none */
  const char *accept;       /* NULL: none */
  const void *body;         /* the body in memory, or */
  size_t body_len;
  int body_fd;                       /* >= 0: the body is this file's content from offset 0 */
  int out_fd;                        /* >= 0: the answer's body is written here, not kept */
  uint64_t out_max;                  /* > 0: more bytes than this into OUT_FD end the transfer */
  const struct esbx_http_auth *auth; /* NULL: none */
  /* A stream (etcd's watch): the answer's body goes to ON_DATA as it
     comes (false ends the transfer), ABORT is asked about at least once a
     second (true ends it); no stall timeout, TCP keepalive instead.  */
  bool (*on_data) (const char *data, size_t len, void *arg);
  bool (*abort) (void *arg);
  void *arg;
};

/* An answer kept in memory (not written to OUT_FD nor streamed) is cut
   off beyond this: every one esbx keeps is a JSON document of at most
   JSON_MAX_DOCUMENT, and a hostile service could otherwise send without
   end into memory.  */
#define ESBX_HTTP_BODY_MAX (16u * 1024 * 1024)

struct esbx_http_response
{
  long status;
  char *body; /* NUL-terminated; NULL when empty or written to out_fd */
  size_t len;
  char *location;         /* the Location header, if any */
  char *www_authenticate; /* the first WWW-Authenticate header of scheme Bearer, if any */
};

/* Initialise a request: no body, answer kept in memory.  */
void esbx_http_request_init (struct esbx_http_request *rq, const char *method, const char *url);
/* Run RQ.  Fails only when no answer came (the message is "URL: cause",
   cause being curl's words); any HTTP status is an answer.  */
int esbx_http_do (const struct esbx_http_request *rq, struct esbx_http_response *rs,
                  esbx_error_t *err);
/* The N requests RQ at once, at most PARALLEL transfers at a time
   (http_multi.c): ERRS[i] receives what esbx_http_do would have failed
   with for RQ[i], else RS[i] its answer.  Fails (and fills nothing) only
   when the transfers cannot be run.  */
int esbx_http_do_many (const struct esbx_http_request *rq, struct esbx_http_response *rs,
                       esbx_error_t *errs, size_t n, size_t parallel, esbx_error_t *err);
void esbx_http_response_free (struct esbx_http_response *rs);
/* URL without its path, query and credentials: what messages name.  */
char *esbx_http_origin (const char *url);

#endif
