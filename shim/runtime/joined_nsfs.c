/* The session's sysfs and mqueue for a container joined to a session in a
 * user namespace (joined_userns.c).
 *
 * The container's user namespace owns neither the session's net namespace
 * (a sysfs mount shows the devices of the mounter's net namespace and
 * needs its owner's CAP_SYS_ADMIN) nor its ipc namespace (mqueue): runc
 * and crun fail to mount either inside ("operation not permitted").  A
 * bind of the holder's own /sys is not possible either: a mount of another
 * mount namespace cannot be bound.  So they are made here, on the host
 * side: a filesystem context opened in the holder's namespace (sysfs and
 * mqueue take the namespace of the opener, at fsopen), and mounted in the
 * host's, at a mount point the container's config then binds.  */
#include "runtime.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>

/* A context for FSTYPE opened in the namespace NS (net or ipc, FLAG) of
   PID; this process is back in its own before returning, or the error
   says it could not come back.  */
static int
fsopen_in (pid_t pid, const char *ns, int flag, const char *fstype, esbx_error_t *err)
{
  char path[64];
  _cleanup_close_ int self = -1, theirs = -1, fsfd = -1;
  int saved;

  snprintf (path, sizeof path, "/proc/self/ns/%s", ns);
  self = TEMP_FAILURE_RETRY (open (path, O_RDONLY | O_CLOEXEC));
  snprintf (path, sizeof path, "/proc/%d/ns/%s", (int)pid, ns);
  theirs = TEMP_FAILURE_RETRY (open (path, O_RDONLY | O_CLOEXEC));
  if (self < 0 || theirs < 0)
    return esbx_make_error (err, errno, "open the %s namespace of the holder", ns);
  if (setns (theirs, flag) < 0)
    return esbx_make_error (err, errno, "join the %s namespace of the holder", ns);
  fsfd = (int)syscall (SYS_fsopen, fstype, FSOPEN_CLOEXEC);
  saved = errno;
  if (setns (self, flag) < 0)
    return esbx_make_error (err, errno, "return to this process's %s namespace", ns);
  if (fsfd < 0)
    return esbx_make_error (err, saved, "open a %s context", fstype);
  return take_fd (&fsfd);
}

static int
mount_nsfs (pid_t pid, const char *ns, int flag, const char *fstype, const char *target,
            esbx_error_t *err)
{
  _cleanup_close_ int fsfd = fsopen_in (pid, ns, flag, fstype, err);
  _cleanup_close_ int mfd = -1;

  if (fsfd < 0)
    return -1;
  if (syscall (SYS_fsconfig, fsfd, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
    return esbx_make_error (err, errno, "create the session's %s", fstype);
  mfd = (int)syscall (SYS_fsmount, fsfd, FSMOUNT_CLOEXEC,
                      MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
  if (mfd < 0)
    return esbx_make_error (err, errno, "mount the session's %s", fstype);
  if (syscall (SYS_move_mount, mfd, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH) < 0)
    return esbx_make_error (err, errno, "move the session's %s to `%s`", fstype, target);
  return 0;
}

int
joined_mount_sysfs (pid_t holder, const char *target, esbx_error_t *err)
{
  return mount_nsfs (holder, "net", CLONE_NEWNET, "sysfs", target, err);
}

int
joined_mount_mqueue (pid_t holder, const char *target, esbx_error_t *err)
{
  return mount_nsfs (holder, "ipc", CLONE_NEWIPC, "mqueue", target, err);
}
