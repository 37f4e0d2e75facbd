/* esbx rebase S [--restart] */
#include "cli.h"
#include "sandbox.h"
#include "utils.h"

#include <getopt.h>
#include <string.h>

/* What the rebase did to the session's processes, on stderr.  */
static void
print_holder (const json_t *o)
{
  const char *holder = json_get_string (o, "holder");
  bool processes = json_get_bool (o, "processes_stopped", false);

  if (holder == NULL || strcmp (holder, "untouched") == 0)
    return;
  fprintf (stderr, "rebase: stopped the session's holder%s; %s\n",
           processes ? " and its processes" : "",
           strcmp (holder, "restarted") == 0 ? "a new one runs" : "it did not start again");
}

static void
print_rebased (struct esbx_cli *cli, const json_t *o)
{
  cli_print_rebased (cli, o);
  if (!cli->json)
    print_holder (o);
}

static int
rebase_local (struct esbx_cli *cli, const char *session, bool restart, esbx_error_t *err)
{
  struct esbx_publish_result r = { 0 };
  esbx_store_t *store = cli_store (cli, err);
  unsigned int did = 0;

  if (store == NULL)
    return -1;
  if (esbx_sandbox_rebase (store, session, restart ? ESBX_REBASE_RESTART : 0, &r, &did, err) < 0)
    return cli_publish_failed (cli, &r);
  {
    _cleanup_json_ json_t *o = esbx_sandbox_rebase_json (&r, did);
    print_rebased (cli, o);
  }
  esbx_publish_result_free (&r);
  return 0;
}

int
cmd_rebase (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  static const struct option opts[] = { { "restart", no_argument, NULL, 'r' },
                                        { "json", no_argument, NULL, 'J' },
                                        { NULL, 0, NULL, 0 } };
  bool restart = false;
  int c;

  while ((c = getopt_long (argc, argv, "", opts, NULL)) != -1)
    {
      if (c == 'r')
        restart = true;
      else if (c != 'J')
        return cli_usage (err, "rebase: unknown option `%s`", argv[optind - 1]);
    }
  if (optind + 1 != argc)
    return cli_usage (err, "rebase: expected a session name");
  if (cli_remote_mode (cli))
    {
      _cleanup_json_ json_t *body = json_new (JSON_OBJECT);

      if (restart)
        json_set (body, "restart", json_new_bool (true));
      return cli_remote_print (cli, "POST", body, print_rebased, NULL, err,
                               "/v1/sessions/%s/rebase", argv[optind]);
    }
  return rebase_local (cli, argv[optind], restart, err);
}
