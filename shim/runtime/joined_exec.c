/* `exec` into a container joined to a session in a user namespace, with
 * runc 1.1.
 *
 * runc joins a container's namespaces by path in libcontainer's fixed
 * order, its user namespace first; after it, setns into the session's
 * ipc, uts and net namespaces fails (the host's user namespace owns them:
 * joined_userns.c), so `runc exec` (`docker exec`) would fail.  crun
 * joins what it can before the user namespace and needs nothing.  For
 * runc, create runs runc as a child and then takes those three out of the
 * namespaces its state records for the container; `exec` enters them here,
 * as host root, and the process runc starts inherits them, then joins the
 * container's user, pid and mount namespaces.  runc keeps the recorded
 * config when it saves its state again (start), and reads it for nothing
 * else of a running container.  */
#include "runtime.h"
#include "fs.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const struct
{
  const char *runc; /* libcontainer's name in state.json */
  const char *proc; /* /proc/PID/ns/NAME */
  int flag;
} joined_ns[] = {
  { "NEWIPC", "ipc", CLONE_NEWIPC },
  { "NEWUTS", "uts", CLONE_NEWUTS },
  { "NEWNET", "net", CLONE_NEWNET },
};

static char *
state_dir (const struct runtime *rt, const char *id)
{
  return xasprintf ("%s/%s", runtime_root (rt), id);
}

static int
patch_state (const struct runtime *rt, const char *id, esbx_error_t *err)
{
  _cleanup_free_ char *dir = state_dir (rt, id);
  _cleanup_close_ int dfd = esbx_open_dir_at (AT_FDCWD, dir, err);
  _cleanup_json_ json_t *state = NULL;
  _cleanup_free_ char *data = NULL;
  json_t *ns, *kept, *paths;
  size_t i, j, len;

  if (dfd < 0)
    return -1;
  state = json_parse_file_at (dfd, "state.json", err);
  if (state == NULL)
    return -1;
  ns = json_get (json_get (state, "config"), "namespaces");
  if (ns == NULL || ns->type != JSON_ARRAY)
    return esbx_make_error (err, 0, "`%s/state.json`: no namespaces", dir);
  kept = json_new (JSON_ARRAY);
  for (i = 0; i < json_len (ns); i++)
    {
      const char *type = json_get_string (json_at (ns, i), "type");
      bool drop = false;

      for (j = 0; type && j < ARRAY_SIZE (joined_ns); j++)
        drop |= strcmp (type, joined_ns[j].runc) == 0;
      if (!drop)
        json_append (kept, json_take_at (ns, i));
    }
  json_set (json_get (state, "config"), "namespaces", kept);
  paths = json_get (state, "namespace_paths");
  for (j = 0; j < ARRAY_SIZE (joined_ns); j++)
    json_remove (paths, joined_ns[j].runc);
  data = json_serialize (state, false, &len);
  return esbx_replace_file_at (dfd, "state.json", data, len, 0600, err);
}

int
joined_create_runc (struct runtime *rt, const char *id, esbx_error_t *err)
{
  esbx_error_t e = NULL;
  int status;

  if (runtime_run_runc (rt, "create", &status, err) < 0)
    return -1;
  if (WIFEXITED (status) && WEXITSTATUS (status) == 0 && patch_state (rt, id, &e) < 0)
    {
      runtime_log (rt, "error", e->msg);
      esbx_error_free (&e);
      exit (ESBX_EXIT_ERROR);
    }
  exit (WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status));
}

int
cmd_exec (struct runtime *rt, esbx_error_t *err)
{
  _cleanup_free_ char *dir = NULL, *sdir = NULL;
  _cleanup_close_ int sfd = -1;
  _cleanup_json_ json_t *state = NULL;
  struct verb_args args;
  int64_t pid = 0;
  size_t i;

  runtime_parse_verb (rt->argc - rt->verb - 1, rt->argv + rt->verb + 1, &args);
  dir = args.id ? joined_dir_path (runtime_root (rt), args.id) : NULL;
  if (dir == NULL || access (dir, F_OK) < 0 || runtime_is_crun (rt))
    return runtime_exec_runc (rt, err);
  sdir = state_dir (rt, args.id);
  sfd = esbx_open_dir_at (AT_FDCWD, sdir, err);
  if (sfd < 0)
    return -1;
  state = json_parse_file_at (sfd, "state.json", err);
  if (state == NULL)
    return -1;
  if (!json_get_int (state, "init_process_pid", &pid) || pid <= 0)
    return esbx_make_error (err, 0, "`%s/state.json`: no init_process_pid", sdir);
  for (i = 0; i < ARRAY_SIZE (joined_ns); i++)
    {
      char path[64];
      _cleanup_close_ int fd = -1;

      snprintf (path, sizeof path, "/proc/%d/ns/%s", (int)pid, joined_ns[i].proc);
      fd = TEMP_FAILURE_RETRY (open (path, O_RDONLY | O_CLOEXEC));
      if (fd < 0 || setns (fd, joined_ns[i].flag) < 0)
        return esbx_make_error (err, errno, "container `%s`: join its %s namespace", args.id,
                                joined_ns[i].proc);
    }
  return runtime_exec_runc (rt, err);
}
