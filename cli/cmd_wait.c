/* esbx wait PROJECT [--after LAYER] [--timeout DURATION]: block until the
   head moves, then print it.  */
#include "cli.h"
#include "text.h"
#include "utils.h"

#include <getopt.h>
#include <inttypes.h>

static void
print_head (struct esbx_cli *cli, const json_t *o)
{
  if (cli->json)
    cli_print_json (o);
  else
    printf ("%s\n", json_get_string (o, "head") ? json_get_string (o, "head") : "");
}

int
cmd_wait (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  static const struct option opts[] = { { "after", required_argument, NULL, 'a' },
                                        { "timeout", required_argument, NULL, 't' },
                                        { "json", no_argument, NULL, 'J' },
                                        { NULL, 0, NULL, 0 } };
  _cleanup_free_ char *head = NULL, *secs = NULL;
  const char *after = NULL;
  int64_t timeout = 0;
  esbx_store_t *store;
  int c;

  while ((c = getopt_long (argc, argv, "", opts, NULL)) != -1)
    {
      if (c == 'a')
        after = optarg;
      else if (c == 't')
        {
          if (esbx_parse_duration (optarg, &timeout, err) < 0)
            return cli_usage (err, "wait: --timeout `%s`: not a duration", optarg);
        }
      else if (c != 'J')
        return cli_usage (err, "wait: unknown option `%s`", argv[optind - 1]);
    }
  if (optind + 1 != argc)
    return cli_usage (err, "wait: expected a project");
  if (cli_gateway_mode (cli))
    {
      secs = xasprintf ("%" PRId64, timeout);
      return cli_gateway_print (cli, "GET", NULL, print_head, NULL, err,
                                "/v1/projects/%s/wait?after=%s&timeout=%s", argv[optind],
                                after ? after : "head", secs);
    }
  store = cli_store (cli, err);
  if (store == NULL
      || esbx_project_wait (store, argv[optind], after, timeout * 1000, &head, err) < 0)
    return -1;
  {
    _cleanup_json_ json_t *o = json_new (JSON_OBJECT);
    json_set_string (o, "head", head);
    print_head (cli, o);
  }
  return 0;
}
