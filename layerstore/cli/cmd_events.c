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

static void
print_value (const json_t *v)
{
  _cleanup_free_ char *s = NULL;

  if (v->type == JSON_STRING)
    fputs (v->text, stdout);
  else
    {
      s = json_serialize (v, false, NULL);
      fputs (s, stdout);
    }
}

static void
print_argv (const json_t *argv)
{
  size_t i;

  for (i = 0; argv && argv->type == JSON_ARRAY && i < argv->n; i++)
    {
      if (i)
        putchar (' ');
      print_value (argv->items[i]);
    }
}

static int
print_event (const json_t *ev, void *data)
{
  const bool *json = data;
  const char *type = json_get_string (ev, "type");
  size_t i;

  if (*json)
    {
      _cleanup_free_ char *s = json_serialize (ev, false, NULL);
      printf ("%s\n", s);
      return 0;
    }
  printf ("%s %s", json_get_string (ev, "time") ? json_get_string (ev, "time") : "-",
          type ? type : "-");
  for (i = 0; i < ev->n; i++)
    {
      const char *k = ev->keys[i];

      if (strcmp (k, "time") == 0 || strcmp (k, "type") == 0 || strcmp (k, "argv") == 0)
        continue;
      printf (" %s=", k);
      print_value (ev->items[i]);
    }
  if (json_get (ev, "argv"))
    {
      fputs (" -- ", stdout);
      print_argv (json_get (ev, "argv"));
    }
  putchar ('\n');
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
