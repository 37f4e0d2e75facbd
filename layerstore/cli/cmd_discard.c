/* esbx discard S */
#include "cli.h"
#include "sandbox.h"

int
cmd_discard (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  esbx_store_t *store;

  if (argc != 2 || argv[1][0] == '-')
    return cli_usage (err, "discard: expected a session name");
  store = cli_store (cli, err);
  if (store == NULL || esbx_sandbox_discard (store, argv[1], err) < 0)
    return -1;
  return 0;
}
