/* esbx exec S [--cwd DIR] [--env K=V]... [--user UID[:GID]] [--detach] -- CMD [ARG...]

   Without "--", options come before S and everything after S is the
   command, as with `docker exec`.  The exit status is the command's.  */
#include "cli.h"
#include "exec.h"
#include "utils.h"

#include <getopt.h>
#include <string.h>

int
cmd_exec (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  static const struct option opts[] = {
    { "cwd", required_argument, NULL, 'C' },  { "env", required_argument, NULL, 'e' },
    { "user", required_argument, NULL, 'u' }, { "detach", no_argument, NULL, 'd' },
    { "json", no_argument, NULL, 'J' },       { NULL, 0, NULL, 0 },
  };
  struct esbx_exec_opts o = { 0 };
  _cleanup_strv_ char **env = NULL;
  struct strv envs = { 0 };
  esbx_store_t *store;
  const char *session;
  int dashdash = -1, limit, c, i, status = 0;

  for (i = 1; i < argc; i++)
    if (strcmp (argv[i], "--") == 0)
      {
        dashdash = i;
        break;
      }
  limit = dashdash >= 0 ? dashdash : argc;
  opterr = 0;
  while ((c = getopt_long (limit, argv, dashdash >= 0 ? "e:u:d" : "+e:u:d", opts, NULL)) != -1)
    switch (c)
      {
      case 'C':
        o.cwd = optarg;
        break;
      case 'e':
        if (esbx_exec_check_env (optarg, err) < 0)
          {
            strv_free (&envs);
            return -1;
          }
        strv_push (&envs, xstrdup (optarg));
        break;
      case 'u':
        o.user = optarg;
        break;
      case 'd':
        o.detach = true;
        break;
      case 'J':
        break;
      default:
        strv_free (&envs);
        return cli_usage (err, "exec: unknown option `%s`", argv[optind - 1]);
      }
  env = envs.v;
  if (optind >= limit)
    return cli_usage (err, "exec: expected a session");
  session = argv[optind];
  if (dashdash >= 0)
    {
      if (optind + 1 != limit)
        return cli_usage (err, "exec: unexpected `%s` before `--`", argv[optind + 1]);
      o.argv = argv + dashdash + 1;
    }
  else
    o.argv = argv + optind + 1;
  if (o.argv[0] == NULL)
    return cli_usage (err, "exec: no command given");
  o.env = env;
  store = cli_store (cli, err);
  if (store == NULL)
    return -1;
  fflush (stdout);
  if (esbx_exec_run (store, session, &o, &status, err) < 0)
    return -1;
  return status;
}
