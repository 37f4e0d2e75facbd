/* esbx events S [--json] [--follow]: the session's lifecycle and command
   events in order; --follow keeps printing new ones until the session is
   discarded.  */
#include "cli.h"
#include "events.h"
#include "utils.h"

#include <getopt.h>
#include <string.h>
#include <time.h>

#define FOLLOW_INTERVAL_MS 200

static int
print_event (const json_t *ev, void *data)
{
  const bool *json = data;

  cli_print_event (*json, ev);
  return 0;
}

int
cmd_events (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  static const struct option opts[] = {
    { "json", no_argument, NULL, 'J' },
    { "follow", no_argument, NULL, 'f' },
    { NULL, 0, NULL, 0 },
  };
  bool follow = false;
  esbx_store_t *store;
  off_t offset = 0;
  int c;

  opterr = 0;
  while ((c = getopt_long (argc, argv, "f", opts, NULL)) != -1)
    switch (c)
      {
      case 'J':
        break;
      case 'f':
        follow = true;
        break;
      default:
        return cli_usage (err, "events: unknown option `%s`", argv[optind - 1]);
      }
  if (optind + 1 != argc)
    return cli_usage (err, "events: expected one session");
  store = cli_store (cli, err);
  if (store == NULL)
    return -1;
  if (!esbx_session_exists (store, argv[optind]))
    return esbx_make_error (err, 0, "session `%s` does not exist", argv[optind]);
  for (;;)
    {
      struct timespec ts = { 0, FOLLOW_INTERVAL_MS * 1000000L };

      if (esbx_events_read (store, argv[optind], &offset, print_event, &cli->json, err) < 0)
        return follow && !esbx_session_exists (store, argv[optind]) ? 0 : -1;
      fflush (stdout);
      if (!follow)
        return 0;
      if (!esbx_session_exists (store, argv[optind]))
        return 0;
      nanosleep (&ts, NULL);
    }
}
