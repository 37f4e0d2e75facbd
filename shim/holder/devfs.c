/* The session's /dev: a tmpfs with only what a build or an interactive
 * shell needs, read-only once built.
 *
 *   null zero full random urandom tty   binds of the host's nodes
 *   pts/                                a devpts instance of the session's own
 *   ptmx -> pts/ptmx
 *   shm/  mqueue/                       private tmpfs, mqueue of the ipc namespace
 *   fd stdin stdout stderr              links into /proc/self/fd
 *
 * No console, no block device, no kmsg.  A node made with mknod elsewhere
 * is useless: every writable mount of the session is nodev and the device
 * policy of the session cgroup (shim/lib/devices.c) allows only these.  */
#include "root.h"
#include "utils.h"

#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const nodes[] = { "null", "zero", "full", "random", "urandom", "tty" };

static const struct
{
  const char *name, *target;
} links[] = {
  { "ptmx", "pts/ptmx" },          { "fd", "/proc/self/fd" },       { "stdin", "/proc/self/fd/0" },
  { "stdout", "/proc/self/fd/1" }, { "stderr", "/proc/self/fd/2" },
};

static int
bind_node (const char *dev, const char *name, esbx_error_t *err)
{
  _cleanup_free_ char *src = xasprintf ("/dev/%s", name);
  _cleanup_free_ char *dst = xasprintf ("%s/%s", dev, name);
  int fd;

  fd = TEMP_FAILURE_RETRY (open (dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666));
  if (fd < 0)
    return esbx_make_error (err, errno, "create `%s`", dst);
  close (fd);
  return holder_bind (src, dst, false, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, err);
}

static int
make_dir (const char *dev, const char *name, char **out, esbx_error_t *err)
{
  *out = xasprintf ("%s/%s", dev, name);
  if (mkdir (*out, 0755) < 0)
    return esbx_make_error (err, errno, "mkdir `%s`", *out);
  return 0;
}

int
holder_mount_dev (const char *dev, uint64_t shm_size, uint32_t uid, esbx_error_t *err)
{
  _cleanup_free_ char *pts = NULL, *shm = NULL, *mq = NULL, *pts_opts = NULL;
  _cleanup_free_ char *shm_opts
      = xasprintf ("mode=1777,size=%" PRIu64 ",uid=%" PRIu32 ",gid=%" PRIu32, shm_size, uid, uid);
  size_t i;

  if (holder_tmpfs (dev, "mode=0755,size=64k", MS_NOEXEC, err) < 0)
    return -1;
  for (i = 0; i < ARRAY_SIZE (nodes); i++)
    if (bind_node (dev, nodes[i], err) < 0)
      return -1;
  if (make_dir (dev, "pts", &pts, err) < 0)
    return -1;
  /* gid 5 is tty on Debian and wherever Docker runs; like Docker.  In a
     user namespace, the session's 5.  */
  pts_opts = xasprintf ("newinstance,ptmxmode=0666,mode=0620,gid=%" PRIu32, uid + 5);
  if (mount ("devpts", pts, "devpts", MS_NOSUID | MS_NOEXEC, pts_opts) < 0)
    return esbx_make_error (err, errno, "mount devpts on `%s`", pts);
  if (make_dir (dev, "shm", &shm, err) < 0
      || holder_tmpfs (shm, shm_opts, MS_NODEV | MS_NOEXEC, err) < 0)
    return -1;
  if (make_dir (dev, "mqueue", &mq, err) < 0)
    return -1;
  if (mount ("mqueue", mq, "mqueue", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
    return esbx_make_error (err, errno, "mount mqueue on `%s`", mq);
  for (i = 0; i < ARRAY_SIZE (links); i++)
    {
      _cleanup_free_ char *p = xasprintf ("%s/%s", dev, links[i].name);
      if (symlink (links[i].target, p) < 0)
        return esbx_make_error (err, errno, "symlink `%s`", p);
    }
  return holder_setattr (dev, false, MOUNT_ATTR_RDONLY, err);
}
