/* esbx discard S [--force] */
#include "cli.h"
#include "sandbox.h"

#include <string.h>

int
cmd_discard (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  const char *session = NULL;
  bool force = false;
  esbx_store_t *store;
  int k;

  for (k = 1; k < argc; k++)
    {
      if (strcmp (argv[k], "--force") == 0)
        force = true;
      else if (strcmp (argv[k], "--json") == 0)
        continue;
      else if (argv[k][0] == '-')
        return cli_usage (err, "discard: unknown option `%s`", argv[k]);
      else if (session == NULL)
        session = argv[k];
      else
        return cli_usage (err, "discard: expected a session name");
    }
  if (session == NULL)
    return cli_usage (err, "discard: expected a session name");
  if (cli_gateway_mode (cli))
    return cli_gateway_print (cli, "DELETE", NULL, NULL, NULL, err,
                              force ? "/v1/sessions/%s?force=1" : "/v1/sessions/%s", session);
  store = cli_store (cli, err);
  if (store == NULL
      || esbx_sandbox_discard (store, session, force ? ESBX_DISCARD_FORCE : 0, err) < 0)
    return -1;
  return 0;
}
