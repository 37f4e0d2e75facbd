/* esbx events S [--json] [--follow]: the session's lifecycle and command
   events in order; --follow keeps printing new ones until the session is
   discarded.  */
#include "cli.h"
#include "egress.h"
#include "events.h"
#include "utils.h"

#include <getopt.h>
#include <inttypes.h>
#include <time.h>

#define FOLLOW_INTERVAL_MS 200

struct events_opts
{
  const char *session;
  bool follow;
};

static int
parse_events_opts (int argc, char **argv, struct events_opts *o, esbx_error_t *err)
{
  static const struct option opts[] = {
    { "json", no_argument, NULL, 'J' },
    { "follow", no_argument, NULL, 'f' },
    { NULL, 0, NULL, 0 },
  };
  int c;

  while ((c = getopt_long (argc, argv, "f", opts, NULL)) != -1)
    switch (c)
      {
      case 'J':
        break;
      case 'f':
        o->follow = true;
        break;
      default:
        return cli_usage (err, "events: unknown option `%s`", argv[optind - 1]);
      }
  if (optind + 1 != argc)
    return cli_usage (err, "events: expected one session");
  o->session = argv[optind];
  return 0;
}

static void
wait_for_more (void)
{
  struct timespec ts = { 0, FOLLOW_INTERVAL_MS * 1000000L };

  nanosleep (&ts, NULL);
}

static int
print_event (const json_t *ev, void *data)
{
  const bool *json = data;

  cli_print_event (*json, ev);
  return 0;
}

/* Polls the gateway from the last offset it answered, as embedded mode
   polls the event file.  */
static int
events_remote (struct esbx_cli *cli, const struct events_opts *o, esbx_error_t *err)
{
  int64_t offset = 0;

  for (;;)
    {
      _cleanup_json_ json_t *j = NULL;
      const json_t *evs;
      char off[24];
      size_t i;

      snprintf (off, sizeof off, "%" PRId64, offset);
      if (cli_gateway_json (cli, "GET", NULL, &j, err, "/v1/sessions/%s/events?offset=%s",
                            o->session, off)
          < 0)
        {
          /* The session went away while we followed it: that ends it.  */
          if (o->follow && offset > 0 && esbx_error_exit_status (*err) == ESBX_EXIT_ERROR)
            {
              esbx_error_free (err);
              return 0;
            }
          return -1;
        }
      evs = json_get (j, "events");
      for (i = 0; evs && evs->type == JSON_ARRAY && i < json_len (evs); i++)
        cli_print_event (cli->json, json_at (evs, i));
      json_get_int (j, "offset", &offset);
      fflush (stdout);
      if (!o->follow)
        return 0;
      wait_for_more ();
    }
}

int
cmd_events (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  struct events_opts o = { 0 };
  esbx_store_t *store;
  off_t offset = 0;

  if (parse_events_opts (argc, argv, &o, err) < 0)
    return -1;
  if (cli_gateway_mode (cli))
    return events_remote (cli, &o, err);
  store = cli_store (cli, err);
  if (store == NULL)
    return -1;
  if (!esbx_session_exists (store, o.session))
    return esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0, "session `%s` does not exist",
                                 o.session);
  for (;;)
    {
      /* An egress session's refused attempts are counted by the kernel:
         read now, they become events.  */
      esbx_egress_record_refused (store, o.session);
      if (esbx_events_read (store, o.session, &offset, print_event, &cli->json, err) < 0)
        return o.follow && !esbx_session_exists (store, o.session) ? 0 : -1;
      fflush (stdout);
      if (!o.follow || !esbx_session_exists (store, o.session))
        return 0;
      wait_for_more ();
    }
}
