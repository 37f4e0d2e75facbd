/* The session's root filesystem, built bubblewrap-style in the holder's own
 * mount namespace from an allow-list, never from the whole host root:
 *
 *   /                        a small tmpfs, read-only once built
 *   /usr /bin /sbin /lib*    read-only, nosuid, nodev binds of the host's
 *                            (symlinks such as /bin -> usr/bin are copied)
 *   /etc                     the host's, read-only, secrets masked (etc.c);
 *                            an egress session's resolv.conf bound on it
 *   /tmp /run /home          private tmpfs of --tmpfs-size bytes each
 *   /run/secrets             the session's secrets, a tmpfs of their own
 *                            (secrets.c), only with --secret
 *   /root                    private tmpfs, 0700: HOME of an exec as uid 0
 *   /dev                     minimal (devfs.c)
 *   /proc /sys               of the session, Docker's masks (procfs.c)
 *   WORKSPACE                the session's merged view, nodev, nosuid
 *
 * Nothing else of the host exists inside: no /var, /opt or /mnt, no
 * host socket, no other session.  With --rootfs DIR every top-level entry
 * of DIR (an image's root, kept read-only in the store) takes the place of
 * the allow-list.  The store is never in the allow-list; should its root
 * lie inside it (a store under /usr), it is covered by an empty tmpfs.
 *
 * The tree is staged on /tmp, which the host never sees: / was made a slave
 * first, so nothing here propagates out, while unmounts on the host
 * (discard) still propagate in.  Mount points are created beneath the stage
 * only, without following symlinks, so no path of a session's settings can
 * create anything on the host.  */
#include "root.h"
#include "fs.h"
#include "path.h"
#include "utils.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define STAGE "/tmp"

#define RO_BIND (MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)

/* Of the host root, what a session may see.  */
static const char *const host_allowed[] = {
  "usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc",
};

/* Made by the holder itself, whatever the source root holds.  */
static const char *const private_dirs[] = { "tmp", "run", "home", "root", "dev", "proc", "sys" };

static bool
in_list (const char *name, const char *const *list, size_t n)
{
  size_t i;

  for (i = 0; i < n; i++)
    if (strcmp (name, list[i]) == 0)
      return true;
  return false;
}

