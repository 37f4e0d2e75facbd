/* The session's root filesystem, built from the host's in the holder's own
 * mount namespace:
 *
 *   /            a small tmpfs (read-only once built) holding
 *   /NAME        a recursive read-only bind of every top-level entry of the
 *                host root (symlinks such as /bin -> usr/bin are copied)
 *   /tmp         a private tmpfs;  /dev/shm likewise
 *   /proc        proc of the session's pid namespace
 *   WORKSPACE    the session's merged view, read-write
 *   STORE ROOT   covered by an empty read-only tmpfs
 *
 * The tmpfs root is what makes any workspace path whose first component is
 * absent from the host root (the default /workspace) possible without
 * creating anything on the host; a deeper workspace path must already exist
 * as a directory on the host.  The tree is staged on /tmp, which the host
 * never sees: / was made a slave first, so nothing here propagates out,
 * while unmounts on the host (discard) still propagate in.  */
#include "holder.h"
#include "fs.h"
#include "utils.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define STAGE "/tmp"

static int
set_readonly (const char *path, bool recursive, bool clear, esbx_error_t *err)
{
  struct mount_attr attr = { 0 };

  if (clear)
    attr.attr_clr = MOUNT_ATTR_RDONLY;
  else
    attr.attr_set = MOUNT_ATTR_RDONLY;
  if (mount_setattr (AT_FDCWD, path, recursive ? AT_RECURSIVE : 0, &attr, sizeof attr) < 0)
    return esbx_make_error (err, errno, "make `%s` %s", path, clear ? "writable" : "read-only");
  return 0;
}

static bool
is_dir (const char *path)
{
  struct stat st;
  return stat (path, &st) == 0 && S_ISDIR (st.st_mode);
}

static bool
is_mountpoint (const char *path)
{
  struct stat st, parent;
  _cleanup_free_ char *up = xasprintf ("%s/..", path);

  return lstat (path, &st) == 0 && stat (up, &parent) == 0 && st.st_dev != parent.st_dev;
}

/* One top-level entry of the host root.  */
static int
bind_entry (int rootfd, const char *name, unsigned char type, esbx_error_t *err)
{
  _cleanup_free_ char *src = xasprintf ("/%s", name);
  _cleanup_free_ char *dst = xasprintf (STAGE "/%s", name);
  char target[PATH_MAX];
  ssize_t n;
  int fd;

  switch (type)
    {
    case DT_DIR:
      if (mkdir (dst, 0755) < 0)
        return esbx_make_error (err, errno, "mkdir `%s`", dst);
      if (mount (src, dst, NULL, MS_BIND | MS_REC, NULL) < 0)
        return esbx_make_error (err, errno, "bind `%s`", src);
      return set_readonly (dst, true, false, err);

    case DT_LNK:
      n = readlinkat (rootfd, name, target, sizeof target - 1);
      if (n < 0)
        return esbx_make_error (err, errno, "readlink `%s`", src);
      target[n] = '\0';
      if (symlink (target, dst) < 0)
        return esbx_make_error (err, errno, "symlink `%s`", dst);
      return 0;

    case DT_REG:
      fd = open (dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd < 0)
        return esbx_make_error (err, errno, "create `%s`", dst);
      close (fd);
      if (mount (src, dst, NULL, MS_BIND, NULL) < 0)
        return esbx_make_error (err, errno, "bind `%s`", src);
      return set_readonly (dst, false, false, err);

    default:
      return 0;
    }
}

