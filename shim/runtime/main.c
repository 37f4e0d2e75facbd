/* esbx-runtime: see runtime.h.  Registered in /etc/docker/daemon.json as
   "runtimes": {"esbx": {"path": "/usr/local/bin/esbx-runtime"}}.  */
#include "runtime.h"
#include "log.h"
#include "utils.h"

#include <string.h>

int
main (int argc, char **argv)
{
  struct runtime rt = { 0 };
  esbx_error_t err = NULL;
  const char *verb;

  esbx_log_set_prog ("esbx-runtime");
  runtime_parse_globals (&rt, argc, argv);
  verb = rt.verb < argc ? argv[rt.verb] : "";
  if (runtime_conf_load (&rt.conf, &err) < 0 || runtime_find_runc (&rt, &err) < 0)
    goto fail;
  if (strcmp (verb, "create") == 0 || strcmp (verb, "run") == 0)
    cmd_create (&rt, &err);
  else if (strcmp (verb, "delete") == 0)
    cmd_delete (&rt, &err);
  else if (strcmp (verb, "exec") == 0)
    cmd_exec (&rt, &err);
  else
    runtime_exec_runc (&rt, &err);

fail:
  /* Only reached on error: success ends in execve.  */
  if (err)
    runtime_log (&rt, "error", err->msg);
  esbx_error_free (&err);
  runtime_conf_free (&rt.conf);
  free (rt.runc);
  return ESBX_EXIT_ERROR;
}
