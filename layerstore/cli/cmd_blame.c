/* esbx blame PROJECT PATH */
#include "cli.h"
#include "utils.h"

#include <inttypes.h>

int
cmd_blame (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  struct esbx_layer *l = NULL;
  esbx_store_t *store;
  size_t i;

  if (argc != 3)
    return cli_usage (err, "blame: expected PROJECT PATH");
  store = cli_store (cli, err);
  if (store == NULL || esbx_blame (store, argv[1], argv[2], &l, err) < 0)
    return -1;
  if (cli->json)
    {
      _cleanup_json_ json_t *o = cli_layer_summary (l);
      cli_print_json (o);
    }
  else
    {
      printf ("layer:   %s (%" PRId64 ")\n", l->id, l->index);
      printf ("session: %s\n", l->session ? l->session : "-");
      printf ("labels: ");
      for (i = 0; i < l->labels->n; i++)
        printf (" %s=%s", l->labels->keys[i], l->labels->items[i]->text);
      printf ("\nmessage: %s\n", l->message ? l->message : "");
      printf ("time:    %s\n", l->created ? l->created : "");
    }
  esbx_layer_free (l);
  return 0;
}
