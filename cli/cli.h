/* esbx CLI: one verb per file (cmd_<verb>.c), dispatched from main.c.  A
   verb parses its arguments once, then runs on the store (embedded mode)
   or as a request to the gateway (gateway mode, --host), so that both modes
   take the same options and refuse bad ones with the same errors.  */
#ifndef ESBX_CLI_H
#define ESBX_CLI_H

#include "error.h"
#include "layerstore.h"

#include <stdbool.h>

enum cli_progress_mode
{
  CLI_PROGRESS_AUTO, /* when stderr is a terminal */
  CLI_PROGRESS_ON,   /* --progress */
  CLI_PROGRESS_OFF,  /* --quiet */
};

struct esbx_cli
{
  const char *root; /* --root or $ESBX_ROOT */
  const char *host; /* --host or $ESBX_HOST: gateway mode */
  const char *ca;   /* --ca or $ESBX_CA: the CA of an https:// gateway */
  bool json;        /* --json */
  enum cli_progress_mode progress;
  esbx_store_t *store;
};

/* A verb: returns an exit status >= 0, or < 0 with *err filled.  argv[0] is
   the verb itself.  */
typedef int (*esbx_cmd_fn) (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err);

/* The store, opened on first use.  */
esbx_store_t *cli_store (struct esbx_cli *cli, esbx_error_t *err);
/* A usage error (exit status 2).  */
int cli_usage (esbx_error_t *err, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));
/* The arguments of a verb that takes one session and no option but --json
   before it (ps, rebase, discard).  EXPECTED completes "VERB: " when the
   session is missing.  */
int cli_parse_session (int argc, char **argv, const char *expected, const char **session,
                       esbx_error_t *err);
/* env_file.c: the "K=V" strings of `--env-file PATH` (docker's format),
   appended to OUT.  */
struct strv;
int cli_read_env_file (const char *path, struct strv *out, esbx_error_t *err);
/* Print a JSON document followed by a newline on stdout.  */
void cli_print_json (const json_t *j);

/* A publish or rebase that failed: print its conflicts and unmerged paths,
   if any, free R and return -1.  */
int cli_publish_failed (struct esbx_cli *cli, struct esbx_publish_result *r);
/* What a refused publish or rebase says ({"conflicts", "unmerged"}, or a
   rebase's whole view with "base"), from either mode.  */
void cli_print_refused (struct esbx_cli *cli, const json_t *o);

/* Printing from the JSON views (print.c), shared by embedded and gateway mode.  */
/* KEY of O: its string, else DFLT; its integer, else 0.  */
const char *cli_str_or (const json_t *o, const char *key, const char *dflt);
int64_t cli_int_of (const json_t *o, const char *key);
void cli_print_projects (struct esbx_cli *cli, const json_t *arr);
void cli_print_log (struct esbx_cli *cli, const json_t *arr);
void cli_print_blame (struct esbx_cli *cli, const json_t *layer);
void cli_print_sessions (struct esbx_cli *cli, const json_t *arr);
void cli_print_changes (struct esbx_cli *cli, const json_t *arr);
void cli_print_published (struct esbx_cli *cli, const char *session, const json_t *result);
void cli_print_rebased (struct esbx_cli *cli, const json_t *result);
void cli_print_ps (struct esbx_cli *cli, const json_t *arr);
void cli_print_event (bool json, const json_t *event);
void cli_print_report (struct esbx_cli *cli, const json_t *o);
/* `trash list`: ENTRY SESSION PROJECT BASE CHANGES SIZE DELETED EXPIRES.  */
void cli_print_trash (struct esbx_cli *cli, const json_t *arr);
/* `snapshot list`: NAME PROJECT BASE SESSION SIZE SESSIONS CREATED.  */
void cli_print_snapshots (struct esbx_cli *cli, const json_t *arr);

/* Progress of long operations on stderr (progress_draw.c).  A verb that runs
   one puts CLI_PROGRESS_OPTIONS in its getopt table, hands each option to
   cli_progress_option (true when it was one of them), and calls
   cli_progress_start before the work; main calls cli_progress_stop.
   STDOUT_BUSY: the verb writes to stdout while it works (a patch, a
   report), so that a terminal there shows no progress unless forced.  */
#define CLI_OPT_PROGRESS 0x100
#define CLI_OPT_QUIET    0x101
#define CLI_PROGRESS_OPTIONS                                                                       \
  { "progress", no_argument, NULL, CLI_OPT_PROGRESS },                                             \
  {                                                                                                \
    "quiet", no_argument, NULL, CLI_OPT_QUIET                                                      \
  }
