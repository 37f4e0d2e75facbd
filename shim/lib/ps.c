/* `esbx ps`: the processes of a session's cgroup, by their pid in the
   session, with their command lines redacted as exec logs and events are
   (redact.c): an argument holding a secret's value shows ***NAME***.  */
#include "ps.h"
#include "cgroup.h"
#include "holder.h"
#include "proc.h"
#include "secret_redact.h"
#include "utils.h"

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

json_t *
esbx_ps_list (esbx_store_t *store, const char *session, esbx_error_t *err)
{
  struct esbx_holder_info info = { 0 };
  _cleanup_free_ pid_t *pids = NULL;
  _cleanup_free_ struct row *rows = NULL;
  struct esbx_session *s = NULL;
  struct esbx_secret *secrets = NULL;
  esbx_error_t herr = NULL;
  size_t n = 0, nrows = 0, n_secrets = 0, i;
  json_t *arr;

  if (!esbx_session_exists (store, session))
    {
      esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0, "session `%s` does not exist", session);
      return NULL;
    }
  /* No values, no list: a command line is never shown unredacted.  */
  if (esbx_session_load (store, session, &s, err) < 0
      || esbx_session_secrets (store, s, &secrets, &n_secrets, err) < 0)
    {
      esbx_session_free (s);
      esbx_error_wrap (err, "ps");
      return NULL;
    }
  esbx_session_free (s);
  /* No holder, or a cgroup gone with it: no processes, not an error.  */
  if (esbx_holder_get (store, session, &info, &herr) == 0
      && esbx_cgroup_pids (info.cgroup, &pids, &n, &herr) < 0)
    n = 0;
  esbx_error_free (&herr);
  esbx_holder_info_free (&info);
  rows = xmalloc0 ((n + 1) * sizeof *rows);
  for (i = 0; i < n; i++)
    {
      char *cmd = esbx_proc_cmdline (pids[i]);
      pid_t nspid = esbx_proc_ns_pid (pids[i]);

      /* Exited since the cgroup was read.  */
      if (cmd == NULL || nspid <= 0)
        {
          free (cmd);
          continue;
        }
      rows[nrows++] = (struct row){ nspid, pids[i], cmd };
    }
  esbx_sort (rows, nrows, sizeof *rows, cmp_row);
  arr = json_new (JSON_ARRAY);
  for (i = 0; i < nrows; i++)
    {
      json_t *o = json_new (JSON_OBJECT);
      _cleanup_free_ char *shown = esbx_redact_string (secrets, n_secrets, rows[i].cmd);

      json_set_int (o, "pid", rows[i].pid);
      json_set_int (o, "host_pid", rows[i].host_pid);
      json_set_string (o, "command", shown);
      json_append (arr, o);
      explicit_bzero (rows[i].cmd, strlen (rows[i].cmd));
      free (rows[i].cmd);
    }
  esbx_secrets_free (secrets, n_secrets);
  return arr;
}
