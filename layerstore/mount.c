/* Overlay mounts of a session's layers.  */
#include "internal.h"
#include "text.h"
#include "utils.h"

#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

/* One fsconfig string; on failure an error naming KEY's directory.  */
static int
fsconfig_dir (int fsfd, const char *key, const char *dir, esbx_error_t *err)
{
  _cleanup_free_ char *what = NULL;

  if (esbx_fsconfig_string (fsfd, key, dir) == 0)
    return 0;
  what = xasprintf ("overlay %s", key);
  return esbx_fs_context_error (err, fsfd, what, dir);
}

/* The new mount API: each lower layer is its own `lowerdir+` string, so the
   one-page limit of mount(2) options does not apply.  Returns -2 when the
   kernel lacks `lowerdir+` so that the caller falls back.  */
static int
mount_fsconfig (char *const *lowers, size_t n, const char *upper, const char *work,
                const char *target, esbx_error_t *err)
{
  _cleanup_close_ int fsfd = -1;
  _cleanup_close_ int mfd = -1;
  size_t i;

  fsfd = (int)syscall (SYS_fsopen, "overlay", FSOPEN_CLOEXEC);
  if (fsfd < 0)
    return -2;
  esbx_fsconfig_string (fsfd, "source", "esbx");
  /* lowerdir+ appends below the previous one: add the top layer first.  */
  for (i = n; i > 0; i--)
    if (esbx_fsconfig_string (fsfd, "lowerdir+", lowers[i - 1]) < 0)
      {
        if (errno == EINVAL && i == n)
          return -2;
        return esbx_fs_context_error (err, fsfd, "overlay lower layer", lowers[i - 1]);
      }
  if (upper
      && (fsconfig_dir (fsfd, "upperdir", upper, err) < 0
          || fsconfig_dir (fsfd, "workdir", work, err) < 0))
    return -1;
  if (esbx_overlay_set_plain (fsfd, err) < 0)
    return -1;
  if (syscall (SYS_fsconfig, fsfd, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
    return esbx_fs_context_error (err, fsfd, "create overlay for", target);
  mfd = (int)syscall (SYS_fsmount, fsfd, FSMOUNT_CLOEXEC, 0);
  if (mfd < 0)
    return esbx_make_error (err, errno, "fsmount overlay for `%s`", target);
  if (syscall (SYS_move_mount, mfd, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH) < 0)
    return esbx_make_error (err, errno, "move overlay to `%s`", target);
  return 0;
}

/* Whether an overlay still uses UPPER as its upper directory, in this
   mount namespace or any other (a container's bind of a session's view),
   after its mounts here are gone: overlayfs marks the upper of a live
   superblock "in use", and a new overlay with index=on over an upper in
   use fails with EBUSY before it looks at its workdir.  The probe names
   a workdir on another mount (/proc), so that when the upper is free it
   fails with EINVAL there and creates nothing; the kernel logs a line for
   either.  EMPTY: an empty directory of the store, its lower layer.  */
int
esbx_overlay_upper_in_use (const char *upper, const char *empty)
{
  _cleanup_close_ int fsfd = (int)syscall (SYS_fsopen, "overlay", FSOPEN_CLOEXEC);
  int r;

  if (fsfd < 0 || esbx_fsconfig_string (fsfd, "lowerdir", empty) < 0
      || esbx_fsconfig_string (fsfd, "upperdir", upper) < 0
      || esbx_fsconfig_string (fsfd, "workdir", "/proc") < 0
      || esbx_fsconfig_string (fsfd, "index", "on") < 0)
    return 1; /* unknown: in use */
  r = (int)syscall (SYS_fsconfig, fsfd, FSCONFIG_CMD_CREATE, NULL, NULL, 0);
  if (r == 0)
    return 1; /* never: /proc cannot be its workdir */
  return errno == EINVAL ? 0 : 1;
}

/* A watch on the root of the overlay mounted at TARGET, made before its
   unmount: the kernel sends IN_UNMOUNT to the watches of a superblock when
   it ends, which happens in the umount2 call that drops its last mount,
   here or in any other mount namespace (the holder's workspace, a
   container's bind of the view).  So after our unmount, an IN_UNMOUNT
   means no overlay is left writing into its upper; none means a mount of
   it lives on somewhere.  The probe above answers the same question but
   costs a kernel error line each time (1.6 ms on a serial console).  */
int
esbx_overlay_watch (const char *target)
{
  _cleanup_close_ int fd = inotify_init1 (IN_NONBLOCK | IN_CLOEXEC);

  if (fd < 0 || inotify_add_watch (fd, target, IN_ONLYDIR | IN_DONT_FOLLOW | IN_DELETE_SELF) < 0)
    return -1;
  return take_fd (&fd);
}

bool
esbx_overlay_watch_ended (int fd)
{
  char buf[4096] __attribute__ ((aligned (__alignof__(struct inotify_event))));
  ssize_t n;

  while ((n = read (fd, buf, sizeof buf)) > 0)
    {
      const char *p = buf;

      while (p + sizeof (struct inotify_event) <= buf + n)
        {
          const struct inotify_event *ev = (const struct inotify_event *)p;

          if (ev->mask & IN_UNMOUNT)
            return true;
          p += sizeof *ev + ev->len;
        }
    }
  return false;
}

/* mount(2) says ENOENT without saying for which directory: the first one
   of the overlay that is missing.  */
static const char *
missing_dir (char *const *lowers, size_t n, const char *upper, const char *work)
{
  struct stat st;
  size_t i;

  if (upper && stat (upper, &st) < 0)
    return upper;
  if (work && stat (work, &st) < 0)
    return work;
  for (i = 0; i < n; i++)
    if (stat (lowers[i], &st) < 0)
      return lowers[i];
  return NULL;
}

/* mount(2) fallback: lower paths relative to the common "projects/P/layers"
   directory, mounted from a child that chdir()s there, so that the parent's
   working directory (esbxd is threaded) never changes.  */
static int
mount_legacy (char *const *lowers, size_t n, const char *upper, const char *work,
              const char *target, esbx_error_t *err)
{
  _cleanup_free_ char *data = NULL;
  _cleanup_free_ char *dir = NULL;
  size_t i, len = 0, dirlen;
  char *p;
  pid_t pid;
  int status;

  dir = xstrdup (lowers[0]);
  /* .../layers/ID/diff -> .../layers; the project's directory when a
     snapshot (.../snapshots/NAME/diff) is among them.  */
  for (i = 0; i < 2 && (p = strrchr (dir, '/')) != NULL; i++)
    *p = '\0';
  dirlen = strlen (dir);
  for (i = 0; i < n; i++)
    if (strncmp (lowers[i], dir, dirlen) != 0 || lowers[i][dirlen] != '/')
      {
        if ((p = strrchr (dir, '/')) != NULL)
          *p = '\0';
        dirlen = strlen (dir);
        break;
      }
  for (i = 0; i < n; i++)
    {
      if (strncmp (lowers[i], dir, dirlen) != 0 || lowers[i][dirlen] != '/')
        return esbx_make_error (err, 0, "overlay: layers of different projects");
      len += strlen (lowers[i]) - dirlen;
    }
  len += (upper ? strlen (upper) + strlen (work) : 0) + 128;
  if (len >= (size_t)sysconf (_SC_PAGESIZE))
    return esbx_make_error (err, E2BIG,
                            "overlay of %zu layers: options exceed one page on this kernel "
                            "(no fsconfig lowerdir+); run `esbx project squash`",
                            n);
  data = xmalloc (len);
  p = data + sprintf (data, "lowerdir=");
  for (i = n; i > 0; i--)
    p += sprintf (p, "%s%s", lowers[i - 1] + dirlen + 1, i > 1 ? ":" : "");
  if (upper)
    p += sprintf (p, ",upperdir=%s,workdir=%s", upper, work);
  for (i = 0; i < ESBX_OVERLAY_PLAIN_OPTIONS; i++)
    p += sprintf (p, ",%s=%s", esbx_overlay_plain_options[i][0], esbx_overlay_plain_options[i][1]);

  pid = fork ();
  if (pid < 0)
    return esbx_make_error (err, errno, "fork");
  if (pid == 0)
    {
      if (chdir (dir) < 0 || mount ("esbx", target, "overlay", 0, data) < 0)
        _exit (errno & 0xff);
      _exit (0);
    }
  if (TEMP_FAILURE_RETRY (waitpid (pid, &status, 0)) < 0)
    return esbx_make_error (err, errno, "waitpid");
  if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
    {
      int cause = WIFEXITED (status) ? WEXITSTATUS (status) : EINTR;
      const char *gone = cause == ENOENT ? missing_dir (lowers, n, upper, work) : NULL;

      if (gone)
        return esbx_make_error (err, cause, "mount overlay at `%s`: `%s`", target, gone);
      return esbx_make_error (err, cause, "mount overlay at `%s`", target);
    }
  return 0;
}

int
esbx_mount_overlay (char *const *lowers, size_t n, const char *upper, const char *work,
                    const char *target, esbx_error_t *err)
{
  int r;

  if (n == 0)
    return esbx_make_error (err, 0, "overlay at `%s`: no lower layer", target);
  if (n > ESBX_MAX_LAYERS)
    return esbx_make_error (err, 0,
                            "overlay at `%s`: %zu layers, overlayfs stacks at most %d; run "
                            "`esbx project squash`",
                            target, n, ESBX_MAX_LAYERS);
  r = getenv ("ESBX_LEGACY_MOUNT") ? -2 : mount_fsconfig (lowers, n, upper, work, target, err);
  if (r == -2)
    r = mount_legacy (lowers, n, upper, work, target, err);
  return r;
}

/* overlayfs stacks at most ESBX_MAX_LAYERS lower layers.  A deeper stack
   gets its bottom layers folded into a read-only overlay of their own at
   FOLDED: an overlay as a lower layer of another is one level of nesting,
   which the kernel allows, so stacks up to twice the limit mount.  */
int
esbx_mount_stack (char *const *lowers, size_t n, const char *upper, const char *work,
                  const char *target, const char *folded, const struct esbx_idmap *map,
                  esbx_error_t *err)
{
  _cleanup_free_ char **v = NULL;
  size_t k;

  if (n <= ESBX_MAX_LAYERS)
    return map ? esbx_mount_overlay_idmapped (lowers, n, upper, work, target, map, err)
               : esbx_mount_overlay (lowers, n, upper, work, target, err);
  /* Fold enough bottom layers (always two or more) to leave room for the
     folded one.  */
  k = n - (ESBX_MAX_LAYERS - 1);
  if (k > ESBX_MAX_LAYERS)
    return esbx_make_error (err, 0,
                            "%zu layers: more than %d cannot be mounted; run `esbx project squash`",
                            n, 2 * ESBX_MAX_LAYERS - 1);
  if (mkdir (folded, 0755) < 0 && errno != EEXIST)
    return esbx_make_error (err, errno, "mkdir `%s`", folded);
  if (!esbx_is_mountpoint (folded))
    {
      int r = map ? esbx_mount_overlay_idmapped (lowers, k, NULL, NULL, folded, map, err)
                  : esbx_mount_overlay (lowers, k, NULL, NULL, folded, err);
      if (r < 0)
        return r;
    }
  v = xmalloc ((n - k + 1) * sizeof (char *));
  v[0] = (char *)folded;
  memcpy (&v[1], &lowers[k], (n - k) * sizeof (char *));
  if (map)
    return esbx_mount_overlay_idmapped (v, n - k + 1, upper, work, target, map, err);
  return esbx_mount_overlay (v, n - k + 1, upper, work, target, err);
}

bool
esbx_is_mountpoint_at (int dirfd, const char *rel)
{
  struct statx a;

#ifdef STATX_ATTR_MOUNT_ROOT
  if (statx (dirfd, rel, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &a) == 0
      && (a.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT))
    return (a.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
#endif
  {
    /* A kernel without the attribute: the device of its parent.  */
    _cleanup_free_ char *parent = xasprintf ("%s/..", rel);
    struct statx b;

    if (statx (dirfd, rel, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &a) < 0
        || statx (dirfd, parent, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &b) < 0)
      return false;
    return a.stx_dev_major != b.stx_dev_major || a.stx_dev_minor != b.stx_dev_minor;
  }
}

bool
esbx_is_mountpoint (const char *path)
{
  struct statx a, b;
  _cleanup_free_ char *parent = xasprintf ("%s/..", path);

  if (statx (AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &a) < 0)
    return false;
#ifdef STATX_ATTR_MOUNT_ROOT
  if (a.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT)
    return (a.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
#endif
  if (statx (AT_FDCWD, parent, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &b) < 0)
    return false;
  return a.stx_dev_major != b.stx_dev_major || a.stx_dev_minor != b.stx_dev_minor;
}

int
esbx_unmount (const char *target, bool lazy, esbx_error_t *err)
{
  while (esbx_is_mountpoint (target))
    {
      if (umount2 (target, UMOUNT_NOFOLLOW) == 0)
        continue;
      if (errno == EBUSY && lazy && umount2 (target, MNT_DETACH | UMOUNT_NOFOLLOW) == 0)
        continue;
      if (errno == EINVAL || errno == ENOENT)
        return 0;
      return esbx_make_error (err, errno, "unmount `%s`", target);
    }
  return 0;
}
