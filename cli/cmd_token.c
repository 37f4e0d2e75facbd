/* esbx token create --scope SCOPE[,SCOPE] [--project P] [--session S] [--ttl DURATION]
                     [--max-sessions N] [--max-egress N]
   esbx token list | revoke ID

   Tokens are managed on the host only: whoever can write the store is root
   already, and a token must never be able to mint a wider one.  */
#include "cli.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

/* A cap for option OPT: a count from 1 to ESBX_TOKEN_MAX_CAP.  */
static int
parse_cap (const char *opt, const char *s, unsigned *out, esbx_error_t *err)
{
  unsigned long v;
  char *end;

  errno = 0;
  v = strtoul (s, &end, 10);
  if (*s < '0' || *s > '9' || *end != '\0' || errno || v == 0 || v > ESBX_TOKEN_MAX_CAP)
    return cli_usage (err, "token create: %s `%s`: expected a number from 1 to %d", opt, s,
                      ESBX_TOKEN_MAX_CAP);
  *out = (unsigned)v;
  return 0;
}

static int
token_create (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  static const struct option opts[] = { { "scope", required_argument, NULL, 's' },
                                        { "project", required_argument, NULL, 'p' },
                                        { "session", required_argument, NULL, 'S' },
                                        { "ttl", required_argument, NULL, 't' },
                                        { "max-sessions", required_argument, NULL, 'M' },
                                        { "max-egress", required_argument, NULL, 'E' },
                                        { "json", no_argument, NULL, 'J' },
                                        { NULL, 0, NULL, 0 } };
  struct esbx_token_caps caps = { 0 };
  const char *project = NULL, *session = NULL;
  _cleanup_free_ char *secret = NULL;
  struct esbx_token *t = NULL;
  unsigned scopes = 0;
  int64_t ttl = 0;
  esbx_store_t *store;
  int c;

  while ((c = getopt_long (argc, argv, "", opts, NULL)) != -1)
    switch (c)
      {
      case 's':
        if (esbx_token_parse_scopes (optarg, &scopes, err) < 0)
          return -1;
        break;
      case 'p':
        project = optarg;
        break;
      case 'S':
        session = optarg;
        break;
      case 't':
        if (esbx_parse_duration (optarg, &ttl, err) < 0)
          return -1;
        if (ttl == 0)
          return cli_usage (err, "token create: --ttl must be positive");
        break;
      case 'M':
        if (parse_cap ("--max-sessions", optarg, &caps.max_sessions, err) < 0)
          return -1;
        break;
      case 'E':
        if (parse_cap ("--max-egress", optarg, &caps.max_egress, err) < 0)
          return -1;
        break;
      case 'J':
        break;
      default:
        return cli_usage (err, "token create: unknown option `%s`", argv[optind - 1]);
      }
  if (optind != argc)
    return cli_usage (err, "token create: unexpected argument `%s`", argv[optind]);
  if (scopes == 0)
    return cli_usage (err, "token create: --scope is required");
  store = cli_store (cli, err);
  if (store == NULL
      || esbx_token_create (store, scopes, project, session, ttl, &caps, &secret, &t, err) < 0)
    return -1;
  if (cli->json)
    {
      _cleanup_json_ json_t *o = esbx_token_to_json (t);
      json_set_string (o, "token", secret);
      cli_print_json (o);
    }
  else
    {
      printf ("%s\n", secret);
      fprintf (stderr, "esbx: token `%s` created; the secret is shown only once\n", t->id);
    }
  esbx_token_free (t);
  return 0;
}

static int
token_list (struct esbx_cli *cli, esbx_error_t *err)
{
  _cleanup_json_ json_t *arr = json_new (JSON_ARRAY);
  struct esbx_token **v = NULL;
  esbx_store_t *store;
  size_t n = 0, i;

  store = cli_store (cli, err);
  if (store == NULL || esbx_token_list (store, &v, &n, err) < 0)
    return -1;
  if (!cli->json)
    printf ("%-12s  %-22s  %-16s  %-16s  %s\n", "ID", "SCOPES", "PROJECT", "SESSION", "EXPIRES");
  for (i = 0; i < n; i++)
    {
      json_t *o = esbx_token_to_json (v[i]);
      if (!cli->json)
        {
          _cleanup_free_ char *scopes = esbx_token_scopes_string (v[i]->scopes);
          const char *exp = json_get_string (o, "expires");
          printf ("%-12s  %-22s  %-16s  %-16s  %s\n", v[i]->id, scopes,
                  v[i]->project ? v[i]->project : "*", v[i]->session ? v[i]->session : "*",
                  exp ? exp : "never");
        }
      json_append (arr, o);
      esbx_token_free (v[i]);
    }
  free (v);
  if (cli->json)
    cli_print_json (arr);
  return 0;
}

int
cmd_token (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  const char *sub = argc > 1 ? argv[1] : NULL;
  esbx_store_t *store;

  if (cli_gateway_mode (cli))
    return cli_usage (err, "token: not available through the gateway; run it on the host");
  if (sub == NULL)
    return cli_usage (err, "token: expected create, list or revoke");
  if (strcmp (sub, "create") == 0)
    return token_create (cli, argc - 1, argv + 1, err);
  if (strcmp (sub, "list") == 0 || strcmp (sub, "ls") == 0)
    {
      if (argc > 2 && strcmp (argv[2], "--json") != 0)
        return cli_usage (err, "token list: unexpected argument `%s`", argv[2]);
      return token_list (cli, err);
    }
  if (strcmp (sub, "revoke") == 0 || strcmp (sub, "rm") == 0)
    {
      if (argc != 3 || argv[2][0] == '-')
        return cli_usage (err, "token revoke: expected a token id");
      store = cli_store (cli, err);
      if (store == NULL || esbx_token_revoke (store, argv[2], err) < 0)
        return -1;
      return 0;
    }
  return cli_usage (err, "token: unknown subcommand `%s`", sub);
}
