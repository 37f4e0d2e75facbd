/* esbx rebase S [--restart]
   esbx rebase --show S PATH --base|--ours|--theirs
   esbx rebase --resolved S PATH...  */
#include "cli.h"
#include "sandbox.h"
#include "utils.h"

#include <errno.h>
#include <getopt.h>
#include <string.h>
#include <unistd.h>

/* What the rebase did to the session's processes, on stderr: only when
   commands were ended, or the holder did not come back.  */
static void
print_holder (const json_t *o)
{
  const char *holder = json_get_string (o, "holder");
  bool processes = json_get_bool (o, "processes_stopped", false);

  if (holder == NULL || strcmp (holder, "untouched") == 0)
    return;
  if (strcmp (holder, "restarted") == 0 && !processes)
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
  int ret;

  if (store == NULL)
    return -1;
  ret = esbx_sandbox_rebase (store, session, restart ? ESBX_REBASE_RESTART : 0, &r, &did, err);
  /* A rebase that moved the base says what it did, also when it left
     paths unmerged.  */
  if (ret < 0 && r.layer == NULL)
    return cli_publish_failed (cli, &r);
  {
    _cleanup_json_ json_t *o = esbx_sandbox_rebase_json (&r, did);
    print_rebased (cli, o);
  }
  esbx_publish_result_free (&r);
  return ret;
}

static int
show (struct esbx_cli *cli, const char *session, const char *path, const char *side,
      esbx_error_t *err)
{
  static const char *const names[] = { "base", "ours", "theirs" };
  esbx_store_t *store;
  size_t i;

  for (i = 0; i < 3; i++)
    if (strcmp (side, names[i]) == 0)
      break;
  if (cli_gateway_mode (cli))
    {
      _cleanup_free_ char *data = NULL;
      size_t len;

      if (cli_gateway_raw (cli, &data, &len, err, "/v1/sessions/%s/unmerged?path=%s&side=%s",
                           session, path, side)
          < 0)
        return -1;
      return fwrite (data, 1, len, stdout) == len ? 0 : esbx_make_error (err, errno, "write");
    }
  store = cli_store (cli, err);
  if (store == NULL)
    return -1;
  return esbx_session_unmerged_show (store, session, path, (enum esbx_side)i, STDOUT_FILENO, err);
}

static int
resolved (struct esbx_cli *cli, const char *session, char **paths, esbx_error_t *err)
{
  esbx_store_t *store;

  if (cli_gateway_mode (cli))
    {
      _cleanup_json_ json_t *body = json_new (JSON_OBJECT);
      json_t *arr = json_new (JSON_ARRAY);

      for (char **p = paths; *p; p++)
        json_append (arr, json_new_string (*p));
      json_set (body, "paths", arr);
      return cli_gateway_print (cli, "POST", body, NULL, NULL, err, "/v1/sessions/%s/resolved",
                                session);
    }
  store = cli_store (cli, err);
  if (store == NULL)
    return -1;
  return esbx_session_unmerged_resolve (store, session, paths, err);
}

int
cmd_rebase (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  static const struct option opts[]
      = { { "restart", no_argument, NULL, 'r' }, { "json", no_argument, NULL, 'J' },
          { "show", no_argument, NULL, 'S' },    { "resolved", no_argument, NULL, 'R' },
          { "base", no_argument, NULL, 'b' },    { "ours", no_argument, NULL, 'o' },
          { "theirs", no_argument, NULL, 't' },  { NULL, 0, NULL, 0 } };
  const char *side = NULL;
  bool restart = false, showing = false, resolving = false;
  int c;

  while ((c = getopt_long (argc, argv, "", opts, NULL)) != -1)
    {
      if (c == 'r')
        restart = true;
      else if (c == 'S')
        showing = true;
      else if (c == 'R')
        resolving = true;
      else if (c == 'b' || c == 'o' || c == 't')
        {
          if (side)
            return cli_usage (err, "rebase --show: one of --base, --ours or --theirs");
          side = c == 'b' ? "base" : c == 'o' ? "ours" : "theirs";
        }
      else if (c != 'J')
        return cli_usage (err, "rebase: unknown option `%s`", argv[optind - 1]);
    }
  if (showing && resolving)
    return cli_usage (err, "rebase: --show and --resolved exclude each other");
  if (side && !showing)
    return cli_usage (err, "rebase: --base, --ours and --theirs go with --show");
  if (showing)
    {
      if (side == NULL || optind + 2 != argc)
        return cli_usage (err, "rebase --show: expected a session, a path and one of --base, "
                               "--ours or --theirs");
      return show (cli, argv[optind], argv[optind + 1], side, err);
    }
  if (resolving)
    {
      if (optind + 2 > argc)
        return cli_usage (err, "rebase --resolved: expected a session and at least one path");
      return resolved (cli, argv[optind], argv + optind + 1, err);
    }
  if (optind + 1 != argc)
    return cli_usage (err, "rebase: expected a session name");
  if (cli_gateway_mode (cli))
    {
      _cleanup_json_ json_t *body = json_new (JSON_OBJECT);

      if (restart)
        json_set (body, "restart", json_new_bool (true));
      return cli_gateway_print (cli, "POST", body, print_rebased, NULL, err,
                                "/v1/sessions/%s/rebase", argv[optind]);
    }
  return rebase_local (cli, argv[optind], restart, err);
}
