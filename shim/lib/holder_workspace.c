/* The holder's workspace (shim/holder/rootfs.c mounts the session's view
 * there, in the holder's own mount namespace), taken down and put back by
 * a snapshot that moves the session's upper into a frozen layer
 * (layerstore/snapshot.c): the overlay whose upper it was must have no
 * mount left anywhere before the rename, and the session's next commands
 * must find the new overlay where the old one was.
 *
 * Both run in a child that joins the holder's mount namespace (esbxd is
 * threaded; setns of a mount namespace wants one thread).  The session is
 * frozen meanwhile (esbx_sandbox_snapshot), so nothing inside it moves the
 * path: it is checked to hold no symlink, then used.  */
#include "holder.h"
#include "fs.h"
#include "proc.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sched.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/pidfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* The workspace of the holder's namespace as an O_PATH fd, no symlink on
   the way (the child's root is the holder's after setns).  */
static int
open_workspace (const char *workspace)
{
  struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                          .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };

  return (int)syscall (SYS_openat2, AT_FDCWD, workspace, &how, sizeof how);
}

/* In a child in the holder's mount namespace: detach (TREE < 0) or attach
   TREE at WORKSPACE.  0, or the errno of the step that failed.  */
static int
in_holder (const struct esbx_holder_info *info, const char *workspace, int tree)
{
  _cleanup_close_ int pidfd = pidfd_open (info->pid, 0);
  int status;
  pid_t pid;

  if (pidfd < 0)
    return errno;
  if (!esbx_proc_alive (info->pid, info->starttime))
    return ESRCH;
  pid = fork ();
  if (pid < 0)
    return errno;
  if (pid == 0)
    {
      int fd;

      if (setns (pidfd, CLONE_NEWNS) < 0)
        _exit (errno & 0xff);
      fd = open_workspace (workspace);
      if (fd < 0)
        _exit (errno & 0xff);
      if (tree < 0)
        {
          close (fd);
          /* Not lazily: EBUSY when a process has a file or its directory
             in it, which keeps writing to the old overlay.  */
          if (umount2 (workspace, UMOUNT_NOFOLLOW) < 0)
            _exit (errno & 0xff);
          _exit (0);
        }
      if (syscall (SYS_move_mount, tree, "", fd, "",
                   MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH)
          < 0)
        _exit (errno & 0xff);
      _exit (0);
    }
  if (TEMP_FAILURE_RETRY (waitpid (pid, &status, 0)) < 0)
    return errno;
  if (!WIFEXITED (status))
    return EINTR;
  return WEXITSTATUS (status);
}

int
esbx_holder_workspace_detach (const struct esbx_holder_info *info, const char *workspace,
                              esbx_error_t *err)
{
  int e = in_holder (info, workspace, -1);

  if (e == EBUSY)
    return 1;
  if (e)
    return esbx_make_error (err, e, "take the workspace `%s` down", workspace);
  return 0;
}

int
esbx_holder_workspace_attach (const struct esbx_holder_info *info, const char *merged,
                              const char *workspace, esbx_error_t *err)
{
  struct mount_attr attr = { .attr_set = MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID };
  _cleanup_close_ int tree = -1;
  int e;

  /* As the holder made it: a clone of the view, nodev and nosuid.  */
  tree = (int)syscall (SYS_open_tree, AT_FDCWD, merged, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
  if (tree < 0)
    return esbx_make_error (err, errno, "clone the mount of `%s`", merged);
  if (syscall (SYS_mount_setattr, tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) < 0)
    return esbx_make_error (err, errno, "make the workspace nodev and nosuid");
  e = in_holder (info, workspace, tree);
  if (e)
    return esbx_make_error (err, e, "mount the workspace on `%s`", workspace);
  return 0;
}
