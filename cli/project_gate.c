/* esbx project gate NAME [--mode auto|checks|review] [--check CMD]...
       [--check-timeout DURATION] [--approvals N] [--parallel N] [--secret NAME]...
   Without options: print the policy.  With them: the project's policy is
   what they say (README, "The gate").  */
#include "cli.h"
#include "text.h"
#include "utils.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static int
count (const char *opt, const char *s, unsigned max, unsigned *out, esbx_error_t *err)
{
  char *end;
  unsigned long v = strtoul (s, &end, 10);

  if (*s < '0' || *s > '9' || *end != '\0' || v > max)
    return cli_usage (err, "project gate: %s `%s`: expected a number from 0 to %u", opt, s, max);
  *out = (unsigned)v;
  return 0;
}

int
cli_project_gate (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  static const struct option opts[] = { { "mode", required_argument, NULL, 'M' },
                                        { "check", required_argument, NULL, 'c' },
                                        { "check-timeout", required_argument, NULL, 't' },
                                        { "approvals", required_argument, NULL, 'a' },
                                        { "parallel", required_argument, NULL, 'p' },
                                        { "secret", required_argument, NULL, 's' },
                                        { "json", no_argument, NULL, 'J' },
                                        { NULL, 0, NULL, 0 } };
  struct strv checks = { 0 }, secrets = { 0 };
  struct esbx_gate g = { 0 };
  const char *mode = NULL;
  bool set = false;
  int c, ret = -1;

  g.check_timeout = ESBX_GATE_DEFAULT_TIMEOUT;
  while ((c = getopt_long (argc, argv, "", opts, NULL)) != -1)
    {
      if (c != 'J')
        set = true;
      if (c == 'M')
        mode = optarg;
      else if (c == 'c')
        strv_push (&checks, xstrdup (optarg));
      else if (c == 's')
        strv_push (&secrets, xstrdup (optarg));
      else if (c == 't')
        {
          if (esbx_parse_duration (optarg, &g.check_timeout, err) < 0)
            {
              esbx_error_free (err);
              cli_usage (err, "project gate: --check-timeout `%s`: expected a duration, e.g. 90s",
                         optarg);
              goto out;
            }
        }
      else if (c == 'a' && count ("--approvals", optarg, 16, &g.approvals, err) < 0)
        goto out;
      else if (c == 'p' && count ("--parallel", optarg, 64, &g.parallel, err) < 0)
        goto out;
      else if (c == '?' || c == ':')
        {
          cli_usage (err, "project gate: unknown option `%s`", argv[optind - 1]);
          goto out;
        }
    }
  if (optind + 1 != argc)
    {
      cli_usage (err, "project gate: expected NAME");
      goto out;
    }
  if (set && mode == NULL)
    {
      cli_usage (err, "project gate: --mode auto|checks|review is required to set the gate");
      goto out;
    }
  g.mode = (char *)mode;
  g.checks = checks.v ? checks.v : (char *[]){ NULL };
  g.secrets = secrets.v ? secrets.v : (char *[]){ NULL };
  if (cli_gateway_mode (cli))
    {
      _cleanup_json_ json_t *body = NULL, *answer = NULL;

      if (!set)
        ret = cli_gateway_print (cli, "GET", NULL, cli_print_gate, NULL, err,
                                 "/v1/projects/%s/gate", argv[optind]);
      else
        {
          body = json_new (JSON_OBJECT);
          json_set_string (body, "mode", mode);
          json_set (body, "checks", json_new_strings (checks.v));
          json_set (body, "secrets", json_new_strings (secrets.v));
          json_set_int (body, "check_timeout", g.check_timeout);
          json_set_int (body, "approvals", g.approvals);
          json_set_int (body, "parallel", g.parallel);
          ret = cli_gateway_json (cli, "PUT", body, &answer, err, "/v1/projects/%s/gate",
                                  argv[optind]);
        }
      goto out;
    }
  if (cli_store (cli, err) == NULL)
    goto out;
  if (set)
    ret = esbx_gate_set (cli->store, argv[optind], &g, err);
  else
    {
      struct esbx_gate have = { 0 };
      if (esbx_gate_load (cli->store, argv[optind], &have, err) == 0)
        {
          _cleanup_json_ json_t *j = esbx_gate_json (&have);
          cli_print_gate (cli, j);
          ret = 0;
        }
      esbx_gate_clear (&have);
    }
out:
  strv_free (&checks);
  strv_free (&secrets);
  return ret;
}
