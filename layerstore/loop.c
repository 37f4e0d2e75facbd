/* Loop devices over the disk images of sessions (session_disk.c).  A
 * device is bound with autoclear: it unbinds itself when its last user,
 * the mount, goes, so unmounting a disk is all that frees its device.  An
 * image already bound (a mount that was detached lazily and is still in
 * use, or a device someone bound by hand) gets that device again, never a
 * second one: two filesystems over one image would corrupt it, one
 * device mounted twice is one filesystem.  gc unbinds the devices of the
 * store's images that no mount uses.  */
#include "internal.h"
#include "fs.h"
#include "utils.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define LOOP_CONTROL "/dev/loop-control"
/* Others take free devices too: try again when one was taken under us.  */
#define LOOP_TRIES 64

/* The kernel's encoding of a device number in loop_info64.lo_device.  */
static uint64_t
kernel_dev (dev_t d)
{
  uint64_t ma = major (d), mi = minor (d);
  return (mi & 0xff) | (ma << 8) | ((mi & ~0xffull) << 12);
}

char *
esbx_loop_unavailable (void)
{
  _cleanup_close_ int fd = TEMP_FAILURE_RETRY (open (LOOP_CONTROL, O_RDWR | O_CLOEXEC));

  /* Something else at that path (a container's /dev) is no loop control.  */
  if (fd < 0 || ioctl (fd, LOOP_CTL_GET_FREE) < 0)
    return xasprintf ("this host has no loop devices (%s: %s)", LOOP_CONTROL, strerror (errno));
  return NULL;
}

/* N of each bound device "loopN" (its /sys/block/loopN/loop exists), in
 *OUT (-1 terminated).  */
static int *
bound_devices (void)
{
  _cleanup_dir_ DIR *d = opendir ("/sys/block");
  struct dirent *e;
  size_t n = 0, cap = 16;
  int *v = xmalloc (cap * sizeof *v);

  while (d && (e = readdir (d)) != NULL)
    {
      _cleanup_free_ char *probe = NULL;
      char *end;
      long k;

      if (strncmp (e->d_name, "loop", 4) != 0)
        continue;
      k = strtol (e->d_name + 4, &end, 10);
      if (end == e->d_name + 4 || *end != '\0' || k < 0 || k > INT32_MAX)
        continue;
      probe = xasprintf ("/sys/block/%s/loop", e->d_name);
      if (access (probe, F_OK) < 0)
        continue;
      if (n + 1 >= cap)
        v = xrealloc (v, (cap *= 2) * sizeof *v);
      v[n++] = (int)k;
    }
  v[n] = -1;
  return v;
}

/* The status of device N when it is bound, opened with FLAGS: its fd, or
   -1.  */
static int
open_bound (int n, int flags, struct loop_info64 *info)
{
  _cleanup_free_ char *dev = xasprintf ("/dev/loop%d", n);
  _cleanup_close_ int fd = TEMP_FAILURE_RETRY (open (dev, flags | O_CLOEXEC));

  if (fd < 0 || ioctl (fd, LOOP_GET_STATUS64, info) < 0)
    return -1;
  return take_fd (&fd);
}

/* The device bound to the file of ST, or -1 with *FD -1; a device bound
   to part of it or read-only is an error.  */
static int
find_bound (const struct stat *st, int *fd, esbx_error_t *err)
{
  _cleanup_free_ int *v = bound_devices ();
  size_t i;

  *fd = -1;
  for (i = 0; v[i] >= 0; i++)
    {
      struct loop_info64 info;
      _cleanup_close_ int dfd = open_bound (v[i], O_RDWR, &info);

      if (dfd < 0 || info.lo_inode != (uint64_t)st->st_ino
          || info.lo_device != kernel_dev (st->st_dev))
        continue;
      if (info.lo_offset != 0 || info.lo_sizelimit != 0 || (info.lo_flags & LO_FLAGS_READ_ONLY))
        return esbx_make_error (err, EBUSY, "bound to /dev/loop%d with other settings", v[i]);
      /* Bound by hand, or by a process that died before mounting it:
         from now on it goes with its last mount, as a device of ours.  */
      if (!(info.lo_flags & LO_FLAGS_AUTOCLEAR))
        {
          info.lo_flags |= LO_FLAGS_AUTOCLEAR;
          if (ioctl (dfd, LOOP_SET_STATUS64, &info) < 0)
            return esbx_make_error (err, errno, "set autoclear on /dev/loop%d", v[i]);
        }
      *fd = take_fd (&dfd);
      return v[i];
    }
  return -1;
}

