/* esbx rebase S */
#include "cli.h"
#include "sandbox.h"
#include "utils.h"

#include <string.h>

int
cmd_rebase (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  struct esbx_publish_result r = { 0 };
  esbx_store_t *store;
  json_t *holder;

  if (argc != 2 || argv[1][0] == '-')
    return cli_usage (err, "rebase: expected a session name");
  store = cli_store (cli, err);
  if (store == NULL)
    return -1;
  if (!esbx_session_exists (store, argv[1]))
    return esbx_session_rebase (store, argv[1], &r, err);
  /* Rebase remounts the session; a holder's mount namespace would keep the
     old overlay on the same upper directory.  */
  {
    _cleanup_json_ json_t *status = esbx_sandbox_status (store, argv[1]);
    holder = json_get (status, "holder");
    if (holder && holder->type != JSON_NULL)
      return esbx_make_error (err, EBUSY,
                              "rebase `%s`: the session's holder is running; stop its "
                              "processes first",
                              argv[1]);
  }
  if (esbx_session_rebase (store, argv[1], &r, err) < 0)
    {
      if (r.n_conflicts)
        cli_print_conflicts (cli, &r);
      esbx_publish_result_free (&r);
      return -1;
    }
  {
    _cleanup_json_ json_t *o = json_new (JSON_OBJECT);
    json_set_string (o, "base", r.layer);
    cli_print_rebased (cli, o);
  }
  esbx_publish_result_free (&r);
  return 0;
}
