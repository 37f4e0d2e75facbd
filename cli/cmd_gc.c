/* esbx gc */
#include "cli.h"
#include "sandbox.h"

int
cmd_gc (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  esbx_store_t *store;

  if (argc != 1)
    return cli_usage (err, "gc: takes no argument");
  if (cli_remote_mode (cli))
    return cli_remote_print (cli, "POST", NULL, cli_print_report, NULL, err, "/v1/gc");
  store = cli_store (cli, err);
  if (store == NULL || esbx_sandbox_gc (store, stdout, err) < 0)
    return -1;
  return 0;
}
