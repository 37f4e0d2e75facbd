/* The gateway's routes in one table: what each needs (scope) and is about
   (target), so that gateway.c decides allowed or denied before any handler
   runs (auth.c).  */
#include "routes.h"
#include "routes_egress.h"
#include "routes_exec.h"
#include "routes_files.h"
#include "routes_git.h"
#include "routes_layers.h"
#include "routes_maintenance.h"
#include "routes_mcp.h"
#include "routes_projects.h"
#include "routes_queue.h"
#include "routes_secrets.h"
#include "routes_sessions.h"
#include "routes_snapshots.h"
#include "routes_trash.h"
#include "routes_ui.h"
#include "routes_unmerged.h"
#include "utils.h"

#define M ESBX_SCOPE_MANAGE
#define R ESBX_SCOPE_RUNTIME
#define O ESBX_SCOPE_OBSERVE

const struct esbx_gateway_route esbx_gateway_routes[] = {
  { "GET", "/v1/whoami", "whoami", 0, GATEWAY_TARGET_TOKEN, false, esbx_gateway_whoami, NULL },
  { "GET", "/v1/projects", "project_list", O, GATEWAY_TARGET_LIST, false, esbx_gateway_project_list,
    NULL },
  { "POST", "/v1/projects", "project_create", M, GATEWAY_TARGET_BODY_NAME, true,
    esbx_gateway_project_create, NULL },
  { "DELETE", "/v1/projects/*", "project_rm", M, GATEWAY_TARGET_PROJECT, false,
    esbx_gateway_project_rm, NULL },
  { "POST", "/v1/projects/*/squash", "project_squash", M, GATEWAY_TARGET_PROJECT, false,
    esbx_gateway_project_squash, NULL },
  { "POST", "/v1/projects/*/push-git", "project_push_git", M, GATEWAY_TARGET_PROJECT, true,
    esbx_gateway_project_push_git, NULL },
  { "POST", "/v1/projects/*/pull-git", "project_pull_git", M, GATEWAY_TARGET_PROJECT, true,
    esbx_gateway_project_pull_git, NULL },
  { "GET", "/v1/projects/*/log", "project_log", O, GATEWAY_TARGET_PROJECT, false,
    esbx_gateway_project_log, NULL },
  { "GET", "/v1/projects/*/blame", "project_blame", O, GATEWAY_TARGET_PROJECT, false,
    esbx_gateway_project_blame, NULL },
  { "GET", "/v1/projects/*/show", "project_show", O, GATEWAY_TARGET_PROJECT, false,
    esbx_gateway_project_show, NULL },
  { "GET", "/v1/projects/*/wait", "project_wait", O, GATEWAY_TARGET_PROJECT, false,
    esbx_gateway_project_wait, NULL },
  { "GET", "/v1/projects/*/network", "project_network", O, GATEWAY_TARGET_PROJECT, false,
    esbx_gateway_project_network, NULL },
  { "PUT", "/v1/projects/*/network", "project_network_set", M, GATEWAY_TARGET_PROJECT, true,
    esbx_gateway_project_network_set, NULL },
  /* The dashboard's views (routes_ui.c; its files are served at /ui/).  */
  { "GET", "/v1/ui/swarm", "ui_swarm", O, GATEWAY_TARGET_LIST, false, esbx_gateway_ui_swarm, NULL },
  { "GET", "/v1/ui/stream", "ui_stream", O, GATEWAY_TARGET_LIST, false, esbx_gateway_ui_stream,
    NULL },
  /* The gate and the merge queue (routes_queue.c).  */
  { "GET", "/v1/projects/*/gate", "project_gate", O, GATEWAY_TARGET_PROJECT, false,
    esbx_gateway_gate_get, NULL },
  { "PUT", "/v1/projects/*/gate", "project_gate_set", M, GATEWAY_TARGET_PROJECT, true,
    esbx_gateway_gate_set, NULL },
  { "GET", "/v1/requests", "request_list", O, GATEWAY_TARGET_LIST, false, esbx_gateway_request_list,
    NULL },
  { "GET", "/v1/requests/*", "request_show", O, GATEWAY_TARGET_REQUEST, false,
    esbx_gateway_request_show, NULL },
  { "DELETE", "/v1/requests/*", "request_cancel", M, GATEWAY_TARGET_REQUEST, false,
    esbx_gateway_request_cancel, NULL },
  { "GET", "/v1/requests/*/log", "request_log", O, GATEWAY_TARGET_REQUEST, false,
    esbx_gateway_request_log, NULL },
  { "GET", "/v1/requests/*/file", "request_file", R, GATEWAY_TARGET_REQUEST, false,
    esbx_gateway_request_file, NULL },
  { "POST", "/v1/requests/*/approve", "request_approve", M, GATEWAY_TARGET_REQUEST, true,
    esbx_gateway_request_approve, NULL },
  { "POST", "/v1/requests/*/reject", "request_reject", M, GATEWAY_TARGET_REQUEST, true,
    esbx_gateway_request_reject, NULL },
  { "GET", "/v1/sessions", "session_list", O, GATEWAY_TARGET_LIST, false, esbx_gateway_session_list,
    NULL },
  { "POST", "/v1/sessions", "session_create", M, GATEWAY_TARGET_BODY_PROJECT, true,
    esbx_gateway_session_create, NULL },
  { "GET", "/v1/sessions/*", "session_inspect", O, GATEWAY_TARGET_SESSION, false,
    esbx_gateway_session_inspect, NULL },
  { "DELETE", "/v1/sessions/*", "session_discard", M, GATEWAY_TARGET_SESSION, false,
    esbx_gateway_session_discard, NULL },
  { "GET", "/v1/sessions/*/path", "session_path", O, GATEWAY_TARGET_SESSION, false,
    esbx_gateway_session_path, NULL },
  { "GET", "/v1/sessions/*/diff", "session_diff", O, GATEWAY_TARGET_SESSION, false,
    esbx_gateway_session_diff, "patch" },
  { "GET", "/v1/sessions/*/events", "session_events", O, GATEWAY_TARGET_SESSION, false,
    esbx_gateway_session_events, NULL },
  { "GET", "/v1/sessions/*/egress/check", "egress_check", O, GATEWAY_TARGET_SESSION, false,
    esbx_gateway_egress_check, NULL },
  { "GET", "/v1/sessions/*/ps", "session_ps", O, GATEWAY_TARGET_SESSION, false,
    esbx_gateway_session_ps, NULL },
  { "POST", "/v1/sessions/*/publish", "session_publish", M, GATEWAY_TARGET_SESSION, true,
    esbx_gateway_session_publish, NULL },
  { "POST", "/v1/sessions/*/rebase", "session_rebase", M, GATEWAY_TARGET_SESSION, true,
    esbx_gateway_session_rebase, NULL },
  { "GET", "/v1/sessions/*/unmerged", "session_unmerged", O, GATEWAY_TARGET_SESSION, false,
    esbx_gateway_unmerged_show, NULL },
  { "POST", "/v1/sessions/*/resolved", "session_resolved", M, GATEWAY_TARGET_SESSION, true,
    esbx_gateway_unmerged_resolve, NULL },
  { "POST", "/v1/sessions/*/snapshot", "session_snapshot", M, GATEWAY_TARGET_SESSION, true,
    esbx_gateway_session_snapshot, NULL },
  { "POST", "/v1/sessions/*/fork", "session_fork", M, GATEWAY_TARGET_SESSION, true,
    esbx_gateway_session_fork, NULL },
  { "GET", "/v1/snapshots", "snapshot_list", O, GATEWAY_TARGET_STORE, false,
    esbx_gateway_snapshot_list, NULL },
  { "GET", "/v1/snapshots/*", "snapshot_inspect", O, GATEWAY_TARGET_STORE, false,
    esbx_gateway_snapshot_inspect, NULL },
  { "DELETE", "/v1/snapshots/*", "snapshot_rm", M, GATEWAY_TARGET_STORE, false,
    esbx_gateway_snapshot_rm, NULL },
  /* Names only come out: no route answers a secret's value.  */
  /* A project's secrets for its tokens (?project=P, "project": P), the
     store's for tokens without limits.  */
  { "GET", "/v1/secrets", "secret_list", O, GATEWAY_TARGET_QUERY_PROJECT, false,
    esbx_gateway_secret_list, NULL },
  { "POST", "/v1/secrets", "secret_create", M, GATEWAY_TARGET_BODY_PROJECT, true,
    esbx_gateway_secret_create, NULL },
  { "DELETE", "/v1/secrets/*", "secret_rm", M, GATEWAY_TARGET_QUERY_PROJECT, false,
    esbx_gateway_secret_rm, NULL },
  { "POST", "/v1/sessions/*/stop", "session_stop", R, GATEWAY_TARGET_SESSION, false,
    esbx_gateway_session_stop, NULL },
  { "POST", "/v1/sessions/*/exec", "session_exec", R, GATEWAY_TARGET_SESSION, true,
    esbx_gateway_session_exec, NULL },
  { "GET", "/v1/sessions/*/files", "file_read", R, GATEWAY_TARGET_SESSION, false,
    esbx_gateway_file_read, NULL },
  { "PUT", "/v1/sessions/*/files", "file_write", R, GATEWAY_TARGET_SESSION, false,
    esbx_gateway_file_write, NULL },
  { "GET", "/v1/export", "export", M, GATEWAY_TARGET_QUERY_REF, false, esbx_gateway_export, NULL },
  { "POST", "/v1/fsck", "fsck", M, GATEWAY_TARGET_QUERY_PROJECT, false, esbx_gateway_fsck, NULL },
  { "POST", "/v1/gc", "gc", M, GATEWAY_TARGET_STORE, false, esbx_gateway_gc, NULL },
  { "GET", "/v1/trash", "trash_list", M, GATEWAY_TARGET_STORE, false, esbx_gateway_trash_list,
    NULL },
  { "POST", "/v1/trash/*/restore", "trash_restore", M, GATEWAY_TARGET_STORE, true,
    esbx_gateway_trash_restore, NULL },
  { "DELETE", "/v1/trash", "trash_purge_all", M, GATEWAY_TARGET_STORE, false,
    esbx_gateway_trash_purge, NULL },
  { "DELETE", "/v1/trash/*", "trash_purge", M, GATEWAY_TARGET_STORE, false,
    esbx_gateway_trash_purge, NULL },
  /* The MCP server: any valid token; each tool call is decided as the
     route of the same act above (routes_mcp.c).  */
  { "POST", "/mcp", "mcp", 0, GATEWAY_TARGET_TOKEN, false, esbx_gateway_mcp_post, NULL },
  { "DELETE", "/mcp", "mcp_end", 0, GATEWAY_TARGET_TOKEN, false, esbx_gateway_mcp_delete, NULL },
};
const size_t esbx_gateway_n_routes = ARRAY_SIZE (esbx_gateway_routes);
