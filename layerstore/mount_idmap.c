/* An overlay over idmapped layers (userns.c says why).  overlayfs refuses
 * to be idmapped itself, but accepts idmapped layers (Linux 5.19) and
 * layers given as file descriptors (6.13, FSCONFIG_SET_FD): each lower
 * layer and the directory holding the upper and work directories are
 * cloned with open_tree, idmapped with mount_setattr(MOUNT_ATTR_IDMAP)
 * through the session's namespace, and handed to the overlay by fd; none
 * of them is ever attached anywhere.
 *
 * The overlay does its own work on the layers (copy-up, whiteouts, its
 * work directory) with the credentials of whoever created it, and host
 * root's fsuid 0 has no id on an idmapped layer (EOVERFLOW).  It is
 * created with fsuid and fsgid of the session's root, BASE, and the
 * capabilities of host root: what the overlay writes for itself is owned
 * by 0 on disk, as what the session's root writes is.  A lower layer that
 * is an overlay already (the folded bottom of a deep stack, mount.c) is
 * idmapped through its own layers and passed as it is.
 *
 * esbx-runtime builds a joined container's root the same way, over the
 * layers of the engine's overlay, or as one idmapped bind of a plain
 * directory (shim/runtime/joined_rootfs.c).  */
#include "internal.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

static const char *
fs_name (long type)
{
  switch (type)
    {
    case 0x858458f6: /* RAMFS_MAGIC */
      return "ramfs";
    case 0x01021994: /* TMPFS_MAGIC */
      return "tmpfs";
    case 0x65735546: /* FUSE_SUPER_MAGIC */
      return "fuse";
    case 0x6969: /* NFS_SUPER_MAGIC */
      return "nfs";
    case 0x794c7630: /* OVERLAYFS_SUPER_MAGIC */
      return "overlay";
    case 0x9123683e: /* BTRFS_SUPER_MAGIC */
      return "btrfs";
    case 0x58465342: /* XFS_SUPER_MAGIC */
      return "xfs";
    case 0xef53: /* EXT4_SUPER_MAGIC */
      return "ext4";
    default:
      return "this filesystem";
    }
}

/* DIR (on a filesystem of type FS_TYPE) cloned and idmapped: an fd; -2
   (ERR set) when its filesystem cannot be idmapped.  */
