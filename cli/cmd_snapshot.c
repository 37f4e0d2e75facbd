/* esbx snapshot list [--project P] | inspect SNAP | rm SNAP */
#include "cli.h"
#include "text.h"
#include "utils.h"

#include <getopt.h>
#include <string.h>

static int
snapshot_list (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  static const struct option opts[] = { { "project", required_argument, NULL, 'p' },
                                        { "json", no_argument, NULL, 'J' },
                                        { NULL, 0, NULL, 0 } };
  _cleanup_json_ json_t *arr = NULL;
  const char *project = NULL;
  int c;

  while ((c = getopt_long (argc, argv, "p:", opts, NULL)) != -1)
    {
      if (c == 'p')
        project = optarg;
      else if (c != 'J')
        return cli_usage (err, "snapshot list: unknown option `%s`", argv[optind - 1]);
    }
  if (optind != argc)
    return cli_usage (err, "snapshot list: unexpected argument `%s`", argv[optind]);
  if (project && esbx_check_name ("project", project, err) < 0)
    return -1;
  if (cli_gateway_mode (cli) && project)
    return cli_gateway_print (cli, "GET", NULL, cli_print_snapshots, NULL, err,
                              "/v1/snapshots?project=%s", project);
  if (cli_gateway_mode (cli))
    return cli_gateway_print (cli, "GET", NULL, cli_print_snapshots, NULL, err, "/v1/snapshots");
  if (cli_store (cli, err) == NULL || (arr = esbx_snapshot_list (cli->store, project, err)) == NULL)
    return -1;
  cli_print_snapshots (cli, arr);
  return 0;
}

static int
snapshot_inspect (struct esbx_cli *cli, const char *name, esbx_error_t *err)
{
  _cleanup_json_ json_t *j = NULL;

  if (cli_gateway_mode (cli))
    {
      if (cli_gateway_json (cli, "GET", NULL, &j, err, "/v1/snapshots/%s", name) < 0)
        return -1;
    }
  else if (cli_store (cli, err) == NULL
           || (j = esbx_snapshot_inspect (cli->store, name, err)) == NULL)
    return -1;
  cli_print_json (j);
  return 0;
}

static int
snapshot_rm (struct esbx_cli *cli, const char *name, esbx_error_t *err)
{
  if (cli_gateway_mode (cli))
    return cli_gateway_print (cli, "DELETE", NULL, NULL, NULL, err, "/v1/snapshots/%s", name);
  if (cli_store (cli, err) == NULL || esbx_snapshot_rm (cli->store, name, err) < 0)
    return -1;
  return 0;
}

int
cmd_snapshot (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  const char *sub = argc > 1 ? argv[1] : NULL;

  if (sub == NULL)
    return cli_usage (err, "snapshot: expected list, inspect or rm");
  if (strcmp (sub, "list") == 0 || strcmp (sub, "ls") == 0)
    return snapshot_list (cli, argc - 1, argv + 1, err);
  if (strcmp (sub, "inspect") != 0 && strcmp (sub, "rm") != 0)
    return cli_usage (err, "snapshot: unknown subcommand `%s`", sub);
  if (argc != 3 || argv[2][0] == '-')
    return cli_usage (err, "snapshot %s: expected one snapshot name", sub);
  if (esbx_check_name ("snapshot", argv[2], err) < 0)
    return -1;
  if (strcmp (sub, "inspect") == 0)
    return snapshot_inspect (cli, argv[2], err);
  return snapshot_rm (cli, argv[2], err);
}