static unsigned char
type_at (int dfd, const char *name, unsigned char type)
{
  struct stat st;

  if (type != DT_UNKNOWN)
    return type;
  if (fstatat (dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return DT_UNKNOWN;
  return S_ISDIR (st.st_mode)   ? DT_DIR
         : S_ISLNK (st.st_mode) ? DT_LNK
         : S_ISREG (st.st_mode) ? DT_REG
                                : DT_UNKNOWN;
}

/* One top-level entry NAME of the source root SRC.  */
static int
bind_entry (int srcfd, const char *src, const char *name, unsigned char type, esbx_error_t *err)
{
  _cleanup_free_ char *from = xasprintf ("%s/%s", strcmp (src, "/") == 0 ? "" : src, name);
  _cleanup_free_ char *dst = xasprintf (STAGE "/%s", name);
  char target[PATH_MAX];
  ssize_t n;
  int fd;

  switch (type_at (srcfd, name, type))
    {
    case DT_DIR:
      if (mkdir (dst, 0755) < 0)
        return esbx_make_error (err, errno, "mkdir `%s`", dst);
      return holder_bind (from, dst, true, RO_BIND, err);

    case DT_LNK:
      n = readlinkat (srcfd, name, target, sizeof target - 1);
      if (n < 0)
        return esbx_make_error (err, errno, "readlink `%s`", from);
      target[n] = '\0';
      if (symlink (target, dst) < 0)
        return esbx_make_error (err, errno, "symlink `%s`", dst);
      return 0;

    case DT_REG:
      fd = TEMP_FAILURE_RETRY (open (dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
      if (fd < 0)
        return esbx_make_error (err, errno, "create `%s`", dst);
      close (fd);
      return holder_bind (from, dst, false, RO_BIND, err);

    default:
      return 0;
    }
}

/* The entries of SRC that a session sees: those of ALLOWED (all when NULL)
   that the holder does not make itself.  */
static int
bind_entries (const char *src, const char *const *allowed, size_t nallowed, esbx_error_t *err)
{
  _cleanup_dir_ DIR *d = NULL;
  struct dirent *de;

  d = opendir (src);
  if (d == NULL)
    return esbx_make_error (err, errno, "open the root `%s`", src);
  while ((de = readdir (d)) != NULL)
    {
      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0
          || in_list (de->d_name, private_dirs, ARRAY_SIZE (private_dirs)))
        continue;
      if (allowed && !in_list (de->d_name, allowed, nallowed))
        continue;
      if (bind_entry (dirfd (d), src, de->d_name, de->d_type, err) < 0)
        return -1;
    }
  return 0;
}

/* Sized: an unsized tmpfs may grow to half the host's RAM.  Its pages
   are charged to the memory cgroup of whoever writes them, the session's
   for every writer inside, so they count in its memory limit as well.  */
static int
private_tmpfs (const char *name, const char *mode, uint64_t size, esbx_error_t *err)
{
  _cleanup_free_ char *dst = xasprintf (STAGE "/%s", name);
  _cleanup_free_ char *options = xasprintf ("mode=%s,size=%" PRIu64, mode, size);

  if (mkdir (dst, 0755) < 0)
    return esbx_make_error (err, errno, "mkdir `%s`", dst);
  return holder_tmpfs (dst, options, MS_NODEV, err);
}

static int
kernel_dirs (uint64_t shm_size, esbx_error_t *err)
{
  if (mkdir (STAGE "/dev", 0755) < 0 || mkdir (STAGE "/proc", 0555) < 0
      || mkdir (STAGE "/sys", 0555) < 0)
    return esbx_make_error (err, errno, "mkdir in `%s`", STAGE);
  if (holder_mount_dev (STAGE "/dev", shm_size, err) < 0
      || holder_mount_proc (STAGE "/proc", err) < 0)
    return -1;
  return holder_mount_sys (STAGE "/sys", err);
}

/* Open (making what is missing) the directory REL beneath the stage, one
   component at a time and never through a symlink: a workspace such as
   /var/run/x, where /var/run is a symlink to /run, must not reach the host's
   /run.  */
static int
mkdir_beneath (int dfd, const char *rel, const char *workspace, esbx_error_t *err)
{
  _cleanup_free_ char *copy = xstrdup (rel);
  _cleanup_close_ int cur = TEMP_FAILURE_RETRY (fcntl (dfd, F_DUPFD_CLOEXEC, 3));
  char *comp, *save = NULL;

  if (cur < 0)
    return esbx_make_error (err, errno, "dup");
  for (comp = strtok_r (copy, "/", &save); comp; comp = strtok_r (NULL, "/", &save))
    {
      int next;

      if (mkdirat (cur, comp, 0755) < 0 && errno != EEXIST)
        return esbx_make_error (err, errno,
                                "workspace `%s`: its mount point cannot be created at `%s` (use a "
                                "top-level path, or one under /tmp or /home)",
                                workspace, comp);
      next = TEMP_FAILURE_RETRY (openat (cur, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (next < 0)
        return esbx_make_error (err, errno == ELOOP ? ELOOP : errno,
                                "workspace `%s`: `%s` is a symlink or not a directory in the "
                                "session's root",
                                workspace, comp);
      close (cur);
      cur = next;
    }
  return take_fd (&cur);
}

static int
check_workspace (const char *ws, esbx_error_t *err)
{
  static const char *const kernel[] = { "/proc", "/sys", "/dev" };
  size_t i, n;

  if (ws[0] != '/' || strstr (ws, "/..") != NULL || strcmp (ws, "/") == 0)
    return esbx_make_error (err, EINVAL, "workspace `%s`: not an absolute path below /", ws);
  for (i = 0; i < ARRAY_SIZE (kernel); i++)
    {
      n = strlen (kernel[i]);
      if (strncmp (ws, kernel[i], n) == 0 && (ws[n] == '\0' || ws[n] == '/'))
        return esbx_make_error (err, EINVAL, "workspace `%s`: not under %s", ws, kernel[i]);
    }
  return 0;
}

static int
mount_workspace (int stagefd, int wsfd, const char *workspace, esbx_error_t *err)
{
  _cleanup_close_ int target = -1;

  if (check_workspace (workspace, err) < 0)
    return -1;
  target = mkdir_beneath (stagefd, workspace, workspace, err);
  if (target < 0)
    return -1;
  if (move_mount (wsfd, "", target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
    return esbx_make_error (err, errno, "mount the workspace on `%s`", workspace);
  return 0;
}

/* Cover the store when its root (resolved when the store was opened) lies
   inside the session's tree.  */
static int
hide_store (int stagefd, const char *root, esbx_error_t *err)
{
  _cleanup_close_ int fd = -1;
  _cleanup_free_ char *magic = NULL;
  esbx_error_t oerr = NULL;

  if (root == NULL || root[0] != '/' || root[1] == '\0')
    return 0;
  fd = esbx_open_beneath (stagefd, root, O_PATH | O_DIRECTORY, 0, &oerr);
  if (fd < 0)
    {
      esbx_error_free (&oerr);
      return 0;
    }
  magic = xasprintf ("/proc/self/fd/%d", fd);
  if (mount ("tmpfs", magic, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY,
             "mode=0755,size=4k")
      < 0)
    return esbx_make_error (err, errno, "cover the store `%s`", root);
  return 0;
}

#define CA_BUNDLE "/etc/ssl/certs/ca-certificates.crt"

/* An egress session's resolver (shim/lib/egress.h) replaces the root's
   /etc/resolv.conf when that is a regular file; a root without one, or
   with a symlink there, resolves no names.  */
static int
bind_resolv_conf (int resolvfd, esbx_error_t *err)
{
  _cleanup_free_ char *from = NULL;
  struct stat st;

  if (resolvfd < 0)
    return 0;
  if (lstat (STAGE "/etc/resolv.conf", &st) < 0 || !S_ISREG (st.st_mode))
    return 0;
  from = xasprintf ("/proc/self/fd/%d", resolvfd);
  return holder_bind (from, STAGE "/etc/resolv.conf", false, RO_BIND, err);
}

/* The egress proxy's CA with the host's (shim/lib/egress/proxy_launch.c)
   replaces the root's bundle of trusted CAs, when that is a regular file.  */
static int
bind_ca_bundle (int cafd, esbx_error_t *err)
{
  _cleanup_free_ char *from = NULL;
  struct stat st;

  if (cafd < 0)
    return 0;
  if (lstat (STAGE CA_BUNDLE, &st) < 0 || !S_ISREG (st.st_mode))
    return 0;
  from = xasprintf ("/proc/self/fd/%d", cafd);
  return holder_bind (from, STAGE CA_BUNDLE, false, RO_BIND, err);
}

static int
build (const struct holder_config *cfg, int wsfd, int imagefd, int resolvfd, int cafd,
       esbx_error_t *err)
{
  _cleanup_close_ int stagefd = -1;
  _cleanup_free_ char *etc = NULL, *image = NULL;

  if (holder_tmpfs (STAGE, "mode=0755,size=1m", MS_NODEV, err) < 0)
    return -1;
  if (imagefd >= 0)
    {
      /* Through the fd: the store may be under /tmp, now covered.  */
      image = xasprintf ("/proc/self/fd/%d", imagefd);
      if (bind_entries (image, NULL, 0, err) < 0)
        return -1;
    }
  else if (bind_entries ("/", host_allowed, ARRAY_SIZE (host_allowed), err) < 0)
    return -1;
  etc = xstrdup (STAGE "/etc");
  if (holder_mask_etc (etc, err) < 0 || bind_resolv_conf (resolvfd, err) < 0
      || bind_ca_bundle (cafd, err) < 0)
    return -1;
  if (private_tmpfs ("tmp", "1777", cfg->tmpfs_size, err) < 0
      || private_tmpfs ("run", "0755", cfg->tmpfs_size, err) < 0
      || private_tmpfs ("home", "0755", cfg->tmpfs_size, err) < 0
      || private_tmpfs ("root", "0700", cfg->tmpfs_size, err) < 0)
    return -1;
  if (holder_secrets_mount (cfg, STAGE, err) < 0)
    return -1;
  if (kernel_dirs (cfg->shm_size, err) < 0)
    return -1;
  stagefd = TEMP_FAILURE_RETRY (open (STAGE, O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (stagefd < 0)
    return esbx_make_error (err, errno, "open `%s`", STAGE);
  if (hide_store (stagefd, cfg->hide, err) < 0)
    return -1;
  if (mount_workspace (stagefd, wsfd, cfg->workspace, err) < 0)
    return -1;
  return holder_setattr (STAGE, false, MOUNT_ATTR_RDONLY, err);
}

int
holder_setup_root (const struct holder_config *cfg, esbx_error_t *err)
{
  _cleanup_close_ int wsfd = -1, imagefd = -1, resolvfd = -1, cafd = -1;
  struct mount_attr attr = { .attr_set = MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID };

  if (mount (NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
    return esbx_make_error (err, errno, "make `/` a slave mount");
  /* Taken before /tmp is covered: the store may live there.  */
  wsfd = open_tree (AT_FDCWD, cfg->merged, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
  if (wsfd < 0)
    return esbx_make_error (err, errno, "clone the mount of `%s`", cfg->merged);
  if (mount_setattr (wsfd, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) < 0)
    return esbx_make_error (err, errno, "make the workspace nodev and nosuid");
  if (cfg->rootfs)
    {
      imagefd
          = TEMP_FAILURE_RETRY (open (cfg->rootfs, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (imagefd < 0)
        return esbx_make_error (err, errno, "open the image root `%s`", cfg->rootfs);
    }
  if (cfg->resolv_conf)
    {
      resolvfd = TEMP_FAILURE_RETRY (open (cfg->resolv_conf, O_PATH | O_NOFOLLOW | O_CLOEXEC));
      if (resolvfd < 0)
        return esbx_make_error (err, errno, "open `%s`", cfg->resolv_conf);
    }
  if (cfg->ca_bundle)
    {
      cafd = TEMP_FAILURE_RETRY (open (cfg->ca_bundle, O_PATH | O_NOFOLLOW | O_CLOEXEC));
      if (cafd < 0)
        return esbx_make_error (err, errno, "open `%s`", cfg->ca_bundle);
    }
  if (build (cfg, wsfd, imagefd, resolvfd, cafd, err) < 0)
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