bool cli_progress_option (struct esbx_cli *cli, int c);
void cli_progress_start (struct esbx_cli *cli, bool stdout_busy);
void cli_progress_stop (void);

/* Gateway mode (gateway_client.c): requests to the gateway at cli->host.  Each goes
   to the path FMT, whose only conversions are %s: each is replaced by its
   argument, percent-encoded.  */
static inline bool
cli_gateway_mode (const struct esbx_cli *cli)
{
  return cli->host && cli->host[0];
}
/* One request (BODY NULL: none) whose answer is a JSON document, in *OUT.
   An error answer fails with the gateway's message and exit class, after
   printing the conflicts it carries.  */
int cli_gateway_json (struct esbx_cli *cli, const char *method, const json_t *body, json_t **out,
                      esbx_error_t *err, const char *fmt, ...)
    __attribute__ ((format (printf, 6, 7)));
/* The same, handing the answer to PRINT, or printing its string KEY on a
   line of its own (both NULL: printing nothing).  */
int cli_gateway_print (struct esbx_cli *cli, const char *method, const json_t *body,
                       void (*print) (struct esbx_cli *, const json_t *), const char *key,
                       esbx_error_t *err, const char *fmt, ...)
    __attribute__ ((format (printf, 7, 8)));
/* A GET whose answer is raw bytes (a patch, an archive): *DATA is owned
   and NUL-terminated.  */
int cli_gateway_raw (struct esbx_cli *cli, char **data, size_t *len, esbx_error_t *err,
                     const char *fmt, ...) __attribute__ ((format (printf, 5, 6)));
/* A request whose answer is a progress stream (the path asks for
   ?progress=1; volume-plugin/gateway/progress_stream.h): its reports are
   drawn on this thread's progress sink as local ones are (progress_draw.c), its
   result goes to *RESULT (owned), and what follows the result to FILE ("-":
   stdout; NULL: nothing may follow), opened only once the result has come
   and removed when the stream breaks off.  */
int cli_gateway_progress (struct esbx_cli *cli, const char *method, const char *file,
                          json_t **result, esbx_error_t *err, const char *fmt, ...)
    __attribute__ ((format (printf, 6, 7)));
/* Run BODY (the exec request) in SESSION and relay the command's output
   to stdout and stderr as it comes; returns its exit status.  */
int cli_gateway_exec (struct esbx_cli *cli, const char *session, json_t *body, esbx_error_t *err);

/* publish of a gated project: the request is filed, not landed.  */
#define CLI_EXIT_QUEUED 5
/* The merge queue's requests (print_queue.c).  */
bool cli_request_final (const json_t *rec);
/* What `publish --wait` ends with: the layer (0), or the rejection as an
   error of its kind.  */
int cli_request_outcome (struct esbx_cli *cli, const char *session, const json_t *rec,
                         esbx_error_t *err);
/* ID PROJECT SESSION STATE APPROVALS RUNS FILED MESSAGE.  */
void cli_print_requests (struct esbx_cli *cli, const json_t *arr);
void cli_print_request (struct esbx_cli *cli, const json_t *rec);
void cli_print_gate (struct esbx_cli *cli, const json_t *gate);

/* cmd_queue.c, shared with cmd_review.c: the list (ONLY_STATE: those in
   that state), one request, and approve|reject|cancel as the caller.  */
int cli_queue_list (struct esbx_cli *cli, int argc, char **argv, const char *only_state,
                    esbx_error_t *err);
int cli_queue_show (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err);
int cli_request_act (struct esbx_cli *cli, const char *verb, const char *id, const char *message,
                     esbx_error_t *err);
int cmd_queue (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err);
int cmd_review (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err);
int cmd_project (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err);
/* project_gate.c: `project gate NAME [...]`.  */
int cli_project_gate (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err);
/* cmd_remote.c: `remote set|show`, and `project push|pull NAME`.  */
int cmd_remote (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err);
int cmd_project_push (struct esbx_cli *cli, const char *name, esbx_error_t *err);
int cmd_project_pull (struct esbx_cli *cli, const char *name, esbx_error_t *err);
int cmd_session (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err);
int cmd_blame (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err);
int cmd_diff (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err);
int cmd_publish (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err);
int cmd_rebase (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err);
int cmd_discard (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err);
int cmd_export (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err);
int cmd_fsck (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err);
int cmd_gc (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err);
int cmd_exec (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err);
int cmd_ps (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err);
int cmd_mcp (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err);
int cmd_show (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err);
int cmd_wait (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err);
int cmd_events (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err);
int cmd_egress (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err);
int cmd_token (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err);
int cmd_snapshot (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err);
int cmd_trash (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err);
int cmd_secret (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err);

#endif