static int
clone_idmapped (const char *dir, long fs_type, int userns_fd, esbx_error_t *err)
{
  struct mount_attr attr = { .attr_set = MOUNT_ATTR_IDMAP, .userns_fd = (uint64_t)userns_fd };
  _cleanup_close_ int fd = -1;

  fd = (int)syscall (SYS_open_tree, AT_FDCWD, dir, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
  if (fd < 0)
    return esbx_make_error (err, errno, "clone the mount of `%s`", dir);
  if (syscall (SYS_mount_setattr, fd, "", AT_EMPTY_PATH, &attr, sizeof attr) < 0)
    {
      int saved = errno;

      esbx_make_error (err, saved, "`%s`: %s cannot be idmapped", dir, fs_name (fs_type));
      return saved == EINVAL || saved == EPERM || saved == ENOTSUP || saved == ENOSYS ? -2 : -1;
    }
  return take_fd (&fd);
}

/* A layer of an overlay: DIR cloned and idmapped, or, when DIR is an
   overlay, opened as it is.  */
static int
idmapped_tree (const char *dir, int userns_fd, esbx_error_t *err)
{
  _cleanup_close_ int fd = -1;
  struct statfs sfs;

  if (statfs (dir, &sfs) < 0)
    return esbx_make_error (err, errno, "statfs `%s`", dir);
  if (sfs.f_type != 0x794c7630)
    return clone_idmapped (dir, sfs.f_type, userns_fd, err);
  fd = TEMP_FAILURE_RETRY (open (dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (fd < 0)
    return esbx_make_error (err, errno, "open `%s`", dir);
  return take_fd (&fd);
}

int
esbx_mount_idmapped_bind (const char *dir, const char *target, int userns_fd, esbx_error_t *err)
{
  _cleanup_close_ int fd = -1;
  struct statfs sfs;

  if (statfs (dir, &sfs) < 0)
    return esbx_make_error (err, errno, "statfs `%s`", dir);
  if (sfs.f_type == 0x794c7630)
    {
      esbx_make_error (err, EINVAL, "`%s`: %s cannot be idmapped", dir, fs_name (sfs.f_type));
      return -2;
    }
  fd = clone_idmapped (dir, sfs.f_type, userns_fd, err);
  if (fd < 0)
    return fd;
  if (syscall (SYS_move_mount, fd, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH) < 0)
    return esbx_make_error (err, errno, "move the idmapped mount of `%s` to `%s`", dir, target);
  return 0;
}

/* FSCONFIG_CMD_CREATE as BASE (see above), then back to fsuid 0.  */
static int
create_as (int fsfd, uint32_t base)
{
  int ret, saved;

  esbx_userns_fs_ids (base);
  ret = (int)syscall (SYS_fsconfig, fsfd, FSCONFIG_CMD_CREATE, NULL, NULL, 0);
  saved = errno;
  esbx_userns_fs_ids (0);
  errno = saved;
  return ret;
}

int
esbx_mount_overlay_idmapped (char *const *lowers, size_t n, const char *upper, const char *work,
                             const char *target, const struct esbx_idmap *map, esbx_error_t *err)
{
  _cleanup_close_ int fsfd = -1, mfd = -1, parent = -1, upfd = -1, workfd = -1;
  _cleanup_free_ int *fds = NULL;
  size_t i;
  int ret = -1, r;

  if (n == 0)
    return esbx_make_error (err, 0, "overlay at `%s`: no lower layer", target);
  fds = xmalloc (n * sizeof *fds);
  for (i = 0; i < n; i++)
    fds[i] = -1;
  for (i = 0; i < n; i++)
    {
      r = idmapped_tree (lowers[i], map->userns_fd, err);
      if (r < 0)
        {
          ret = r;
          goto out;
        }
      fds[i] = r;
    }
  if (upper)
    {
      _cleanup_free_ char *dir = xstrdup (upper), *wdir = xstrdup (work);
      char *slash = strrchr (dir, '/'), *wslash = strrchr (wdir, '/');

      if (slash == NULL || wslash == NULL)
        {
          esbx_make_error (err, EINVAL, "overlay at `%s`: relative upper or work directory",
                           target);
          goto out;
        }
      *slash = '\0';
      *wslash = '\0';
      if (strcmp (dir, wdir) != 0)
        {
          esbx_make_error (err, EINVAL, "overlay at `%s`: upper and work in different directories",
                           target);
          goto out;
        }
      r = idmapped_tree (dir, map->userns_fd, err);
      if (r < 0)
        {
          ret = r;
          goto out;
        }
      parent = r;
      upfd = TEMP_FAILURE_RETRY (
          openat (parent, slash + 1, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      workfd = TEMP_FAILURE_RETRY (
          openat (parent, wslash + 1, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (upfd < 0 || workfd < 0)
        {
          esbx_make_error (err, errno, "open `%s` or `%s`", upper, work);
          goto out;
        }
    }
  fsfd = (int)syscall (SYS_fsopen, "overlay", FSOPEN_CLOEXEC);
  if (fsfd < 0)
    {
      ret = -2;
      esbx_make_error (err, errno, "this kernel has no overlay mount context");
      goto out;
    }
  esbx_fsconfig_string (fsfd, "source", "esbx");
  for (i = n; i > 0; i--)
    if (esbx_fsconfig_fd (fsfd, "lowerdir+", fds[i - 1]) < 0)
      {
        if (errno == EINVAL && i == n)
          {
            ret = -2;
            esbx_make_error (err, errno, "this kernel's overlayfs takes no layer by fd");
          }
        else
          esbx_fs_context_error (err, fsfd, "overlay lower layer", lowers[i - 1]);
        goto out;
      }
  if (upper
      && (esbx_fsconfig_fd (fsfd, "upperdir", upfd) < 0
          || esbx_fsconfig_fd (fsfd, "workdir", workfd) < 0))
    {
      esbx_fs_context_error (err, fsfd, "overlay upper directory", upper);
      goto out;
    }
  if (esbx_overlay_set_plain (fsfd, err) < 0)
    goto out;
  if (create_as (fsfd, map->uid) < 0)
    {
      esbx_fs_context_error (err, fsfd, "create overlay over idmapped layers for", target);
      goto out;
    }
  mfd = (int)syscall (SYS_fsmount, fsfd, FSMOUNT_CLOEXEC, 0);
  if (mfd < 0)
    {
      esbx_make_error (err, errno, "fsmount overlay for `%s`", target);
      goto out;
    }
  if (syscall (SYS_move_mount, mfd, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH) < 0)
    {
      esbx_make_error (err, errno, "move overlay to `%s`", target);
      goto out;
    }
  ret = 0;
out:
  for (i = 0; i < n; i++)
    if (fds[i] >= 0)
      close (fds[i]);
  return ret;
}
