/* esbx mcp [--project P] [--session S] [--scope SCOPE[,SCOPE]]

   The MCP server (mcp/mcp.h) on stdin and stdout, for an agent that starts
   it as its tool server.  It acts as the CLI does, as root on this host,
   within what it was given: one session (only the tools that make sense
   for it, none reaching another), or one project's sessions, or the whole
   store; --scope narrows the tools (observe: read-only, runtime: run and
   files, manage: create, publish, discard).  Over the gateway the same
   server answers at /mcp.  */
#include "cli.h"
#include "mcp.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

int
cmd_mcp (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  static const struct option opts[] = {
    { "project", required_argument, NULL, 'p' },
    { "session", required_argument, NULL, 's' },
    { "scope", required_argument, NULL, 'S' },
    { NULL, 0, NULL, 0 },
  };
  struct esbx_mcp_host host = {
    .transport = "stdio",
    .scopes = ESBX_SCOPE_MANAGE | ESBX_SCOPE_RUNTIME | ESBX_SCOPE_OBSERVE,
  };
  struct esbx_mcp_server *srv = NULL;
  struct esbx_session *rec = NULL;
  _cleanup_close_ int out = -1;
  int c, r;

  while ((c = getopt_long (argc, argv, "", opts, NULL)) != -1)
    switch (c)
      {
      case 'p':
        host.project = optarg;
        break;
      case 's':
        host.session = optarg;
        break;
      case 'S':
        if (esbx_token_parse_scopes (optarg, &host.scopes, err) < 0)
          return esbx_error_wrap (err, "mcp: --scope");
        break;
      default:
        return cli_usage (err, "mcp: unknown option `%s`", argv[optind - 1]);
      }
  if (optind < argc)
    return cli_usage (err, "mcp: unexpected `%s`", argv[optind]);
  if (cli_gateway_mode (cli))
    return cli_usage (err, "mcp: with --host, point the agent at the gateway's /mcp with a token "
                           "(README, \"Agents over MCP\")");
  if ((host.store = cli_store (cli, err)) == NULL)
    return -1;
  if (host.project && !esbx_project_exists (host.store, host.project))
    return esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0, "mcp: project `%s` does not exist",
                                 host.project);
  if (host.session && host.project)
    {
      if (esbx_session_load (host.store, host.session, &rec, err) < 0)
        return esbx_error_wrap (err, "mcp");
      r = strcmp (rec->project, host.project);
      esbx_session_free (rec);
      if (r != 0)
        return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                     "mcp: session `%s` is not of project `%s`", host.session,
                                     host.project);
    }
  if (esbx_mcp_server_new (&host, &srv, err) < 0)
    return -1;
  /* A client that closed its end is an error to see (esbx_mcp_serve_stdio
     ends the calls and returns), not a signal that kills the server while
     its commands run.  */
  signal (SIGPIPE, SIG_IGN);
  /* The protocol owns stdout: whatever else would write there (a warning
     of the library) goes to stderr instead.  */
  out = fcntl (STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
  if (out < 0 || dup2 (STDERR_FILENO, STDOUT_FILENO) < 0)
    {
      esbx_mcp_server_free (srv);
      return esbx_make_error (err, errno, "mcp: stdout");
    }
  r = esbx_mcp_serve_stdio (srv, STDIN_FILENO, out, err);
  esbx_mcp_server_free (srv);
  return r < 0 ? -1 : 0;
}
