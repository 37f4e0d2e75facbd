/* esbx diff S [--json | --patch] */
#include "cli.h"
#include "utils.h"

#include <getopt.h>
#include <inttypes.h>

int
cmd_diff (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  static const struct option opts[] = { { "json", no_argument, NULL, 'J' },
                                        { "patch", no_argument, NULL, 'p' },
                                        { NULL, 0, NULL, 0 } };
  struct esbx_changeset cs = { 0 };
  esbx_store_t *store;
  bool patch = false;
  size_t i;
  int c;

  while ((c = getopt_long (argc, argv, "p", opts, NULL)) != -1)
    {
      if (c == 'p')
        patch = true;
      else if (c != 'J')
        return cli_usage (err, "diff: unknown option `%s`", argv[optind - 1]);
    }
  if (optind + 1 != argc)
    return cli_usage (err, "diff: expected a session name");
  if (patch && cli->json)
    return cli_usage (err, "diff: --json and --patch exclude each other");
  store = cli_store (cli, err);
  if (store == NULL)
    return -1;
  if (patch)
    return esbx_session_patch (store, argv[optind], stdout, err) < 0 ? -1 : 0;
  if (esbx_session_changes (store, argv[optind], &cs, err) < 0)
    return -1;
  {
    _cleanup_json_ json_t *arr = json_new (JSON_ARRAY);
    for (i = 0; i < cs.n; i++)
      json_append (arr, esbx_change_to_json (&cs.v[i]));
    cli_print_changes (cli, arr);
  }
  esbx_changeset_free (&cs);
  return 0;
}
