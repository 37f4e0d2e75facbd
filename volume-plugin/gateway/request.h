/* esbxd: one gateway request.  A route names the scope it needs and what
   it is about (a project, a session, the whole store), so that gateway.c
   can have auth.c decide allowed or denied before any handler runs; the
   handler then answers through the context it is given.  */
#ifndef ESBX_PLUGIN_GATEWAY_REQUEST_H
#define ESBX_PLUGIN_GATEWAY_REQUEST_H

#include "json.h"
#include "layerstore.h"

#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Most bytes of a file, or of a patch, that one answer carries.  */
#define ESBX_GATEWAY_MAX_FILE_READ (64u * 1024 * 1024)

struct esbx_metrics;
struct esbx_samples;
struct esbx_gateway_mcp;

enum esbx_gateway_target
{
  GATEWAY_TARGET_LIST,          /* a listing: the handler filters it to the token */
  GATEWAY_TARGET_PROJECT,       /* the project named in the path */
  GATEWAY_TARGET_SESSION,       /* the session named in the path */
  GATEWAY_TARGET_BODY_PROJECT,  /* the body's "project" */
  GATEWAY_TARGET_BODY_NAME,     /* the body's "name" (a project being created) */
  GATEWAY_TARGET_QUERY_PROJECT, /* ?project=P, or the whole store without it */
  GATEWAY_TARGET_QUERY_REF,     /* ?ref=SESSION or ?ref=PROJECT[@LAYER] */
  GATEWAY_TARGET_TOKEN,         /* the token itself */
  GATEWAY_TARGET_REQUEST,       /* the merge queue's request named in the path: its project
                                   and session */
  GATEWAY_TARGET_STORE,         /* the whole store: unlimited tokens only */
};

struct esbx_gateway_ctx
{
  esbx_store_t *store;
  struct esbx_metrics *metrics;
  struct esbx_samples *samples; /* the sessions' resource samples, or NULL */
  struct MHD_Connection *conn;
  uint64_t exec_log_limit;      /* --exec-log-limit, 0: the shim's default */
  struct esbx_gateway_mcp *mcp; /* the MCP sessions (routes_mcp.c) */
  const char *method;
  const char *body;
  size_t len;
  json_t *json; /* the parsed body of routes that take JSON */
  const struct esbx_token *token;
  const char *arg; /* the name captured from the path */

  /* What the request is about, resolved before authorization.  */
  char *project;
  char *session;
  char *session_id; /* NULL when SESSION does not exist */
  /* The route's content flag is set: the answer is file content.  Decided
     once, before authorization; the handler reads this, not the query.  */
  bool content;

  /* The answer.  */
  unsigned status;
  char *out;
  size_t out_len;
  const char *content_type;
  struct MHD_Response *stream; /* a streamed answer instead of OUT */
  char *reason;                /* for the audit log, when refused */
};

struct esbx_gateway_route
{
  const char *method;
  const char *pattern; /* '*' is one path segment holding a name */
  const char *name;    /* endpoint label for metrics */
  unsigned scope;
  enum esbx_gateway_target target;
  bool json_body;
  void (*fn) (struct esbx_gateway_ctx *ctx);
  /* A query flag (esbx_gateway_query_flag) that turns the answer into file
     content: the request then needs `runtime` instead of SCOPE.  */
  const char *content_flag;
};

/* The query parameter KEY, NULL when absent.  */
const char *esbx_gateway_query (struct esbx_gateway_ctx *ctx, const char *key);
/* Whether the query parameter KEY is set: present with any value but "0"
   and "false".  Authorization and handlers read flags only through this,
   so that they never disagree about what a request asks for.  */
bool esbx_gateway_query_flag (struct MHD_Connection *conn, const char *key);

void esbx_gateway_reply_json (struct esbx_gateway_ctx *ctx, unsigned status, json_t *doc);
/* An error of KIND (STATUS: the errno behind it, 0 when none): its HTTP
   status and exit status follow from the kind, in esbx_http_status_of_error
   and esbx_error_exit_status, as for a library error.  */
void esbx_gateway_reply_fail (struct esbx_gateway_ctx *ctx, enum esbx_error_kind kind, int status,
                              const char *fmt, ...) __attribute__ ((format (printf, 4, 5)));
/* A refusal of the HTTP layer itself, whose status no kind gives (401 no
   token, 405 a method the path has not).  */
void esbx_gateway_reply_refused (struct esbx_gateway_ctx *ctx, unsigned status,
                                 enum esbx_error_kind kind, const char *msg);
/* 403 "forbidden: REASON" (REASON owned, freed): a request the token may
   not make, refused before it changes anything.  */
void esbx_gateway_reply_forbidden (struct esbx_gateway_ctx *ctx, char *reason);
/* A library error as HTTP (usage 400, conflict 409, missing 404, ...);
   frees *ERR.  */
void esbx_gateway_reply_err (struct esbx_gateway_ctx *ctx, esbx_error_t *err);
/* {KEY: VALUE}: answers that carry one string (a name, a layer, a path, a
   report).  */
void esbx_gateway_reply_string (struct esbx_gateway_ctx *ctx, unsigned status, const char *key,
                                const char *value);
/* A JSON view from view.c (owned), or the error that stopped it (VIEW
   NULL).  */
void esbx_gateway_reply_view (struct esbx_gateway_ctx *ctx, json_t *view, esbx_error_t *err);
/* {"report": TEXT}: what REPORT (fsck, gc, trash purge) wrote to its
   stream, or its error.  */
typedef int (*esbx_gateway_report_fn) (struct esbx_gateway_ctx *ctx, FILE *out, esbx_error_t *err);
void esbx_gateway_reply_report (struct esbx_gateway_ctx *ctx, esbx_gateway_report_fn report);
/* An operation on the object named in the path that answers nothing but
   success: {}.  */
void esbx_gateway_reply_done (struct esbx_gateway_ctx *ctx,
                              int (*op) (esbx_store_t *, const char *, esbx_error_t *));
/* What FD holds (read from offset 0, ESBX_GATEWAY_MAX_FILE_READ bytes at
   most), as CONTENT_TYPE.  */
void esbx_gateway_reply_file (struct esbx_gateway_ctx *ctx, int fd, const char *content_type);

/* Refuse unknown body fields and fields of the wrong type.  TYPES holds one
   letter per allowed field: s string, b bool, a array of strings, o object
   of strings.  */
int esbx_gateway_check_body (struct esbx_gateway_ctx *ctx, const char *const *allowed,
                             const char *types);
/* A NULL-terminated vector (owned) borrowing the strings of a JSON array.  */
char **esbx_gateway_strings (const json_t *arr);
/* 404 unless the session named in the path exists.  */
int esbx_gateway_session_must_exist (struct esbx_gateway_ctx *ctx);

#endif
