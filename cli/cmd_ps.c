/* esbx ps S: the processes of a session, with their pids as seen inside.  */
#include "cli.h"
#include "ps.h"
#include "utils.h"

int
cmd_ps (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  _cleanup_json_ json_t *arr = NULL;
  const char *session;
  esbx_store_t *store;

  if (cli_parse_session (argc, argv, "expected one session", &session, err) < 0)
    return -1;
  if (cli_gateway_mode (cli))
    return cli_gateway_print (cli, "GET", NULL, cli_print_ps, NULL, err, "/v1/sessions/%s/ps",
                              session);
  store = cli_store (cli, err);
  if (store == NULL || (arr = esbx_ps_list (store, session, err)) == NULL)
    return -1;
  cli_print_ps (cli, arr);
  return 0;
}
