/* A session's own disk (README, "A session's disk"): with `--disk SIZE`
 * the session's upper and work directories live on an ext4 filesystem of
 * that size, a sparse image in its directory:
 *
 *   sessions/S/disk.img   the image: SIZE plus ext4's journal and tables
 *   sessions/S/disk/      its mount (a loop device, loop.c): upper/, work/
 *   sessions/S/upper      a bind mount of disk/upper, where the rest of the
 *                         code finds the upper of any session
 *
 * The overlay takes disk/upper and disk/work (overlayfs wants both on one
 * mount): a write past the limit fails with ENOSPC in that session and
 * nowhere else.  The disk stays mounted while the session lives; discard
 * unmounts it (the trash keeps the image, restore mounts it again), and
 * after a reboot the first use mounts it again: everything that reads an
 * upper calls esbx_session_disk_mount first.  Mounting holds the image's
 * flock, so one image is never mounted by two processes at once.  */
#include "internal.h"
#include "copy.h"
#include "failpoint.h"
#include "fs.h"
#include "run.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define DISK_IMAGE "disk.img"
#define DISK_DIR   "disk"
#define MIB        (1024ull * 1024)
/* ext4's journal of the image: 1024 blocks, the least jbd2 takes.  */
#define JOURNAL_MIB 4

/* Where mkfs.ext4 is looked for (a daemon's PATH may lack them).  */
static const char *const sbin_dirs[] = { "/usr/sbin", "/sbin", NULL };

int
esbx_disk_size_parse (const char *text, int64_t *bytes, esbx_error_t *err)
{
  uint64_t v;

  if (strcmp (text, "none") == 0 || strcmp (text, "0") == 0)
    {
      *bytes = ESBX_DISK_NONE;
      return 0;
    }
  if (esbx_parse_size (text, &v, NULL) < 0 || v < ESBX_DISK_MIN || v > ESBX_DISK_MAX)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "invalid disk size `%s`: expected e.g. 512M or 10G (from 8M to "
                                 "%lluG), or none",
                                 text, (unsigned long long)(ESBX_DISK_MAX >> 30));
  *bytes = (int64_t)v;
  return 0;
}

char *
esbx_disk_size_string (int64_t bytes)
{
  static const struct
  {
    uint64_t n;
    char unit;
  } units[] = { { 1ull << 30, 'G' }, { 1ull << 20, 'M' }, { 1ull << 10, 'k' } };
  size_t i;

  if (bytes <= 0)
    return xstrdup ("none");
  for (i = 0; i < ARRAY_SIZE (units); i++)
    if ((uint64_t)bytes % units[i].n == 0)
      return xasprintf ("%" PRIu64 "%c", (uint64_t)bytes / units[i].n, units[i].unit);
  return xasprintf ("%" PRId64, bytes);
}

static bool
have_mkfs (void)
{
  size_t i;

  for (i = 0; sbin_dirs[i]; i++)
    {
      _cleanup_free_ char *path = xasprintf ("%s/mkfs.ext4", sbin_dirs[i]);
      if (access (path, X_OK) == 0)
        return true;
    }
  return false;
}

int
esbx_disk_check_host (int64_t bytes, esbx_error_t *err)
{
  _cleanup_free_ char *why = esbx_loop_unavailable ();
  _cleanup_free_ char *shown = esbx_disk_size_string (bytes);

  if (why)
    return esbx_make_error (err, 0, "a disk of %s: %s", shown, why);
  if (!have_mkfs ())
    return esbx_make_error (err, 0, "a disk of %s: mkfs.ext4 is not installed (e2fsprogs)", shown);
  return 0;
}

/* The image of a disk whose filesystem offers BYTES: ext4 keeps its
   journal, its inode tables (one 256-byte inode per 16 KiB) and a reserve
   of 2% (at most 16 MiB) for itself, so that `df` in the session shows
   about what was asked.  */
static uint64_t
image_size (uint64_t bytes)
{
  uint64_t reserve = bytes / 50 < 16 * MIB ? bytes / 50 : 16 * MIB;
  uint64_t size = (bytes + (JOURNAL_MIB + 1) * MIB + reserve) / 63 * 64;

  return (size + 4095) & ~4095ull;
}

/* mkfs.ext4 on the image IMG (/proc/self/fd/IMG in the child): tables
   left to be read as zeros (the file is sparse), no discard of a file that
   holds nothing yet.  Its output goes to a memfd read after it exits; an
   error names its first line.  */
