/* The mount calls the holder builds the session's root with, each failing
 * with an error that names the path.  */
#include "root.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

int
holder_tmpfs (const char *target, const char *options, unsigned long flags, esbx_error_t *err)
{
  if (mount ("tmpfs", target, "tmpfs", MS_NOSUID | flags, options) < 0)
    return esbx_make_error (err, errno, "mount tmpfs on `%s`", target);
  return 0;
}

int
holder_setattr (const char *path, bool recursive, uint64_t set, esbx_error_t *err)
{
  struct mount_attr attr = { .attr_set = set };

  if (mount_setattr (AT_FDCWD, path, recursive ? AT_RECURSIVE : 0, &attr, sizeof attr) < 0)
    return esbx_make_error (err, errno, "set the mount attributes of `%s`", path);
  return 0;
}

int
holder_bind (const char *src, const char *dst, bool recursive, uint64_t set, esbx_error_t *err)
{
  if (mount (src, dst, NULL, MS_BIND | (recursive ? MS_REC : 0), NULL) < 0)
    return esbx_make_error (err, errno, "bind `%s` on `%s`", src, dst);
  return set ? holder_setattr (dst, recursive, set, err) : 0;
}

/* Like Docker's maskedPaths: a file reads as empty (/dev/null over it), a
   directory as an empty read-only tmpfs.  What does not exist stays so.  */
int
holder_mask (const char *path, esbx_error_t *err)
{
  struct stat st;

  if (lstat (path, &st) < 0)
    return errno == ENOENT ? 0 : esbx_make_error (err, errno, "stat `%s`", path);
  if (S_ISDIR (st.st_mode))
    return holder_tmpfs (path, "mode=0755,size=4k", MS_RDONLY | MS_NODEV | MS_NOEXEC, err);
  if (S_ISLNK (st.st_mode))
    return 0;
  return holder_bind ("/dev/null", path, false, MOUNT_ATTR_RDONLY, err);
}

/* Like Docker's readonlyPaths.  */
int
holder_readonly (const char *path, esbx_error_t *err)
{
  if (access (path, F_OK) < 0)
    return 0;
  return holder_bind (path, path, true,
                      MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
                      err);
}
