/* esbx blame PROJECT PATH */
#include "cli.h"
#include "utils.h"

int
cmd_blame (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  struct esbx_layer *l = NULL;
  esbx_store_t *store;

  if (argc != 3)
    return cli_usage (err, "blame: expected PROJECT PATH");
  store = cli_store (cli, err);
  if (store == NULL || esbx_blame (store, argv[1], argv[2], &l, err) < 0)
    return -1;
  {
    _cleanup_json_ json_t *o = cli_layer_summary (l);
    cli_print_blame (cli, o);
  }
  esbx_layer_free (l);
  return 0;
}
