/* esbx discard S */
#include "cli.h"
#include "sandbox.h"

int
cmd_discard (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  const char *session;
  esbx_store_t *store;

  if (cli_parse_session (argc, argv, "expected a session name", &session, err) < 0)
    return -1;
  if (cli_remote_mode (cli))
    return cli_remote_print (cli, "DELETE", NULL, NULL, NULL, err, "/v1/sessions/%s", session);
  store = cli_store (cli, err);
  if (store == NULL || esbx_sandbox_discard (store, session, err) < 0)
    return -1;
  return 0;
}