static int
run_mkfs (int img, esbx_error_t *err)
{
  _cleanup_free_ char *dev = xasprintf ("/proc/self/fd/%d", img);
  char *argv[] = { "mkfs.ext4", "-q",
                   "-F",        "-m",
                   "0",         "-b",
                   "4096",      "-i",
                   "16384",     "-I",
                   "256",       "-J",
                   "size=4", /* JOURNAL_MIB */
                   "-O",        "^resize_inode",
                   "-E",        "lazy_itable_init=1,lazy_journal_init=1,nodiscard",
                   "-L",        "esbx-session",
                   dev,         NULL };
  _cleanup_close_ int out = memfd_create ("mkfs", MFD_CLOEXEC);
  _cleanup_close_ int null = TEMP_FAILURE_RETRY (open ("/dev/null", O_RDONLY | O_CLOEXEC));
  struct esbx_run r = { .argv = argv,
                        .dirs = sbin_dirs,
                        .in = null,
                        .out = out,
                        .err = out,
                        .keep = &img,
                        .n_keep = 1,
                        .netns = -1 };
  char msg[256];
  ssize_t n;
  int status;

  if (out < 0 || null < 0)
    return esbx_make_error (err, errno, "mkfs.ext4: output");
  if (esbx_run (&r, &status, err) < 0)
    return -1;
  if (WIFEXITED (status) && WEXITSTATUS (status) == 0)
    return 0;
  if (WIFEXITED (status) && WEXITSTATUS (status) == 127)
    return esbx_make_error (err, 0, "mkfs.ext4 is not installed (e2fsprogs)");
  n = pread (out, msg, sizeof msg - 1, 0);
  msg[n > 0 ? n : 0] = '\0';
  msg[strcspn (msg, "\n")] = '\0';
  return esbx_make_error (err, 0, "mkfs.ext4 exited %d%s%s",
                          WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status),
                          msg[0] ? ": " : "", msg);
}

/* Mount ext4 from DEV on DFD/disk: nosuid, nodev; what is deleted in it is
   given back to the store's filesystem (discard punches holes in the
   image); its inode tables are never written out in the background
   (noinit_itable: the image's holes read as zeros already).  */
