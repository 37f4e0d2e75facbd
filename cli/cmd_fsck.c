/* esbx fsck [PROJECT] */
#include "cli.h"

int
cmd_fsck (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  const char *project = argc == 2 ? argv[1] : NULL;
  esbx_store_t *store;

  if (argc > 2 || (project && project[0] == '-'))
    return cli_usage (err, "fsck: expected at most a project name");
  if (cli_gateway_mode (cli) && project)
    return cli_gateway_print (cli, "POST", NULL, cli_print_report, NULL, err, "/v1/fsck?project=%s",
                              project);
  if (cli_gateway_mode (cli))
    return cli_gateway_print (cli, "POST", NULL, cli_print_report, NULL, err, "/v1/fsck");
  store = cli_store (cli, err);
  if (store == NULL || esbx_fsck (store, project, stdout, err) < 0)
    return -1;
  return 0;
}
