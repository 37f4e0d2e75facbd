/* esbx remote set|show, and project push|pull (docs/SCALE-OUT.md): the
   store's registry and etcd, and sharing a project through them.  Settings
   of the store itself: not through the gateway.  */
#include "cli.h"
#include "utils.h"

#include <getopt.h>
#include <string.h>

#define REMOTE_SET_USAGE                                                                           \
  "--registry URL --etcd URL [--ca FILE] [--cert FILE --key FILE] [--token-file FILE] "            \
  "[--compression gzip|none]"

static int
remote_set (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  static const struct option opts[] = {
    { "registry", required_argument, NULL, 'r' },    { "etcd", required_argument, NULL, 'e' },
    { "ca", required_argument, NULL, 'a' },          { "cert", required_argument, NULL, 'c' },
    { "key", required_argument, NULL, 'k' },         { "token-file", required_argument, NULL, 't' },
    { "compression", required_argument, NULL, 'z' }, { NULL, 0, NULL, 0 }
  };
  struct esbx_remote_config rc = { 0 };
  esbx_store_t *store;
  int c;

  while ((c = getopt_long (argc, argv, "", opts, NULL)) != -1)
    {
      if (c == 'r')
        rc.registry = optarg;
      else if (c == 'e')
        rc.etcd = optarg;
      else if (c == 'a')
        rc.ca = optarg;
      else if (c == 'c')
        rc.cert = optarg;
      else if (c == 'k')
        rc.key = optarg;
      else if (c == 't')
        rc.token_file = optarg;
      else if (c == 'z')
        rc.compression = optarg;
      else
        return cli_usage (err, "remote set: unknown option `%s`", argv[optind - 1]);
    }
  if (optind != argc || rc.registry == NULL || rc.etcd == NULL)
    return cli_usage (err, "remote set: expected " REMOTE_SET_USAGE);
  store = cli_store (cli, err);
  if (store == NULL || esbx_remote_set (store, &rc, err) < 0)
    return -1;
  return 0;
}

static int
remote_show (struct esbx_cli *cli, esbx_error_t *err)
{
  _cleanup_json_ json_t *j = NULL;
  esbx_store_t *store = cli_store (cli, err);

  if (store == NULL || (j = esbx_remote_show (store, err)) == NULL)
    return -1;
  if (cli->json)
    cli_print_json (j);
  else
    {
      static const char *const keys[]
          = { "registry", "etcd", "compression", "ca", "cert", "key", "token_file" };
      size_t i;

      for (i = 0; i < ARRAY_SIZE (keys); i++)
        if (json_get_string (j, keys[i]))
          printf ("%s %s\n", keys[i], json_get_string (j, keys[i]));
    }
  return 0;
}

int
cmd_remote (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  const char *sub = argc > 1 ? argv[1] : NULL;

  if (cli_gateway_mode (cli))
    return cli_usage (err, "remote: a setting of the store: not through the gateway");
  if (sub && strcmp (sub, "set") == 0)
    return remote_set (cli, argc - 1, argv + 1, err);
  if (sub && strcmp (sub, "show") == 0 && argc == 2)
    return remote_show (cli, err);
  return cli_usage (err, "remote: expected `set " REMOTE_SET_USAGE "` or `show`");
}

int
cmd_project_push (struct esbx_cli *cli, const char *name, esbx_error_t *err)
{
  esbx_store_t *store;

  if (cli_gateway_mode (cli))
    return cli_usage (err, "project push: run it on the host of the store");
  store = cli_store (cli, err);
  if (store == NULL || esbx_project_push (store, name, err) < 0)
    return -1;
  printf ("%s\n", name);
  return 0;
}

int
cmd_project_pull (struct esbx_cli *cli, const char *name, esbx_error_t *err)
{
  esbx_store_t *store;
  size_t fetched = 0;

  if (cli_gateway_mode (cli))
    return cli_usage (err, "project pull: run it on the host of the store");
  store = cli_store (cli, err);
  if (store == NULL || esbx_project_pull (store, name, &fetched, err) < 0)
    return -1;
  printf ("%s: %zu layer%s fetched\n", name, fetched, fetched == 1 ? "" : "s");
  return 0;
}
