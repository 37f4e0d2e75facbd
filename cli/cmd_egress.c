/* esbx egress check S URL [--method M] [--json]: what session S's egress
   proxy would do with a request, sent nowhere.  Exits 0 when it would
   pass, with the forbidden status when it would be refused.  */
#include "cli.h"
#include "egress.h"
#include "utils.h"

#include <getopt.h>
#include <string.h>

static void
print_verdict (struct esbx_cli *cli, const json_t *v)
{
  const json_t *names, *n;
  size_t i;

  if (cli->json)
    {
      cli_print_json (v);
      return;
    }
  printf ("%s %s %s%s", json_get_bool (v, "allowed", false) ? "allowed" : "refused",
          json_get_string (v, "method") ?: "", json_get_string (v, "host") ?: "",
          json_get_string (v, "path") ?: "");
  if (json_get_string (v, "rule"))
    printf (" (rule `%s`)", json_get_string (v, "rule"));
  if (json_get_string (v, "reason"))
    printf (": %s", json_get_string (v, "reason"));
  if (json_get_bool (v, "intercepted", false))
    printf ("; TLS intercepted");
  names = json_get (v, "secrets");
  json_array_foreach (names, i, n)
    printf ("%s%s", i ? "," : "; secrets put in: ", n->text);
  printf ("\n");
}

/* The gateway's answer, as printed: whether it was allowed.  */
static bool remote_allowed;

static void
print_remote (struct esbx_cli *cli, const json_t *v)
{
  remote_allowed = json_get_bool (v, "allowed", false);
  print_verdict (cli, v);
}

static int
check (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  static const struct option opts[] = { { "method", required_argument, NULL, 'm' },
                                        { "json", no_argument, NULL, 'J' },
                                        { NULL, 0, NULL, 0 } };
  _cleanup_json_ json_t *v = NULL;
  const char *method = "GET", *p;
  esbx_store_t *store;
  int c;

  while ((c = getopt_long (argc, argv, "", opts, NULL)) != -1)
    {
      if (c == 'm')
        method = optarg;
      else if (c != 'J')
        return cli_usage (err, "egress check: unknown option `%s`", argv[optind - 1]);
    }
  if (optind + 2 != argc)
    return cli_usage (err, "egress check: expected a session and a URL");
  for (p = method; *p; p++)
    if (*p < 'A' || *p > 'Z')
      return cli_usage (err, "egress check: method `%s`: upper-case letters only", method);
  if (cli_gateway_mode (cli))
    {
      /* cli_gateway_print encodes each argument.  */
      if (cli_gateway_print (cli, "GET", NULL, print_remote, NULL, err,
                             "/v1/sessions/%s/egress/check?url=%s&method=%s", argv[optind],
                             argv[optind + 1], method)
          < 0)
        return -1;
      if (!remote_allowed)
        return esbx_make_error_kind (err, ESBX_ERR_FORBIDDEN, 0, "egress check: %s %s: refused",
                                     method, argv[optind + 1]);
      return 0;
    }
  store = cli_store (cli, err);
  if (store == NULL
      || (v = esbx_egress_check (store, argv[optind], method, argv[optind + 1], err)) == NULL)
    return -1;
  print_verdict (cli, v);
  if (!json_get_bool (v, "allowed", false))
    return esbx_make_error_kind (err, ESBX_ERR_FORBIDDEN, 0, "egress check: %s %s: %s", method,
                                 argv[optind + 1], json_get_string (v, "reason"));
  return 0;
}

int
cmd_egress (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  if (argc < 2 || strcmp (argv[1], "check") != 0)
    return cli_usage (err, "egress: expected `check S URL`");
  return check (cli, argc - 1, argv + 1, err);
}
