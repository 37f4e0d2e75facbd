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
  if (cli_gateway_mode (cli))
    return cli_gateway_print (cli, "GET", NULL, cli_print_blame, NULL, err,
                              "/v1/projects/%s/blame?path=%s", argv[1], argv[2]);
  store = cli_store (cli, err);
  if (store == NULL || esbx_blame (store, argv[1], argv[2], &l, err) < 0)
    return -1;
  {
    _cleanup_json_ json_t *o = esbx_layer_summary_json (l);
    cli_print_blame (cli, o);
  }
  esbx_layer_free (l);
  return 0;
}
