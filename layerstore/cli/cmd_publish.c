/* esbx publish S [-m MESSAGE] [--discard] */
#include "cli.h"
#include "sandbox.h"
#include "utils.h"

#include <getopt.h>

/* Shared with rebase: conflicts as text on stderr or JSON on stdout.  */
void
cli_print_conflicts (struct esbx_cli *cli, const struct esbx_publish_result *r)
{
  _cleanup_json_ json_t *o = json_new (JSON_OBJECT);
  json_t *arr = json_new (JSON_ARRAY);
  size_t i;

  for (i = 0; i < r->n_conflicts; i++)
    {
      json_t *c = json_new (JSON_OBJECT);
      json_set_string (c, "path", r->conflicts[i].path);
      json_set_string (c, "layer", r->conflicts[i].layer);
      json_set (c, "session",
                r->conflicts[i].session ? json_new_string (r->conflicts[i].session)
                                        : json_new (JSON_NULL));
      json_append (arr, c);
      if (!cli->json)
        fprintf (stderr, "conflict: %s (layer %s, session %s)\n", r->conflicts[i].path,
                 r->conflicts[i].layer, r->conflicts[i].session ? r->conflicts[i].session : "-");
    }
  json_set (o, "conflicts", arr);
  if (cli->json)
    cli_print_json (o);
}

int
cmd_publish (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  static const struct option opts[] = { { "message", required_argument, NULL, 'm' },
                                        { "discard", no_argument, NULL, 'd' },
                                        { "json", no_argument, NULL, 'J' },
                                        { NULL, 0, NULL, 0 } };
  struct esbx_publish_result r = { 0 };
  const char *message = NULL;
  bool discard = false;
  esbx_store_t *store;
  int c, ret;

  while ((c = getopt_long (argc, argv, "m:", opts, NULL)) != -1)
    {
      if (c == 'm')
        message = optarg;
      else if (c == 'd')
        discard = true;
      else if (c != 'J')
        return cli_usage (err, "publish: unknown option `%s`", argv[optind - 1]);
    }
  if (optind + 1 != argc)
    return cli_usage (err, "publish: expected a session name");
  store = cli_store (cli, err);
  if (store == NULL)
    return -1;
  ret = esbx_session_publish (store, argv[optind], message, &r, err);
  if (ret < 0)
    {
      if (r.n_conflicts)
        cli_print_conflicts (cli, &r);
      esbx_publish_result_free (&r);
      return -1;
    }
  {
    _cleanup_json_ json_t *o = json_new (JSON_OBJECT);
    json_set (o, "layer", r.layer ? json_new_string (r.layer) : json_new (JSON_NULL));
    json_set_int (o, "changes", (int64_t)r.n_changes);
    cli_print_published (cli, argv[optind], o);
  }
  esbx_publish_result_free (&r);
  /* The final publish of a session ends it.  */
  if (discard && esbx_sandbox_discard (store, argv[optind], err) < 0)
    return -1;
  return 0;
}