static int
mount_disk (int dfd, const char *dir, const char *dev, esbx_error_t *err)
{
  static const char *const flags[] = { "noinit_itable", "discard" };
  _cleanup_close_ int fsfd = -1, mfd = -1;
  size_t i;

  fsfd = (int)syscall (SYS_fsopen, "ext4", FSOPEN_CLOEXEC);
  if (fsfd < 0 && errno == ENOSYS)
    {
      _cleanup_free_ char *target = xasprintf ("%s/" DISK_DIR, dir);
      if (mount (dev, target, "ext4", MS_NOSUID | MS_NODEV, "noinit_itable,discard") < 0)
        return esbx_make_error (err, errno, "mount `%s` at `%s`", dev, target);
      return 0;
    }
  if (fsfd < 0)
    return esbx_make_error (err, errno, "fsopen ext4");
  if (syscall (SYS_fsconfig, fsfd, FSCONFIG_SET_STRING, "source", dev, 0) < 0)
    return esbx_make_error (err, errno, "mount `%s`: source", dev);
  for (i = 0; i < ARRAY_SIZE (flags); i++)
    if (syscall (SYS_fsconfig, fsfd, FSCONFIG_SET_FLAG, flags[i], NULL, 0) < 0)
      return esbx_make_error (err, errno, "mount `%s`: option %s", dev, flags[i]);
  if (syscall (SYS_fsconfig, fsfd, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
    return esbx_make_error (err, errno, "mount `%s` (ext4)", dev);
  mfd = (int)syscall (SYS_fsmount, fsfd, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
  if (mfd < 0)
    return esbx_make_error (err, errno, "fsmount `%s`", dev);
  if (syscall (SYS_move_mount, mfd, "", dfd, DISK_DIR, MOVE_MOUNT_F_EMPTY_PATH) < 0)
    return esbx_make_error (err, errno, "mount `%s` at `%s/" DISK_DIR "`", dev, dir);
  return 0;
}

/* Bind DFD/disk/upper on DFD/upper.  */
static int
bind_upper (int dfd, const char *dir, esbx_error_t *err)
{
  _cleanup_close_ int tree = -1;

  tree = (int)syscall (SYS_open_tree, dfd, DISK_DIR "/upper",
                       OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW);
  if (tree < 0 && errno == ENOSYS)
    {
      _cleanup_free_ char *from = xasprintf ("%s/" DISK_DIR "/upper", dir);
      _cleanup_free_ char *to = xasprintf ("%s/upper", dir);
      if (mount (from, to, NULL, MS_BIND, NULL) < 0)
        return esbx_make_error (err, errno, "bind `%s` on `%s`", from, to);
      return 0;
    }
  if (tree < 0)
    return esbx_make_error (err, errno, "open `%s/" DISK_DIR "/upper`", dir);
  if (syscall (SYS_move_mount, tree, "", dfd, "upper", MOVE_MOUNT_F_EMPTY_PATH) < 0)
    return esbx_make_error (err, errno, "bind `%s/" DISK_DIR "/upper` on `%s/upper`", dir, dir);
  return 0;
}

static bool
mounted_at (const char *dir, const char *name)
{
  _cleanup_free_ char *path = xasprintf ("%s/%s", dir, name);
  return esbx_is_mountpoint (path);
}

/* The image IMG opened again: the loop device keeps the open file it is
   given, and the flock of IMG must not go with it.  */
static int
reopen_image (int dfd, const char *dir, int img, esbx_error_t *err)
{
  _cleanup_close_ int fd
      = TEMP_FAILURE_RETRY (openat (dfd, DISK_IMAGE, O_RDWR | O_NOFOLLOW | O_CLOEXEC));
  struct stat a, b;

  if (fd < 0 || fstat (fd, &a) < 0 || fstat (img, &b) < 0)
    return esbx_make_error (err, errno, "open `%s/" DISK_IMAGE "`", dir);
  if (a.st_ino != b.st_ino || a.st_dev != b.st_dev || !S_ISREG (a.st_mode))
    return esbx_make_error (err, 0, "`%s/" DISK_IMAGE "` changed while it was mounted", dir);
  return take_fd (&fd);
}

/* With IMG (the image, its flock held): mount what is not mounted of the
   disk of the session directory DFD (absolute DIR).  */
static int
mount_locked (int dfd, const char *dir, int img, esbx_error_t *err)
{
  if (!mounted_at (dir, DISK_DIR))
    {
      _cleanup_free_ char *dev = NULL;
      _cleanup_close_ int backing = reopen_image (dfd, dir, img, err);
      _cleanup_close_ int devfd = backing < 0 ? -1 : esbx_loop_attach (backing, &dev, err);

      if (devfd < 0)
        return -1;
      /* Autoclear: closing DEVFD unbinds the device unless it is mounted.  */
      if (mount_disk (dfd, dir, dev, err) < 0)
        return -1;
    }
  if (!mounted_at (dir, "upper"))
    {
      _cleanup_close_ int disk = esbx_open_dir_at (dfd, DISK_DIR, err);
      struct stat st;

      if (disk < 0)
        return -1;
      /* A new disk's first mount.  */
      if (fstatat (disk, "upper", &st, AT_SYMLINK_NOFOLLOW) < 0)
        {
          if (errno != ENOENT || mkdirat (disk, "upper", 0755) < 0
              || (mkdirat (disk, "work", 0755) < 0 && errno != EEXIST))
            return esbx_make_error (err, errno, "mkdir `%s/" DISK_DIR "/upper`", dir);
        }
      else if (!S_ISDIR (st.st_mode))
        return esbx_make_error (err, ENOTDIR, "`%s/" DISK_DIR "/upper`", dir);
      if (bind_upper (dfd, dir, err) < 0)
        return -1;
    }
  return 0;
}

/* The image of the session directory DFD, its flock held.  */
static int
lock_image (int dfd, const char *dir, esbx_error_t *err)
{
  _cleanup_close_ int img
      = TEMP_FAILURE_RETRY (openat (dfd, DISK_IMAGE, O_RDWR | O_NOFOLLOW | O_CLOEXEC));

  if (img < 0 && errno == ENOENT)
    return esbx_make_error (err, 0, "its disk image `%s/" DISK_IMAGE "` is missing", dir);
  if (img < 0)
    return esbx_make_error (err, errno, "open `%s/" DISK_IMAGE "`", dir);
  if (TEMP_FAILURE_RETRY (flock (img, LOCK_EX)) < 0)
    return esbx_make_error (err, errno, "lock `%s/" DISK_IMAGE "`", dir);
  return take_fd (&img);
}

int
esbx_session_disk_make (int dfd, const char *dir, int64_t bytes, esbx_error_t *err)
{
  _cleanup_close_ int img = -1;

  img = TEMP_FAILURE_RETRY (
      openat (dfd, DISK_IMAGE, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (img < 0)
    return esbx_make_error (err, errno, "create `%s/" DISK_IMAGE "`", dir);
  if (ftruncate (img, (off_t)image_size ((uint64_t)bytes)) < 0)
    return esbx_make_error (err, errno, "size `%s/" DISK_IMAGE "`", dir);
  if (run_mkfs (img, err) < 0)
    return esbx_error_wrap (err, "format `%s/" DISK_IMAGE "`", dir);
  if (mkdirat (dfd, DISK_DIR, 0700) < 0)
    return esbx_make_error (err, errno, "mkdir `%s/" DISK_DIR "`", dir);
  if (TEMP_FAILURE_RETRY (flock (img, LOCK_EX)) < 0)
    return esbx_make_error (err, errno, "lock `%s/" DISK_IMAGE "`", dir);
  if (mount_locked (dfd, dir, img, err) < 0)
    return -1;
  /* A crash from here on leaves a temp dir with a mounted disk for gc.  */
  esbx_failpoint ("session-disk-mounted");
  return 0;
}

int
esbx_session_disk_mount (esbx_store_t *store, const struct esbx_session *s, esbx_error_t *err)
{
  _cleanup_free_ char *dir = NULL, *rel = NULL;
  _cleanup_close_ int dfd = -1, img = -1;
  struct stat a, b;

  if (s->disk <= 0)
    return 0;
  dir = esbx_session_dir (store, s->name);
  if (mounted_at (dir, DISK_DIR) && mounted_at (dir, "upper"))
    return 0;
  dfd = esbx_session_open_dir (store, s->name, err);
  if (dfd < 0)
    return -1;
  img = lock_image (dfd, dir, err);
  if (img < 0)
    return esbx_error_wrap (err, "session `%s`", s->name);
  /* A discard may have moved the session away while we waited.  */
  rel = esbx_session_rel (s->name);
  if (fstat (dfd, &a) < 0 || fstatat (store->rootfd, rel, &b, AT_SYMLINK_NOFOLLOW) < 0
      || a.st_ino != b.st_ino || a.st_dev != b.st_dev)
    return esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0, "session `%s` does not exist",
                                 s->name);
  if (mount_locked (dfd, dir, img, err) < 0)
    return esbx_error_wrap (err, "session `%s`: its disk", s->name);
  return 0;
}

/* The mounted disk of session directory DFD (absolute DIR) written back
   into its image: a busy view is detached lazily, and the filesystem
   would then reach the image some time after the unmount returned, while
   the image is already in the trash.  */
static int
flush_disk (int dfd, const char *dir, esbx_error_t *err)
{
  _cleanup_close_ int disk = -1;

  if (!mounted_at (dir, DISK_DIR))
    return 0;
  disk = esbx_open_dir_at (dfd, DISK_DIR, err);
  if (disk < 0 || esbx_syncfs (disk, "the session's disk", err) < 0)
    return -1;
  return 0;
}

/* Unmount DIR/upper, then DIR/disk (LAZY: detach what is busy).  */
static int
unmount_dir (const char *dir, bool lazy, esbx_error_t *err)
{
  _cleanup_free_ char *upper = xasprintf ("%s/upper", dir);
  _cleanup_free_ char *disk = xasprintf ("%s/" DISK_DIR, dir);

  if (esbx_unmount (upper, lazy, err) < 0 || esbx_unmount (disk, lazy, err) < 0)
    return -1;
  return 0;
}

int
esbx_session_disk_unmount (esbx_store_t *store, const char *name, int *lock, esbx_error_t *err)
{
  _cleanup_free_ char *dir = esbx_session_dir (store, name);
  _cleanup_close_ int dfd = -1, img = -1;

  *lock = -1;
  dfd = esbx_session_open_dir (store, name, err);
  if (dfd < 0)
    return -1;
  if (!esbx_exists_at (dfd, DISK_IMAGE))
    return 0;
  img = lock_image (dfd, dir, err);
  if (img < 0 || flush_disk (dfd, dir, err) < 0 || unmount_dir (dir, true, err) < 0)
    return esbx_error_wrap (err, "session `%s`: unmount its disk", name);
  esbx_loop_detach_file (img);
  *lock = take_fd (&img);
  return 0;
}

void
esbx_session_disk_unmount_dir (const char *dir)
{
  esbx_error_t ignored = NULL;

  if (unmount_dir (dir, true, &ignored) < 0)
    esbx_error_free (&ignored);
}

char *
esbx_session_disk_dir (esbx_store_t *store, const struct esbx_session *s)
{
  _cleanup_free_ char *rel = NULL;

  if (s->disk <= 0)
    return NULL;
  rel = esbx_session_file (s->name, "%s", DISK_DIR);
  return esbx_store_abs (store, rel);
}

uint64_t
esbx_session_disk_allocated_at (int dirfd, const char *rel)
{
  _cleanup_free_ char *path = xasprintf ("%s/" DISK_IMAGE, rel);
  struct stat st;

  if (fstatat (dirfd, path, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG (st.st_mode))
    return 0;
  return (uint64_t)st.st_blocks * 512;
}

json_t *
esbx_session_disk_json (esbx_store_t *store, const struct esbx_session *s)
{
  _cleanup_free_ char *dir = NULL, *rel = NULL, *shown = NULL;
  json_t *o;
  bool mounted;

  if (s->disk <= 0)
    return json_new (JSON_NULL);
  dir = esbx_session_dir (store, s->name);
  rel = esbx_session_rel (s->name);
  shown = esbx_disk_size_string (s->disk);
  o = json_new (JSON_OBJECT);
  json_set_int (o, "limit", s->disk);
  json_set_string (o, "size", shown);
  mounted = mounted_at (dir, DISK_DIR);
  json_set (o, "mounted", json_new_bool (mounted));
  if (mounted)
    {
      _cleanup_free_ char *path = xasprintf ("%s/" DISK_DIR, dir);
      struct statvfs sv;

      if (statvfs (path, &sv) == 0)
        {
          json_set_int (o, "used", (int64_t)((sv.f_blocks - sv.f_bfree) * sv.f_frsize));
          json_set_int (o, "available", (int64_t)(sv.f_bavail * sv.f_frsize));
        }
    }
  /* What the image takes on the store's filesystem.  */
  json_set_int (o, "allocated", (int64_t)esbx_session_disk_allocated_at (store->rootfd, rel));
  return o;
}

int
esbx_session_disk_gc (esbx_store_t *store, FILE *report, esbx_error_t *err)
{
  return esbx_loop_detach_unused (store->root, report, err);
}

int
esbx_move_file_at (int fromfd, const char *from, int tofd, const char *to, esbx_error_t *err)
{
  _cleanup_free_ char *tmp = NULL;
  _cleanup_close_ int in = -1, out = -1;
  struct stat st;

  if (renameat (fromfd, from, tofd, to) == 0)
    return 0;
  if (errno != EXDEV)
    return esbx_make_error (err, errno, "rename `%s`", from);
  /* Into an upper on a disk of its own: copy, then rename in place.  */
  in = TEMP_FAILURE_RETRY (openat (fromfd, from, O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (in < 0 || fstat (in, &st) < 0)
    return esbx_make_error (err, errno, "open `%s`", from);
  if (!S_ISREG (st.st_mode))
    return esbx_make_error (err, EXDEV, "move `%s`: not a regular file", from);
  tmp = xasprintf (".esbx-move.%s", from);
  unlinkat (tofd, tmp, 0);
  out = TEMP_FAILURE_RETRY (
      openat (tofd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (out < 0)
    return esbx_make_error (err, errno, "create `%s`", tmp);
  if (esbx_copy_file_data (in, out, NULL, NULL, NULL, err) < 0)
    {
      unlinkat (tofd, tmp, 0);
      return esbx_error_wrap (err, "copy `%s`", from);
    }
  if (fchown (out, st.st_uid, st.st_gid) < 0 || fchmod (out, st.st_mode & 07777) < 0
      || renameat (tofd, tmp, tofd, to) < 0)
    {
      esbx_make_error (err, errno, "move `%s`", from);
      unlinkat (tofd, tmp, 0);
      return -1;
    }
  unlinkat (fromfd, from, 0);
  return 0;
}
