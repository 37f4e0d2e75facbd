/* esbx diff S [--json | --patch] [--ignored | --include-ignored] [--progress | --quiet] */
#include "cli.h"
#include "secret_redact.h"
#include "utils.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>

struct diff_opts
{
  const char *session;
  bool patch;
  bool ignored;         /* list what the ignore rules leave out, only that */
  bool include_ignored; /* list everything, as publish --include-ignored */
};

static int
parse_diff_opts (struct esbx_cli *cli, int argc, char **argv, struct diff_opts *o,
                 esbx_error_t *err)
{
  static const struct option opts[] = { { "json", no_argument, NULL, 'J' },
                                        { "patch", no_argument, NULL, 'p' },
                                        { "ignored", no_argument, NULL, 'i' },
                                        { "include-ignored", no_argument, NULL, 'I' },
                                        CLI_PROGRESS_OPTIONS,
                                        { NULL, 0, NULL, 0 } };
  int c;

  while ((c = getopt_long (argc, argv, "p", opts, NULL)) != -1)
    {
      if (c == 'p')
        o->patch = true;
      else if (c == 'i')
        o->ignored = true;
      else if (c == 'I')
        o->include_ignored = true;
      else if (c != 'J' && !cli_progress_option (cli, c))
        return cli_usage (err, "diff: unknown option `%s`", argv[optind - 1]);
    }
  if (optind + 1 != argc)
    return cli_usage (err, "diff: expected a session name");
  if (o->patch && cli->json)
    return cli_usage (err, "diff: --json and --patch exclude each other");
  if (o->ignored && o->include_ignored)
    return cli_usage (err, "diff: --ignored and --include-ignored exclude each other");
  if (o->patch && (o->ignored || o->include_ignored))
    return cli_usage (err, "diff: --patch shows the changes publish carries: no --ignored");
  o->session = argv[optind];
  return 0;
}

static int
patch_remote (struct esbx_cli *cli, const char *session, esbx_error_t *err)
{
  _cleanup_free_ char *patch = NULL;
  size_t len;

  if (cli_gateway_raw (cli, &patch, &len, err, "/v1/sessions/%s/diff?patch=1", session) < 0)
    return -1;
  fwrite (patch, 1, len, stdout);
  return 0;
}

/* A reader that stops early (`esbx diff --patch S | head`) is no error:
   end the way diff(1) and git do, killed by SIGPIPE (exit status 141 in
   the shell), with no message.  */
static int
patch_local (esbx_store_t *store, const char *session, esbx_error_t *err)
{
  if (esbx_session_patch (store, session, stdout, err) == 0)
    return 0;
  if ((*err)->status != EPIPE)
    return -1;
  esbx_error_free (err);
  signal (SIGPIPE, SIG_DFL);
  raise (SIGPIPE);
  return 0; /* SIGPIPE was blocked: a quiet success then */
}

int
cmd_diff (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  struct diff_opts o = { 0 };
  struct esbx_changeset cs = { 0 }, ignored = { 0 };
  esbx_store_t *store;

  if (parse_diff_opts (cli, argc, argv, &o, err) < 0)
    return -1;
  if (cli_gateway_mode (cli) && o.patch)
    return patch_remote (cli, o.session, err);
  /* The query is literal: every %s argument of a remote URL is escaped.  */
  if (cli_gateway_mode (cli) && o.ignored)
    return cli_gateway_print (cli, "GET", NULL, cli_print_changes, NULL, err,
                              "/v1/sessions/%s/diff?ignored=1", o.session);
  if (cli_gateway_mode (cli) && o.include_ignored)
    return cli_gateway_print (cli, "GET", NULL, cli_print_changes, NULL, err,
                              "/v1/sessions/%s/diff?include_ignored=1", o.session);
  if (cli_gateway_mode (cli))
    return cli_gateway_print (cli, "GET", NULL, cli_print_changes, NULL, err,
                              "/v1/sessions/%s/diff", o.session);
  store = cli_store (cli, err);
  if (store == NULL)
    return -1;
  /* The patch goes to stdout as it is made: no line redrawn among it.  */
  if (o.patch)
    {
      cli_progress_start (cli, true);
      return patch_local (store, o.session, err);
    }
  if (esbx_session_diff (store, o.session, o.include_ignored ? ESBX_CHANGES_INCLUDE_IGNORED : 0,
                         &cs, o.ignored ? &ignored : NULL, err)
          < 0
      || esbx_redact_changes (store, o.session, o.ignored ? &ignored : &cs, err) < 0)
    {
      esbx_changeset_free (&cs);
      esbx_changeset_free (&ignored);
      return -1;
    }
  {
    _cleanup_json_ json_t *arr = esbx_changeset_json (o.ignored ? &ignored : &cs);
    cli_print_changes (cli, arr);
  }
  esbx_changeset_free (&cs);
  esbx_changeset_free (&ignored);
  return 0;
}
