/* esbx gc [--snapshots] [--cache] [--progress | --quiet] */
#include "cli.h"
#include "sandbox.h"
#include "utils.h"

#include <getopt.h>

/* Through the gateway: with progress shown, the gateway streams its
   reports before the report of what gc removed (?progress=1).  */
static int
gc_remote (struct esbx_cli *cli, unsigned int flags, esbx_error_t *err)
{
  _cleanup_json_ json_t *result = NULL;
  const bool snaps = flags & ESBX_GC_SNAPSHOTS, cache = flags & ESBX_GC_CACHE;

  /* The query in the format itself: arguments are percent-encoded.  */
  if (esbx_progress_get () == NULL)
    return cli_gateway_print (cli, "POST", NULL, cli_print_report, NULL, err,
                              snaps ? (cache ? "/v1/gc?snapshots=1&cache=1" : "/v1/gc?snapshots=1")
                                    : (cache ? "/v1/gc?cache=1" : "/v1/gc"));
  if (cli_gateway_progress (cli, "POST", NULL, &result, err,
                            snaps ? (cache ? "/v1/gc?progress=1&snapshots=1&cache=1"
                                           : "/v1/gc?progress=1&snapshots=1")
                                  : (cache ? "/v1/gc?progress=1&cache=1" : "/v1/gc?progress=1"))
      < 0)
    return -1;
  cli_print_report (cli, result);
  return 0;
}

int
cmd_gc (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  static const struct option opts[] = { { "json", no_argument, NULL, 'J' },
                                        { "snapshots", no_argument, NULL, 'S' },
                                        { "cache", no_argument, NULL, 'C' },
                                        CLI_PROGRESS_OPTIONS,
                                        { NULL, 0, NULL, 0 } };
  unsigned int flags = 0;
  esbx_store_t *store;
  int c;

  while ((c = getopt_long (argc, argv, "", opts, NULL)) != -1)
    {
      if (c == 'S')
        flags |= ESBX_GC_SNAPSHOTS;
      else if (c == 'C')
        flags |= ESBX_GC_CACHE;
      else if (c != 'J' && !cli_progress_option (cli, c))
        return cli_usage (err, "gc: unknown option `%s`", argv[optind - 1]);
    }
  if (optind != argc)
    return cli_usage (err, "gc: takes no argument");
  /* What gc removes is reported on stdout as it goes.  */
  cli_progress_start (cli, true);
  if (cli_gateway_mode (cli))
    return gc_remote (cli, flags, err);
  store = cli_store (cli, err);
  if (store == NULL || esbx_sandbox_gc_flags (store, flags, stdout, err) < 0)
    return -1;
  return 0;
}
