/* esbx gc [--snapshots] */
#include "cli.h"
#include "sandbox.h"

#include <string.h>

int
cmd_gc (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  unsigned int flags = 0;
  esbx_store_t *store;
  int k;

  for (k = 1; k < argc; k++)
    {
      if (strcmp (argv[k], "--snapshots") == 0)
        flags |= ESBX_GC_SNAPSHOTS;
      else if (strcmp (argv[k], "--json") != 0)
        return cli_usage (err, "gc: unknown argument `%s`", argv[k]);
    }
  if (cli_remote_mode (cli) && flags)
    return cli_remote_print (cli, "POST", NULL, cli_print_report, NULL, err, "/v1/gc?snapshots=1");
  if (cli_remote_mode (cli))
    return cli_remote_print (cli, "POST", NULL, cli_print_report, NULL, err, "/v1/gc");
  store = cli_store (cli, err);
  if (store == NULL || esbx_sandbox_gc_flags (store, flags, stdout, err) < 0)
    return -1;
  return 0;
}