int
esbx_loop_attach (int fd, char **dev, esbx_error_t *err)
{
  _cleanup_close_ int ctl = -1;
  struct stat st;
  int n, k, devfd;

  if (fstat (fd, &st) < 0)
    return esbx_make_error (err, errno, "stat");
  n = find_bound (&st, &devfd, err);
  if (devfd >= 0)
    {
      *dev = xasprintf ("/dev/loop%d", n);
      return devfd;
    }
  if (err && *err)
    return -1;
  ctl = TEMP_FAILURE_RETRY (open (LOOP_CONTROL, O_RDWR | O_CLOEXEC));
  if (ctl < 0)
    return esbx_make_error (err, errno, "this host has no loop devices: open `%s`", LOOP_CONTROL);
  for (k = 0; k < LOOP_TRIES; k++)
    {
      struct loop_config cfg = { 0 };
      _cleanup_free_ char *path = NULL;
      _cleanup_close_ int d = -1;

      n = ioctl (ctl, LOOP_CTL_GET_FREE);
      if (n < 0)
        return esbx_make_error (err, errno, "get a free loop device");
      path = xasprintf ("/dev/loop%d", n);
      d = TEMP_FAILURE_RETRY (open (path, O_RDWR | O_CLOEXEC));
      if (d < 0)
        {
          /* Made by LOOP_CTL_GET_FREE, its node not there yet.  */
          if (errno == ENOENT)
            {
              usleep (1000);
              continue;
            }
          return esbx_make_error (err, errno, "open `%s`", path);
        }
      cfg.fd = (uint32_t)fd;
      cfg.block_size = 4096;
      /* Direct I/O: the image's pages are not cached a second time in the
         store's filesystem (the kernel turns it off where that cannot).  */
      cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR | LO_FLAGS_DIRECT_IO;
      if (ioctl (d, LOOP_CONFIGURE, &cfg) == 0)
        {
          *dev = steal_pointer (&path);
          return take_fd (&d);
        }
      /* Taken by another process since it was free.  */
      if (errno != EBUSY)
        return esbx_make_error (err, errno, "configure `%s`", path);
    }
  return esbx_make_error (err, EBUSY, "no free loop device after %d tries", LOOP_TRIES);
}

void
esbx_loop_detach_file (int fd)
{
  _cleanup_close_ int dfd = -1, excl = -1;
  esbx_error_t ignored = NULL;
  struct loop_info64 info;
  struct stat st;
  int n;

  if (fstat (fd, &st) < 0)
    return;
  n = find_bound (&st, &dfd, &ignored);
  esbx_error_free (&ignored);
  if (dfd < 0)
    return;
  close (take_fd (&dfd));
  /* Still mounted (a lazy unmount): its autoclear unbinds it later.  */
  excl = open_bound (n, O_RDONLY | O_EXCL, &info);
  if (excl >= 0 && info.lo_inode == (uint64_t)st.st_ino)
    ioctl (excl, LOOP_CLR_FD, 0);
}

/* Whether the file the sysfs of device N names is under PREFIX/.  */
static bool
backed_beneath (int n, const char *prefix, char **file)
{
  _cleanup_free_ char *rel = xasprintf ("/sys/block/loop%d/loop/backing_file", n);
  _cleanup_free_ char *text = NULL;
  size_t len, plen = strlen (prefix);

  if (esbx_read_file_at (AT_FDCWD, rel, PATH_MAX + 32, &text, &len, NULL) < 0)
    return false;
  while (len > 0 && text[len - 1] == '\n')
    text[--len] = '\0';
  if (strncmp (text, prefix, plen) != 0 || text[plen] != '/')
    return false;
  *file = steal_pointer (&text);
  return true;
}

int
esbx_loop_detach_unused (const char *prefix, FILE *report, esbx_error_t *err)
{
  _cleanup_free_ int *v = bound_devices ();
  size_t i;

  for (i = 0; v[i] >= 0; i++)
    {
      _cleanup_free_ char *file = NULL;
      _cleanup_close_ int dfd = -1, img = -1;
      struct loop_info64 info;
      struct stat st;

      if (!backed_beneath (v[i], prefix, &file))
        continue;
      /* Exclusive: fails while a filesystem is mounted from it.  */
      dfd = open_bound (v[i], O_RDONLY | O_EXCL, &info);
      if (dfd < 0)
        continue;
      /* A session mounting its disk holds the image's lock from binding
         the device to mounting it: not unused, only not mounted yet.  */
      img = TEMP_FAILURE_RETRY (open (file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
      if (img >= 0
          && (fstat (img, &st) < 0 || (uint64_t)st.st_ino != info.lo_inode
              || TEMP_FAILURE_RETRY (flock (img, LOCK_EX | LOCK_NB)) < 0))
        continue;
      if (ioctl (dfd, LOOP_CLR_FD, 0) < 0)
        {
          if (errno == ENXIO)
            continue;
          return esbx_make_error (err, errno, "detach /dev/loop%d (`%s`)", v[i], file);
        }
      if (report)
        fprintf (report, "detached /dev/loop%d, which no mount used (`%s`)\n", v[i], file);
    }
  return 0;
}
