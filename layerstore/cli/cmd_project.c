/* esbx project create|list|log|rm|squash */
#include "cli.h"
#include "utils.h"

#include <getopt.h>
#include <inttypes.h>
#include <string.h>

static int
project_create (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  static const struct option opts[] = { { "from", required_argument, NULL, 'f' },
                                        { "json", no_argument, NULL, 'J' },
                                        { NULL, 0, NULL, 0 } };
  const char *from = NULL;
  esbx_store_t *store;
  int c;

  while ((c = getopt_long (argc, argv, "f:", opts, NULL)) != -1)
    {
      if (c == 'f')
        from = optarg;
      else if (c != 'J')
        return cli_usage (err, "project create: unknown option `%s`", argv[optind - 1]);
    }
  if (optind + 1 != argc)
    return cli_usage (err, "project create: expected NAME");
  store = cli_store (cli, err);
  if (store == NULL || esbx_project_create (store, argv[optind], from, err) < 0)
    return -1;
  printf ("%s\n", argv[optind]);
  return 0;
}

static int
project_list (struct esbx_cli *cli, esbx_error_t *err)
{
  esbx_store_t *store = cli_store (cli, err);
  _cleanup_strv_ char **names = NULL;
  _cleanup_json_ json_t *arr = json_new (JSON_ARRAY);
  size_t i;

  if (store == NULL || (names = esbx_project_list (store, err)) == NULL)
    return -1;
  for (i = 0; names[i]; i++)
    {
      _cleanup_strv_ char **ids = NULL;
      size_t n;
      json_t *o;

      if (esbx_project_stack (store, names[i], &ids, &n, err) < 0)
        return -1;
      o = json_new (JSON_OBJECT);
      json_set_string (o, "name", names[i]);
      json_set_int (o, "layers", (int64_t)n);
      json_set_string (o, "head", ids[n - 1]);
      json_append (arr, o);
    }
  cli_print_projects (cli, arr);
  return 0;
}

json_t *
cli_layer_summary (const struct esbx_layer *l)
{
  return esbx_layer_summary_json (l);
}

static int
project_log (struct esbx_cli *cli, const char *name, esbx_error_t *err)
{
  esbx_store_t *store = cli_store (cli, err);
  _cleanup_strv_ char **ids = NULL;
  _cleanup_json_ json_t *arr = json_new (JSON_ARRAY);
  size_t n, i;

  if (store == NULL || esbx_project_stack (store, name, &ids, &n, err) < 0)
    return -1;
  /* Newest first, as git log.  */
  for (i = n; i > 0; i--)
    {
      struct esbx_layer *l = NULL;

      if (esbx_layer_load (store, name, ids[i - 1], &l, err) < 0)
        return -1;
      json_append (arr, cli_layer_summary (l));
      esbx_layer_free (l);
    }
  cli_print_log (cli, arr);
  return 0;
}

int
cmd_project (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  esbx_store_t *store;
  const char *sub = argc > 1 ? argv[1] : NULL;

  if (sub == NULL)
    return cli_usage (err, "project: expected a subcommand");
  if (strcmp (sub, "create") == 0)
    return project_create (cli, argc - 1, argv + 1, err);
  if (strcmp (sub, "list") == 0 || strcmp (sub, "ls") == 0)
    return project_list (cli, err);
  if (argc < 3 || argv[2][0] == '-')
    return cli_usage (err, "project %s: expected NAME", sub);
  if (strcmp (sub, "log") == 0)
    return project_log (cli, argv[2], err);
  store = cli_store (cli, err);
  if (store == NULL)
    return -1;
  if (strcmp (sub, "rm") == 0)
    return esbx_project_rm (store, argv[2], err) < 0 ? -1 : 0;
  if (strcmp (sub, "squash") == 0)
    {
      _cleanup_free_ char *id = NULL;
      if (esbx_project_squash (store, argv[2], &id, err) < 0)
        return -1;
      printf ("%s\n", id);
      return 0;
    }
  return cli_usage (err, "project: unknown subcommand `%s`", sub);
}
