/* esbx rebase S */
#include "cli.h"
#include "sandbox.h"
#include "utils.h"

static int
rebase_local (struct esbx_cli *cli, const char *session, esbx_error_t *err)
{
  struct esbx_publish_result r = { 0 };
  esbx_store_t *store = cli_store (cli, err);

  if (store == NULL)
    return -1;
  if (esbx_sandbox_rebase (store, session, &r, err) < 0)
    return cli_publish_failed (cli, &r);
  {
    _cleanup_json_ json_t *o = esbx_rebase_result_json (&r);
    cli_print_rebased (cli, o);
  }
  esbx_publish_result_free (&r);
  return 0;
}

int
cmd_rebase (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  const char *session;

  if (cli_parse_session (argc, argv, "expected a session name", &session, err) < 0)
    return -1;
  if (cli_remote_mode (cli))
    {
      /* The route takes a JSON body; an empty one will do.  */
      _cleanup_json_ json_t *body = json_new (JSON_OBJECT);
      return cli_remote_print (cli, "POST", body, cli_print_rebased, NULL, err,
                               "/v1/sessions/%s/rebase", session);
    }
  return rebase_local (cli, session, err);
}
