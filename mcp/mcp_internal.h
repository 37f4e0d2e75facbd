/* The MCP server's parts (mcp.h).  Files, bottom to top: call.c (one tool
   call: its arguments and its result), schema.c (arguments checked against
   a tool's input schema), tools_session.c, tools_files.c, tools_run.c (the
   tools), tools.c (the table, confinement, events), server.c (JSON-RPC and
   the lifecycle), stdio.c (the stdio transport).  */
#ifndef ESBX_MCP_MCP_INTERNAL_H
#define ESBX_MCP_MCP_INTERNAL_H

#include "mcp.h"

#include <pthread.h>
#include <stdbool.h>

struct esbx_mcp_server
{
  struct esbx_mcp_host host;
  char *session_id;           /* of host.session, owned */
  struct mcp_tool_def *tools; /* parsed schemas, one per tool of the table */
  pthread_mutex_t lock;       /* the fields below */
  bool initialized;
  char *protocol;
  int log_level;
  struct mcp_inflight *calls;
  size_t n_calls;
  bool ending; /* esbx_mcp_cancel_all: calls still to start end at once */
};

/* One tool call.  */
struct mcp_call
{
  struct esbx_mcp_server *srv;
  esbx_store_t *store;
  const json_t *args;           /* an object, checked against the input schema */
  const char *session;          /* session tools: the session it acts on */
  int cancel_fd;                /* readable once the call is cancelled */
  const json_t *progress_token; /* NULL: the client wants no progress */
  const struct esbx_mcp_io *io;

  /* The result: STRUCTURED (matching the output schema) and TEXT, both
     owned; IS_ERROR with them for a failure that carries data (a publish
     refused for conflicts).  */
  json_t *structured;
  char *text;
  bool is_error;
};

typedef int (*mcp_tool_fn) (struct mcp_call *c, esbx_error_t *err);

/* call.c */
const char *mcp_arg_string (const struct mcp_call *c, const char *key);
bool mcp_arg_bool (const struct mcp_call *c, const char *key, bool dflt);
int64_t mcp_arg_int (const struct mcp_call *c, const char *key, int64_t dflt);
/* The strings of an array argument, NULL-terminated (borrowed strings).  */
char **mcp_arg_strings (const struct mcp_call *c, const char *key);
/* The members of an object argument as "K=V" (owned).  */
char **mcp_arg_pairs (const struct mcp_call *c, const char *key);
/* The result: STRUCTURED (owned), and its serialization as the text.  */
void mcp_result (struct mcp_call *c, json_t *structured);
void mcp_result_text (struct mcp_call *c, json_t *structured, char *text);
json_t *mcp_number (double v);

/* schema.c: ARGS against SCHEMA (a tool's inputSchema); a usage error
   naming the argument.  */
int mcp_schema_check (const json_t *schema, const json_t *args, esbx_error_t *err);

/* The tools (tools_*.c).  */
int mcp_tool_session_create (struct mcp_call *c, esbx_error_t *err);
int mcp_tool_session_list (struct mcp_call *c, esbx_error_t *err);
int mcp_tool_session_inspect (struct mcp_call *c, esbx_error_t *err);
int mcp_tool_session_fork (struct mcp_call *c, esbx_error_t *err);
int mcp_tool_session_snapshot (struct mcp_call *c, esbx_error_t *err);
int mcp_tool_diff (struct mcp_call *c, esbx_error_t *err);
int mcp_tool_events (struct mcp_call *c, esbx_error_t *err);
int mcp_tool_publish (struct mcp_call *c, esbx_error_t *err);
int mcp_tool_rebase (struct mcp_call *c, esbx_error_t *err);
int mcp_tool_resolve (struct mcp_call *c, esbx_error_t *err);
int mcp_tool_discard (struct mcp_call *c, esbx_error_t *err);
int mcp_tool_file_read (struct mcp_call *c, esbx_error_t *err);
int mcp_tool_file_write (struct mcp_call *c, esbx_error_t *err);
int mcp_tool_file_edit (struct mcp_call *c, esbx_error_t *err);
int mcp_tool_file_list (struct mcp_call *c, esbx_error_t *err);
int mcp_tool_file_delete (struct mcp_call *c, esbx_error_t *err);
int mcp_tool_run (struct mcp_call *c, esbx_error_t *err);

/* Bounds of the file tools.  */
#define MCP_MAX_FILE       (4u << 20) /* bytes file_read answers, file_write takes */
#define MCP_MAX_LIST       2000       /* entries of one file_list */
#define MCP_MAX_DEPTH      8          /* file_list's depth */
#define MCP_MAX_PATCH      (4u << 20) /* bytes of diff's patch */
#define MCP_MAX_EVENTS     500        /* events of one answer */
#define MCP_DEFAULT_OUTPUT (64u << 10)
#define MCP_MAX_OUTPUT     (1u << 20) /* bytes of each stream run answers */

/* tools.c: the table.  */
struct mcp_tool_def
{
  const char *name;
  json_t *input_schema;
  json_t *output_schema;
};
void mcp_tools_load (struct esbx_mcp_server *s);
void mcp_tools_free (struct esbx_mcp_server *s);
/* tools/list's answer for this server's caller.  */
json_t *mcp_tools_list (struct esbx_mcp_server *s);
/* tools/call of NAME: the CallToolResult, or NULL with *CODE and *MSG
   (owned) for a protocol error (an unknown tool).  */
json_t *mcp_tools_call (struct esbx_mcp_server *s, const char *name, const json_t *args,
                        const json_t *progress_token, int cancel_fd, const struct esbx_mcp_io *io,
                        int *code, char **msg);

#endif
