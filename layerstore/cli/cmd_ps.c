/* esbx ps S: the processes of a session, with their pids as seen inside.  */
#include "cli.h"
#include "cgroup.h"
#include "holder.h"
#include "proc.h"
#include "utils.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct row
{
  pid_t pid, host_pid;
  char *cmd;
};

static int
cmp_row (const void *a, const void *b)
{
  const struct row *x = a, *y = b;
  return (x->pid > y->pid) - (x->pid < y->pid);
}

int
cmd_ps (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  struct esbx_holder_info info = { 0 };
  _cleanup_free_ pid_t *pids = NULL;
  _cleanup_free_ struct row *rows = NULL;
  size_t n = 0, nrows = 0, i;
  esbx_store_t *store;
  esbx_error_t herr = NULL;
  int k;

  for (k = 1; k < argc && argv[k][0] == '-'; k++)
    if (strcmp (argv[k], "--json") != 0)
      return cli_usage (err, "ps: unknown option `%s`", argv[k]);
  if (k + 1 != argc)
    return cli_usage (err, "ps: expected one session");
  store = cli_store (cli, err);
  if (store == NULL)
    return -1;
  if (!esbx_session_exists (store, argv[k]))
    return esbx_make_error (err, 0, "session `%s` does not exist", argv[k]);
  if (esbx_holder_get (store, argv[k], &info, &herr) == 0)
    {
      if (esbx_cgroup_pids (info.cgroup, &pids, &n, &herr) < 0)
        n = 0;
    }
  esbx_error_free (&herr);
  esbx_holder_info_free (&info);

  rows = xmalloc0 ((n + 1) * sizeof *rows);
  for (i = 0; i < n; i++)
    {
      char *cmd = esbx_proc_cmdline (pids[i]);
      pid_t nspid = esbx_proc_ns_pid (pids[i]);

      if (cmd == NULL || nspid <= 0)
        {
          free (cmd);
          continue;
        }
      rows[nrows].pid = nspid;
      rows[nrows].host_pid = pids[i];
      rows[nrows].cmd = cmd;
      nrows++;
    }
  qsort (rows, nrows, sizeof *rows, cmp_row);
  {
    _cleanup_json_ json_t *a = json_new (JSON_ARRAY);
    for (i = 0; i < nrows; i++)
      {
        json_t *o = json_new (JSON_OBJECT);
        json_set_int (o, "pid", rows[i].pid);
        json_set_int (o, "host_pid", rows[i].host_pid);
        json_set_string (o, "command", rows[i].cmd);
        json_append (a, o);
      }
    cli_print_ps (cli, a);
  }
  for (i = 0; i < nrows; i++)
    free (rows[i].cmd);
  return 0;
}
