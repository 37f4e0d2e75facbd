/* esbx CLI: one verb per file (cmd_<verb>.c), dispatched from main.c.  */
#ifndef ESBX_CLI_H
#define ESBX_CLI_H

#include "error.h"
#include "layerstore.h"

#include <stdbool.h>

struct esbx_cli
{
  const char *root; /* --root or $ESBX_ROOT */
  const char *host; /* --host or $ESBX_HOST: gateway mode */
  bool json;        /* --json */
  esbx_store_t *store;
};

/* A verb: returns an exit status >= 0, or < 0 with *err filled.  argv[0] is
   the verb itself.  */
typedef int (*esbx_cmd_fn) (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err);

/* The store, opened on first use.  */
esbx_store_t *cli_store (struct esbx_cli *cli, esbx_error_t *err);
/* A usage error (exit status 2).  */
int cli_usage (esbx_error_t *err, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));
/* Print a JSON document followed by a newline on stdout.  */
void cli_print_json (const json_t *j);

/* A layer's provenance without its change list, for log and blame.  */
json_t *cli_layer_summary (const struct esbx_layer *l);

/* Conflicts of a publish or rebase: stderr lines, or JSON with --json.  */
void cli_print_conflicts (struct esbx_cli *cli, const struct esbx_publish_result *r);

/* Printing from the JSON views (print.c), shared by embedded and remote mode.  */
void cli_print_projects (struct esbx_cli *cli, const json_t *arr);
void cli_print_log (struct esbx_cli *cli, const json_t *arr);
void cli_print_blame (struct esbx_cli *cli, const json_t *layer);
void cli_print_sessions (struct esbx_cli *cli, const json_t *arr);
void cli_print_changes (struct esbx_cli *cli, const json_t *arr);
void cli_print_published (struct esbx_cli *cli, const char *session, const json_t *result);
void cli_print_rebased (struct esbx_cli *cli, const json_t *result);
void cli_print_ps (struct esbx_cli *cli, const json_t *arr);
void cli_print_event (bool json, const json_t *event);

/* Remote mode (remote.c): run the verb through the gateway at cli->host.  */
int cli_remote (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err);

int cmd_project (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err);
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
int cmd_events (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err);
int cmd_token (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err);

#endif
