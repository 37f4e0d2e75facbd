#include "cli.h"

#include <getopt.h>
#include <string.h>

/* esbx review list [--project P] | show ID [--log] | approve ID [-m TEXT] | reject ID [-m TEXT] */
int
cmd_review (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  static const struct option opts[] = { { "message", required_argument, NULL, 'm' },
                                        { "json", no_argument, NULL, 'J' },
                                        { NULL, 0, NULL, 0 } };
  const char *sub = argc > 1 ? argv[1] : NULL, *message = NULL;
  int c;

  if (sub == NULL)
    return cli_usage (err, "review: expected list, show, approve or reject");
  if (strcmp (sub, "list") == 0)
    return cli_queue_list (cli, argc - 1, argv + 1, "review", err);
  if (strcmp (sub, "show") == 0)
    return cli_queue_show (cli, argc - 1, argv + 1, err);
  if (strcmp (sub, "approve") != 0 && strcmp (sub, "reject") != 0)
    return cli_usage (err, "review: unknown subcommand `%s`", sub);
  argc--, argv++;
  while ((c = getopt_long (argc, argv, "m:", opts, NULL)) != -1)
    {
      if (c == 'm')
        message = optarg;
      else if (c != 'J')
        return cli_usage (err, "review %s: unknown option `%s`", sub, argv[optind - 1]);
    }
  if (optind + 1 != argc)
    return cli_usage (err, "review %s: expected a request id", sub);
  return cli_request_act (cli, sub, argv[optind], message, err);
}
