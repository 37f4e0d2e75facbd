/* esbx fsck [PROJECT] */
#include "cli.h"

int
cmd_fsck (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  esbx_store_t *store;

  if (argc > 2 || (argc == 2 && argv[1][0] == '-'))
    return cli_usage (err, "fsck: expected at most a project name");
  store = cli_store (cli, err);
  if (store == NULL || esbx_fsck (store, argc == 2 ? argv[1] : NULL, stdout, err) < 0)
    return -1;
  return 0;
}
