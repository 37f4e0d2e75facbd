/* The holder in the session's user namespace (layerstore/userns.c makes
 * the range and idmaps the layers).
 *
 * The holder builds the root as root of the host, in namespaces the host's
 * user namespace owns (mount, pid, uts, ipc, net), and only then enters
 * the session's user namespace as its root, as every command does after it
 * (shim/lib/exec/exec_child.c).  So uid 0 inside is an unprivileged id of
 * the host; the capabilities a command keeps are the namespace's, and
 * count for none of the namespaces it lives in, which it does not own: no
 * mount, no sethostname, no device node, and nothing of another session's
 * processes (another range).  Two things Docker's default lets a container
 * do in its net namespace need the capabilities over it, and are given to
 * every id instead, in the session's net namespace only, as Docker does:
 * ports below 1024 and ICMP echo sockets (`ping`).  */
#include "root.h"
#include "fs.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

static int
write_sysctl (const char *path, const char *value, esbx_error_t *err)
{
  _cleanup_close_ int fd = TEMP_FAILURE_RETRY (open (path, O_WRONLY | O_CLOEXEC));

  if (fd < 0 || esbx_write_all (fd, value, strlen (value)) < 0)
    return esbx_make_error (err, errno, "write `%s`", path);
  return 0;
}

int
holder_userns_net (const struct holder_config *cfg, esbx_error_t *err)
{
  /* The host's network is the host's: nothing is given there.  */
  if (cfg->userns_uid == 0 || strcmp (cfg->network, "host") == 0)
    return 0;
  if (write_sysctl ("/proc/sys/net/ipv4/ip_unprivileged_port_start", "0", err) < 0)
    return -1;
  return write_sysctl ("/proc/sys/net/ipv4/ping_group_range", "0 2147483647", err);
}

int
holder_userns_enter (const struct holder_config *cfg, esbx_error_t *err)
{
  if (cfg->userns_uid == 0)
    return 0;
  if (setns (cfg->userns_fd, CLONE_NEWUSER) < 0)
    return esbx_make_error (err, errno, "enter the session's user namespace");
  close (cfg->userns_fd);
  /* Host root has no id in the namespace: become its root.  */
  if (setgroups (0, NULL) < 0 || setresgid (0, 0, 0) < 0 || setresuid (0, 0, 0) < 0)
    return esbx_make_error (err, errno, "become root of the session's user namespace");
  return 0;
}
