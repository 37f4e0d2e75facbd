/* esbx exec S [--cwd DIR] [--env K=V]... [--user UID[:GID]] [--detach] [-t|--tty]
               [--log-limit BYTES] -- CMD [ARG...]

   Without "--", options come before S and everything after S is the
   command, as with `docker exec`.  The exit status is the command's.  */
#include "cli.h"
#include "exec.h"
#include "text.h"
#include "utils.h"

#include <getopt.h>
#include <inttypes.h>
#include <string.h>

struct exec_args
{
  const char *session;
  struct esbx_exec_opts run; /* its env points into ENV */
  struct strv env;
};

static int
parse_exec_args (int argc, char **argv, struct exec_args *a, esbx_error_t *err)
{
  static const struct option opts[] = {
    { "cwd", required_argument, NULL, 'C' },
    { "env", required_argument, NULL, 'e' },
    { "user", required_argument, NULL, 'u' },
    { "detach", no_argument, NULL, 'd' },
    { "json", no_argument, NULL, 'J' },
    { "tty", no_argument, NULL, 't' },
    { "log-limit", required_argument, NULL, 'L' },
    { NULL, 0, NULL, 0 },
  };
  int dashdash = -1, limit, c, i;

  for (i = 1; i < argc; i++)
    if (strcmp (argv[i], "--") == 0)
      {
        dashdash = i;
        break;
      }
  limit = dashdash >= 0 ? dashdash : argc;
  while ((c = getopt_long (limit, argv, dashdash >= 0 ? "e:u:dt" : "+e:u:dt", opts, NULL)) != -1)
    switch (c)
      {
      case 'C':
        a->run.cwd = optarg;
        break;
      case 'e':
        if (esbx_exec_check_env (optarg, err) < 0)
          return -1;
        strv_push (&a->env, xstrdup (optarg));
        break;
      case 'u':
        a->run.user = optarg;
        break;
      case 'd':
        a->run.detach = true;
        break;
      case 't':
        a->run.tty = true;
        break;
      case 'L':
        if (esbx_parse_size (optarg, &a->run.log_limit, err) < 0)
          return -1;
        if (a->run.log_limit == 0)
          return cli_usage (err, "exec: --log-limit must be more than 0");
        break;
      case 'J':
        break;
      default:
        return cli_usage (err, "exec: unknown option `%s`", argv[optind - 1]);
      }
  a->run.env = a->env.v;
  if (optind >= limit)
    return cli_usage (err, "exec: expected a session");
  a->session = argv[optind];
  if (dashdash >= 0)
    {
      if (optind + 1 != limit)
        return cli_usage (err, "exec: unexpected `%s` before `--`", argv[optind + 1]);
      a->run.argv = argv + dashdash + 1;
    }
  else
    a->run.argv = argv + optind + 1;
  if (a->run.argv[0] == NULL)
    return cli_usage (err, "exec: no command given");
  if (a->run.tty && a->run.detach)
    return cli_usage (err, "exec: --tty and --detach exclude each other");
  return 0;
}

/* The command's output comes back as it is written (remote.c).  */
static int
exec_remote (struct esbx_cli *cli, const struct exec_args *a, esbx_error_t *err)
{
  _cleanup_json_ json_t *body = json_new (JSON_OBJECT);

  json_set (body, "env", json_new_strings (a->run.env));
  json_set (body, "argv", json_new_strings (a->run.argv));
  if (a->run.cwd)
    json_set_string (body, "cwd", a->run.cwd);
  if (a->run.user)
    json_set_string (body, "user", a->run.user);
  if (a->run.detach)
    json_set (body, "detach", json_new_bool (true));
  if (a->run.log_limit)
    {
      _cleanup_free_ char *limit = xasprintf ("%" PRIu64, a->run.log_limit);
      json_set_string (body, "log_limit", limit);
    }
  return cli_gateway_exec (cli, a->session, body, err);
}

int
cmd_exec (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  struct exec_args a = { 0 };
  esbx_store_t *store;
  int ret, status = 0;

  ret = parse_exec_args (argc, argv, &a, err);
  if (ret == 0 && cli_gateway_mode (cli) && a.run.tty)
    ret = cli_usage (err, "exec: --tty is not available over the gateway");
  else if (ret == 0 && cli_gateway_mode (cli))
    ret = exec_remote (cli, &a, err);
  else if (ret == 0 && (store = cli_store (cli, err)) == NULL)
    ret = -1;
  else if (ret == 0)
    {
      fflush (stdout);
      ret = esbx_exec_run (store, a.session, &a.run, &status, err) < 0 ? -1 : status;
    }
  strv_free (&a.env);
  return ret;
}
