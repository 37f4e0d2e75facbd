/* esbx MCP server (docs/ARCHITECTURE.md, "The MCP server"): the Model
 * Context Protocol (JSON-RPC 2.0, revisions 2025-06-18 and 2025-11-25)
 * with the tools an agent needs to work in esbx sessions: make, list,
 * inspect, fork and snapshot them, run commands, read, write, edit, list
 * and delete files, diff, events, publish, rebase, resolve and discard.
 *
 * One library on the floor of the front ends: it calls the lifecycle API
 * (shim/lib/sandbox.h), `esbx exec`'s path (exec_capture.h) and
 * layerstore, never the CLI or the gateway.  Two front ends use it:
 * `esbx mcp` serves it on stdin and stdout (stdio.c), esbxd's gateway at
 * /mcp over Streamable HTTP (volume-plugin/gateway/routes_mcp.c), each
 * telling it through struct esbx_mcp_host what the caller may reach.  */
#ifndef ESBX_MCP_H
#define ESBX_MCP_H

#include "json.h"
#include "layerstore.h"

#include <stdbool.h>
#include <stdint.h>

/* Largest message taken; a longer one is refused whole (stdio reads on to
   its end of line, the gateway's body limit is lower still).  */
#define ESBX_MCP_MAX_MESSAGE JSON_MAX_DOCUMENT
/* Calls one server runs or holds at once; more are refused (busy).  */
#define ESBX_MCP_MAX_CALLS 1024

/* What one tool call is about, for the front end's decision and its
   audit log.  */
struct esbx_mcp_act
{
  const char *tool;
  const char *route;   /* the gateway route that does the same ("session_exec") */
  unsigned scope;      /* ESBX_SCOPE_* the tool needs */
  const char *session; /* the session it acts on, NULL for none */
  const char *project; /* the project it makes a session of, or lists */
  bool content;        /* it reads file content (diff's patch) */
  const char *target;  /* what the call named (a session or project), refused or not */
};

/* The caller a server serves, and what it may reach.  */
struct esbx_mcp_host
{
  esbx_store_t *store;
  const char *transport; /* "stdio", "http": for events */
  unsigned scopes;       /* ESBX_SCOPE_*: the tools listed and callable */
  /* Confined to this session (`esbx mcp --session`, a session-bound
     token): only the tools that make sense for one session, and none acts
     on another.  SESSION_ID (NULL: the session's id when the server is
     made) must stay its id: a session made again under the name is
     another one.  */
  const char *session;
  const char *session_id;
  const char *project; /* confined to this project: its sessions, new ones in it */
  const char *token;   /* the token id the calls are made with, NULL for none */
  uint64_t exec_log_limit;
  /* The front end's decision on ACT once the limits above allow it: true
     allows, else *REASON (owned).  NULL: allowed.  */
  bool (*authorize) (void *data, const struct esbx_mcp_act *act, char **reason);
  /* A session of PROJECT is about to be made with O (a fork: O->network
     NULL): what the caller may give it; *LOCK (-1: none) is closed once it
     is made.  NULL: allowed.  */
  bool (*grant_session) (void *data, const char *project, struct esbx_session_opts *o, int *lock,
                         char **reason);
  /* Whether session_list shows S; NULL: the limits above decide alone.  */
  bool (*sees) (void *data, const struct esbx_session *s);
  /* A tool call ended (ERROR NULL), failed, or was REFUSED before it ran
     (the caller's limits, its scopes, the front end's decision).  */
  void (*called) (void *data, const struct esbx_mcp_act *act, const char *error, bool refused);
  void *data;
};

struct esbx_mcp_server;

/* HOST (copied; its strings must outlive the server).  Fails when the
   session it is confined to does not exist.  */
int esbx_mcp_server_new (const struct esbx_mcp_host *host, struct esbx_mcp_server **out,
                         esbx_error_t *err);
void esbx_mcp_server_free (struct esbx_mcp_server *s);

/* How one request talks back before its answer.  */
struct esbx_mcp_io
{
  /* Send MSG (owned), a notification about this request (progress);
     NULL: such notifications are dropped.  */
  void (*notify) (void *data, json_t *msg);
  void *data;
};

/* Handle the JSON-RPC message MSG: its answer (owned), or NULL when none
   is due (a notification, a response, a cancelled request).  Requests may
   be handled on several threads at once.  */
json_t *esbx_mcp_handle (struct esbx_mcp_server *s, const json_t *msg,
                         const struct esbx_mcp_io *io);
/* The same for the text of a message (LEN bytes).  */
json_t *esbx_mcp_handle_text (struct esbx_mcp_server *s, const char *buf, size_t len,
                              const struct esbx_mcp_io *io);
/* A JSON-RPC error answer to ID (NULL: null).  */
json_t *esbx_mcp_error (const json_t *id, int code, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));
/* End every call in flight, and every one that starts from now on: the
   client is gone.  They still answer (a run what it had of the output).  */
void esbx_mcp_cancel_all (struct esbx_mcp_server *s);
/* Calls in flight now.  */
size_t esbx_mcp_calls (struct esbx_mcp_server *s);
/* Whether V names a protocol revision this server speaks.  */
bool esbx_mcp_version_supported (const char *v);

/* JSON-RPC error codes.  */
#define ESBX_MCP_PARSE_ERROR      -32700
#define ESBX_MCP_INVALID_REQUEST  -32600
#define ESBX_MCP_METHOD_NOT_FOUND -32601
#define ESBX_MCP_INVALID_PARAMS   -32602
#define ESBX_MCP_INTERNAL_ERROR   -32603
#define ESBX_MCP_BUSY             -32000

/* The stdio transport: messages one a line from IN, answers and
   notifications one a line to OUT, until IN ends (the client's way to
   stop it); then the commands still running are ended and every call
   read answers.  Fails only when OUT breaks.  */
int esbx_mcp_serve_stdio (struct esbx_mcp_server *s, int in, int out, esbx_error_t *err);

#endif