static int
bind_host_root (esbx_error_t *err)
{
  _cleanup_dir_ DIR *d = NULL;
  struct dirent *de;

  d = opendir ("/");
  if (d == NULL)
    return esbx_make_error (err, errno, "opendir `/`");
  while ((de = readdir (d)) != NULL)
    {
      unsigned char type = de->d_type;

      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
        continue;
      if (strcmp (de->d_name, "tmp") == 0 || strcmp (de->d_name, "proc") == 0)
        {
          _cleanup_free_ char *dst = xasprintf (STAGE "/%s", de->d_name);
          if (mkdir (dst, 0755) < 0)
            return esbx_make_error (err, errno, "mkdir `%s`", dst);
          continue;
        }
      if (type == DT_UNKNOWN)
        {
          struct stat st;

          if (fstatat (dirfd (d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
          type = S_ISDIR (st.st_mode)   ? DT_DIR
                 : S_ISLNK (st.st_mode) ? DT_LNK
                 : S_ISREG (st.st_mode) ? DT_REG
                                        : DT_UNKNOWN;
        }
      if (bind_entry (dirfd (d), de->d_name, type, err) < 0)
        return -1;
    }
  return 0;
}

static int
mount_tmpfs (const char *target, const char *options, unsigned long flags, esbx_error_t *err)
{
  if (mount ("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV | flags, options) < 0)
    return esbx_make_error (err, errno, "mount tmpfs on `%s`", target);
  return 0;
}

static int
mount_workspace (int wsfd, const char *workspace, esbx_error_t *err)
{
  _cleanup_free_ char *target = NULL;
  esbx_error_t merr = NULL;

  if (workspace[0] != '/' || strstr (workspace, "/..") != NULL || strcmp (workspace, "/") == 0)
    return esbx_make_error (err, EINVAL, "workspace `%s`: not an absolute path below /", workspace);
  target = xasprintf (STAGE "%s", workspace);
  if (!is_dir (target) && esbx_mkdir_p (target, 0755, &merr) < 0)
    {
      esbx_make_error (err, 0,
                       "workspace `%s`: its mount point cannot be created (%s); use a "
                       "top-level path or a directory that exists on the host",
                       workspace, merr->msg);
      esbx_error_free (&merr);
      return -1;
    }
  if (move_mount (wsfd, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH) < 0)
    return esbx_make_error (err, errno, "mount the workspace on `%s`", workspace);
  return 0;
}

int
holder_setup_root (const struct holder_config *cfg, esbx_error_t *err)
{
  _cleanup_close_ int wsfd = -1;
  _cleanup_free_ char *hide = NULL;

  if (mount (NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
    return esbx_make_error (err, errno, "make `/` a slave mount");
  /* Taken before /tmp is covered: the store may live there.  */
  wsfd = open_tree (AT_FDCWD, cfg->merged, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
  if (wsfd < 0)
    return esbx_make_error (err, errno, "clone the mount of `%s`", cfg->merged);
  if (mount_tmpfs (STAGE, "mode=0755,size=1m", 0, err) < 0)
    return -1;
  if (bind_host_root (err) < 0)
    return -1;

  if (is_dir (STAGE "/dev"))
    {
      /* Device nodes stay usable on a read-only mount; ptys need devpts
         writable and POSIX shared memory a writable /dev/shm.  */
      if (is_mountpoint (STAGE "/dev/pts") && set_readonly (STAGE "/dev/pts", false, true, err) < 0)
        return -1;
      if (is_dir (STAGE "/dev/shm") && mount_tmpfs (STAGE "/dev/shm", "mode=1777", 0, err) < 0)
        return -1;
    }
  if (mount_tmpfs (STAGE "/tmp", "mode=1777", 0, err) < 0)
    return -1;
  if (mount ("proc", STAGE "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
    return esbx_make_error (err, errno, "mount proc");

  hide = xasprintf (STAGE "%s", cfg->hide);
  if (cfg->hide[0] == '/' && is_dir (hide)
      && mount_tmpfs (hide, "mode=0755,size=4k", MS_RDONLY | MS_NOEXEC, err) < 0)
    return -1;
  if (mount_workspace (wsfd, cfg->workspace, err) < 0)
    return -1;
  if (set_readonly (STAGE, false, false, err) < 0)
    return -1;

  if (chdir (STAGE) < 0)
    return esbx_make_error (err, errno, "chdir `%s`", STAGE);
  if (syscall (SYS_pivot_root, ".", ".") < 0)
    return esbx_make_error (err, errno, "pivot_root");
  if (umount2 (".", MNT_DETACH) < 0)
    return esbx_make_error (err, errno, "detach the old root");
  if (chdir ("/") < 0)
    return esbx_make_error (err, errno, "chdir `/`");
  return 0;
}
