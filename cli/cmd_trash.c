/* esbx trash list | restore ENTRY [--name NEW] | purge ENTRY|--all | ttl [DURATION] */
#include "cli.h"
#include "text.h"
#include "utils.h"

#include <getopt.h>
#include <string.h>

static int
trash_list (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  _cleanup_json_ json_t *arr = NULL;

  /* --json is the global option, read before the verb ran.  */
  if (argc != 2 && !(argc == 3 && strcmp (argv[2], "--json") == 0))
    return cli_usage (err, "trash list: takes no argument");
  if (cli_gateway_mode (cli))
    return cli_gateway_print (cli, "GET", NULL, cli_print_trash, NULL, err, "/v1/trash");
  if (cli_store (cli, err) == NULL)
    return -1;
  arr = esbx_trash_list (cli->store, err);
  if (arr == NULL)
    return -1;
  cli_print_trash (cli, arr);
  return 0;
}

static int
trash_restore (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  static const struct option opts[] = { { "name", required_argument, NULL, 'n' },
                                        { "json", no_argument, NULL, 'J' },
                                        { NULL, 0, NULL, 0 } };
  _cleanup_free_ char *restored = NULL;
  const char *name = NULL;
  int c;

  while ((c = getopt_long (argc - 1, argv + 1, "", opts, NULL)) != -1)
    {
      if (c == 'n')
        name = optarg;
      else if (c != 'J')
        return cli_usage (err, "trash restore: unknown option `%s`", argv[optind]);
    }
  if (optind + 2 != argc)
    return cli_usage (err, "trash restore: expected a trash entry");
  if (cli_gateway_mode (cli))
    {
      _cleanup_json_ json_t *body = json_new (JSON_OBJECT);
      if (name)
        json_set_string (body, "name", name);
      return cli_gateway_print (cli, "POST", body, NULL, "session", err, "/v1/trash/%s/restore",
                                argv[optind + 1]);
    }
  if (cli_store (cli, err) == NULL
      || esbx_trash_restore (cli->store, argv[optind + 1], name, &restored, err) < 0)
    return -1;
  if (cli->json)
    {
      _cleanup_json_ json_t *o = json_new (JSON_OBJECT);
      json_set_string (o, "session", restored);
      cli_print_json (o);
    }
  else
    printf ("%s\n", restored);
  return 0;
}

static int
trash_purge (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  const char *entry = NULL;
  bool all = false;
  int k;

  for (k = 2; k < argc; k++)
    {
      if (strcmp (argv[k], "--all") == 0)
        all = true;
      else if (strcmp (argv[k], "--json") == 0)
        continue;
      else if (argv[k][0] == '-')
        return cli_usage (err, "trash purge: unknown option `%s`", argv[k]);
      else if (entry == NULL)
        entry = argv[k];
      else
        return cli_usage (err, "trash purge: expected one trash entry");
    }
  if (all == (entry != NULL))
    return cli_usage (err, "trash purge: expected a trash entry or --all");
  if (cli_gateway_mode (cli))
    return entry
               ? cli_gateway_print (cli, "DELETE", NULL, cli_print_report, NULL, err,
                                    "/v1/trash/%s", entry)
               : cli_gateway_print (cli, "DELETE", NULL, cli_print_report, NULL, err, "/v1/trash");
  if (cli_store (cli, err) == NULL)
    return -1;
  return esbx_trash_purge (cli->store, entry, stdout, err);
}

static int
trash_ttl (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  _cleanup_free_ char *shown = NULL;
  int64_t seconds;

  if (argc > 3)
    return cli_usage (err, "trash ttl: expected at most one duration");
  if (cli_gateway_mode (cli))
    return cli_usage (err, "trash ttl: a setting of the store: not through the gateway");
  if (argc == 3 && esbx_parse_duration (argv[2], &seconds, err) < 0)
    return -1;
  if (cli_store (cli, err) == NULL)
    return -1;
  if (argc == 3)
    return esbx_trash_set_ttl (cli->store, argv[2], err);
  if (esbx_trash_ttl (cli->store, &seconds, err) < 0)
    return -1;
  shown = esbx_trash_ttl_string (seconds);
  printf ("%s\n", shown);
  return 0;
}

int
cmd_trash (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  if (argc < 2)
    return cli_usage (err, "trash: expected list, restore, purge or ttl");
  if (strcmp (argv[1], "list") == 0)
    return trash_list (cli, argc, argv, err);
  if (strcmp (argv[1], "restore") == 0)
    return trash_restore (cli, argc, argv, err);
  if (strcmp (argv[1], "purge") == 0)
    return trash_purge (cli, argc, argv, err);
  if (strcmp (argv[1], "ttl") == 0)
    return trash_ttl (cli, argc, argv, err);
  return cli_usage (err, "trash: unknown subcommand `%s`", argv[1]);
}
