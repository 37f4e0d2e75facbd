#include "fs.h"
#include "inodes.h"
#include "text.h"
#include "utils.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>

int
esbx_write_all (int fd, const void *data, size_t len)
{
  const char *p = data;
  ssize_t w;

  while (len > 0)
    {
      w = TEMP_FAILURE_RETRY (write (fd, p, len));
      if (w < 0)
        return -1;
      p += w;
      len -= (size_t)w;
    }
  return 0;
}

/* The kernels before close_range (5.9): one close per open descriptor.  */
static void
close_fds_walk (int from, int keep1, int keep2)
{
  _cleanup_dir_ DIR *d = opendir ("/proc/self/fd");
  struct dirent *de;
  int fd;

  if (d == NULL)
    return;
  while ((de = readdir (d)))
    {
      fd = atoi (de->d_name);
      if (fd >= from && fd != keep1 && fd != keep2 && fd != dirfd (d))
        close (fd);
    }
}

void
esbx_close_fds_except (int keep1, int keep2)
{
  int keep[2] = { keep1 < keep2 ? keep1 : keep2, keep1 < keep2 ? keep2 : keep1 };
  unsigned from = 3;
  size_t i;

  for (i = 0; i < 2; i++)
    {
      if (keep[i] < (int)from)
        continue;
      if ((unsigned)keep[i] > from && syscall (SYS_close_range, from, keep[i] - 1, 0) < 0)
        return close_fds_walk (3, keep1, keep2);
      from = (unsigned)keep[i] + 1;
    }
  if (syscall (SYS_close_range, from, ~0U, 0) < 0)
    close_fds_walk (3, keep1, keep2);
}

void
esbx_close_fds_from (int first)
{
  if (syscall (SYS_close_range, (unsigned)first, ~0U, 0) < 0)
    close_fds_walk (first, -1, -1);
}

static bool force_no_proc;

void
esbx_fs_force_no_proc (bool on)
{
  force_no_proc = on;
}

const char *
esbx_mode_type_name (mode_t mode)
{
  switch (mode & S_IFMT)
    {
    case S_IFREG:
      return "a regular file";
    case S_IFDIR:
      return "a directory";
    case S_IFLNK:
      return "a symlink";
    case S_IFIFO:
      return "a fifo";
    case S_IFSOCK:
      return "a socket";
    case S_IFCHR:
      return "a character device";
    case S_IFBLK:
      return "a block device";
    default:
      return "of an unknown type";
    }
}

/* Open the inode of PATHFD for reading through /proc; -1 with errno ENOENT
   when /proc is not procfs (a chroot, where it could even be content).  */
static int
open_proc_fd (int pathfd)
{
  struct statfs sfs;
  char proc[64];

  if (force_no_proc || statfs ("/proc", &sfs) < 0 || sfs.f_type != PROC_SUPER_MAGIC)
    {
      errno = ENOENT;
      return -1;
    }
  snprintf (proc, sizeof proc, "/proc/self/fd/%d", pathfd);
  return TEMP_FAILURE_RETRY (open (proc, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
}

int
esbx_reopen_regular (int pathfd, int dirfd, const char *name, const char *shown, esbx_error_t *err)
{
  _cleanup_close_ int fd = -1;
  struct stat want, got;

  if (fstat (pathfd, &want) < 0)
    return esbx_make_error (err, errno, "stat `%s`", shown);
  if (!S_ISREG (want.st_mode))
    return esbx_make_error (err, 0, "`%s` is %s, not a regular file", shown,
                            esbx_mode_type_name (want.st_mode));
  fd = open_proc_fd (pathfd);
  if (fd < 0 && errno == ENOENT)
    /* No /proc: the name again, without blocking, and the same inode.  */
    fd = TEMP_FAILURE_RETRY (
        openat (dirfd, name, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW | O_CLOEXEC));
  if (fd < 0)
    return esbx_make_error (err, errno, "open `%s`", shown);
  if (fstat (fd, &got) < 0)
    return esbx_make_error (err, errno, "stat `%s`", shown);
  if (!S_ISREG (got.st_mode))
    return esbx_make_error (err, 0, "`%s` is %s, not a regular file", shown,
                            esbx_mode_type_name (got.st_mode));
  if (got.st_dev != want.st_dev || got.st_ino != want.st_ino)
    return esbx_make_error (err, 0, "`%s` was replaced while being opened", shown);
  /* Opened O_RDONLY | O_NONBLOCK and nothing else F_SETFL changes: no
     need to read the flags back to clear O_NONBLOCK.  */
  if (fcntl (fd, F_SETFL, 0) < 0)
    return esbx_make_error (err, errno, "fcntl `%s`", shown);
  return take_fd (&fd);
}

int
esbx_open_regular_at (int dirfd, const char *path, esbx_error_t *err)
{
  _cleanup_close_ int pathfd = -1;

  pathfd = TEMP_FAILURE_RETRY (openat (dirfd, path, O_PATH | O_NOFOLLOW | O_CLOEXEC));
  if (pathfd < 0)
    return esbx_make_error (err, errno, "open `%s`", path);
  return esbx_reopen_regular (pathfd, dirfd, path, path, err);
}

int
esbx_read_file_at (int dirfd, const char *path, size_t limit, char **buf, size_t *len,
                   esbx_error_t *err)
{
  _cleanup_close_ int fd = -1;
  _cleanup_free_ char *data = NULL;
  size_t used = 0, cap = 4096;
  ssize_t r;

  fd = esbx_open_regular_at (dirfd, path, err);
  if (fd < 0)
    return -1;
  data = xmalloc (cap + 1);
  for (;;)
    {
      if (used == cap)
        {
          if (cap >= limit)
            return esbx_make_error (err, EFBIG, "read `%s`", path);
          cap *= 2;
          data = xrealloc (data, cap + 1);
        }
      r = TEMP_FAILURE_RETRY (read (fd, data + used, cap - used));
      if (r < 0)
        return esbx_make_error (err, errno, "read `%s`", path);
      if (r == 0)
        break;
      used += (size_t)r;
    }
  if (used > limit)
    return esbx_make_error (err, EFBIG, "read `%s`", path);
  data[used] = '\0';
  *buf = steal_pointer (&data);
  *len = used;
  return 0;
}

int
esbx_fsync_at (int dirfd, const char *path, esbx_error_t *err)
{
  _cleanup_close_ int fd = -1;

  fd = TEMP_FAILURE_RETRY (openat (dirfd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (fd < 0)
    return esbx_make_error (err, errno, "open `%s`", path);
  if (fsync (fd) < 0)
    return esbx_make_error (err, errno, "fsync `%s`", path);
  return 0;
}

int
esbx_syncfs (int fd, const char *shown, esbx_error_t *err)
{
  if (syncfs (fd) < 0)
    return esbx_make_error (err, errno, "flush `%s` to disk (syncfs)", shown);
  return 0;
}

static int
write_file_via_rename (int dirfd, const char *name, const void *data, size_t len, mode_t mode,
                       bool durable, esbx_error_t *err)
{
  _cleanup_free_ char *suffix = esbx_random_hex (6);
  _cleanup_free_ char *tmp = xasprintf (".%s.tmp-%s", name, suffix);
  _cleanup_close_ int fd = -1;

  fd = TEMP_FAILURE_RETRY (
      openat (dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode));
  if (fd < 0)
    return esbx_make_error (err, errno, "create `%s`", tmp);
  if (esbx_write_all (fd, data, len) < 0 || (durable && fsync (fd) < 0))
    {
      int saved = errno;
      unlinkat (dirfd, tmp, 0);
      return esbx_make_error (err, saved, "write `%s`", tmp);
    }
  if (renameat (dirfd, tmp, dirfd, name) < 0)
    {
      int saved = errno;
      unlinkat (dirfd, tmp, 0);
      return esbx_make_error (err, saved, "rename `%s`", name);
    }
  if (durable && fsync (dirfd) < 0)
    return esbx_make_error (err, errno, "fsync directory of `%s`", name);
  return 0;
}

int
esbx_write_file_atomic_at (int dirfd, const char *name, const void *data, size_t len, mode_t mode,
                           esbx_error_t *err)
{
  return write_file_via_rename (dirfd, name, data, len, mode, true, err);
}

int
esbx_replace_file_at (int dirfd, const char *name, const void *data, size_t len, mode_t mode,
                      esbx_error_t *err)
{
  return write_file_via_rename (dirfd, name, data, len, mode, false, err);
}

int
esbx_write_new_file_at (int dirfd, const char *name, const void *data, size_t len, mode_t mode,
                        esbx_error_t *err)
{
  _cleanup_close_ int fd = TEMP_FAILURE_RETRY (
      openat (dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode));

  if (fd < 0)
    return esbx_make_error (err, errno, "create `%s`", name);
  if (esbx_write_all (fd, data, len) < 0 || fsync (fd) < 0)
    {
      int saved = errno;
      unlinkat (dirfd, name, 0);
      return esbx_make_error (err, saved, "write `%s`", name);
    }
  return 0;
}

int
esbx_mkdir_p (const char *path, mode_t mode, esbx_error_t *err)
{
  _cleanup_free_ char *copy = xstrdup (path);
  char *p;

  for (p = copy + 1; *p; p++)
    {
      if (*p != '/')
        continue;
      *p = '\0';
      if (mkdir (copy, mode) < 0 && errno != EEXIST)
        return esbx_make_error (err, errno, "mkdir `%s`", copy);
      *p = '/';
    }
  if (mkdir (copy, mode) < 0 && errno != EEXIST)
    return esbx_make_error (err, errno, "mkdir `%s`", copy);
  return 0;
}

/* ---- trees of any depth ----------------------------------------------- */

/* A directory a tree walk is in: the name it has in its parent, what it is
   (to recognise it again from below), and its subdirectories still to
   visit.  */
struct level
{
  char *name;
  dev_t dev;
  ino_t ino;
  struct strv subdirs;
  size_t next;
};

struct tree_walk
{
  const char *top; /* the name the walk started from, for messages */
  bool remove;     /* rm -rf; otherwise du */
  unsigned long long bytes;
  struct esbx_inode_set linked; /* du: files with more than one name, counted once */
  struct level *levels;
  size_t n, cap;
};

static void
pop_level (struct tree_walk *w)
{
  struct level *l = &w->levels[--w->n];

  free (l->name);
  strv_free (&l->subdirs);
}

static int
push_level (struct tree_walk *w, int fd, const char *name, esbx_error_t *err)
{
  struct level *l;
  struct stat st;

  if (fstat (fd, &st) < 0)
    return esbx_make_error (err, errno, "stat `%s`", name);
  /* A directory without write permission (chmod 0555 by a session) still
     has to go.  */
  if (w->remove && (st.st_mode & 0700) != 0700)
    fchmod (fd, st.st_mode | 0700);
  if (w->n == w->cap)
    {
      w->cap = w->cap ? 2 * w->cap : 64;
      w->levels = xrealloc (w->levels, w->cap * sizeof *w->levels);
    }
  l = &w->levels[w->n++];
  memset (l, 0, sizeof *l);
  l->name = xstrdup (name);
  l->dev = st.st_dev;
  l->ino = st.st_ino;
  return 0;
}

/* False for the second and later names of a file met before: du counts
   hard-linked bytes once, as du(1) does.  */
static bool
counted_once (struct tree_walk *w, const struct stat *st)
{
  bool found = false;

  if (!S_ISDIR (st->st_mode) && st->st_nlink > 1)
    esbx_inode_set_add (&w->linked, st->st_dev, st->st_ino, NULL, 0, &found);
  return !found;
}

/* The names in directory FD (no . and ..), read with getdents64 from
   where FD is: fdopendir's checks (fstat, two fcntl) cost more than
   reading a small directory.  -1 with errno.  */
#define DIR_BUF_SIZE 32768

static int
read_names (int fd, struct strv *names)
{
  _cleanup_free_ char *buf = xmalloc (DIR_BUF_SIZE);
  ssize_t n, off;

  while ((n = TEMP_FAILURE_RETRY (getdents64 (fd, buf, DIR_BUF_SIZE))) > 0)
    for (off = 0; off < n;)
      {
        const struct dirent64 *de = (const struct dirent64 *)(void *)(buf + off);

        off += de->d_reclen;
        if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
          continue;
        strv_push (names, xstrdup (de->d_name));
      }
  return n < 0 ? -1 : 0;
}

/* One pass over the directory FD: files go (or are counted), directories
   are noted for later.  */
static int
visit_dir (struct tree_walk *w, int fd, esbx_error_t *err)
{
  struct level *l = &w->levels[w->n - 1];
  struct strv names = { 0 };
  struct stat st;
  size_t i;
  int ret = -1;

  /* Read from FD itself: a dup would share its offset anyway.  */
  if (read_names (fd, &names) < 0)
    {
      esbx_make_error (err, errno, "read directory `%s`", l->name);
      goto out;
    }
  for (i = 0; i < names.n; i++)
    {
      const char *name = names.v[i];

      if (fstatat (fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        {
          if (errno == ENOENT || !w->remove) /* gone meanwhile; du is best effort */
            continue;
          esbx_make_error (err, errno, "stat `%s`", name);
          goto out;
        }
      if (!w->remove && counted_once (w, &st))
        w->bytes += (unsigned long long)st.st_blocks * 512;
      if (S_ISDIR (st.st_mode))
        strv_push (&l->subdirs, xstrdup (name));
      else if (w->remove && unlinkat (fd, name, 0) < 0 && errno != ENOENT)
        {
          if (errno == EISDIR) /* became a directory meanwhile */
            strv_push (&l->subdirs, xstrdup (name));
          else
            {
              esbx_make_error (err, errno, "unlink `%s`", name);
              goto out;
            }
        }
    }
  ret = 0;
out:
  strv_free (&names);
  return ret;
}

/* Go down into the next subdirectory of the current level; 0 when there is
   none left.  *FD becomes the subdirectory's.  */
static int
descend (struct tree_walk *w, int *fd, esbx_error_t *err)
{
  for (;;)
    {
      struct level *l = &w->levels[w->n - 1];
      const char *name;
      int sub;

      if (l->next >= l->subdirs.n)
        return 0;
      name = l->subdirs.v[l->next++];
      sub = TEMP_FAILURE_RETRY (
          openat (*fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (sub < 0 && (errno == ENOENT || (!w->remove && errno == EACCES)))
        continue;
      if (sub < 0 && (errno == ENOTDIR || errno == ELOOP))
        {
          /* Replaced by something else meanwhile.  */
          if (w->remove && unlinkat (*fd, name, 0) < 0 && errno != ENOENT)
            return esbx_make_error (err, errno, "unlink `%s`", name);
          continue;
        }
      if (sub < 0)
        return esbx_make_error (err, errno, "open `%s`", name);
      if (push_level (w, sub, name, err) < 0)
        {
          close (sub);
          return -1;
        }
      close (*fd);
      *fd = sub;
      return 1;
    }
}

/* Back up one level through "..", which must be the directory we came
   from: a tree moved under our feet is an error, never a reason to go on
   somewhere else.  */
static int
ascend (struct tree_walk *w, int *fd, esbx_error_t *err)
{
  const struct level *parent = &w->levels[w->n - 2];
  _cleanup_close_ int up = -1;
  struct stat st;

  up = TEMP_FAILURE_RETRY (openat (*fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (up < 0 || fstat (up, &st) < 0)
    return esbx_make_error (err, errno, "`%s`: open the parent of `%s`", w->top,
                            w->levels[w->n - 1].name);
  if (st.st_dev != parent->dev || st.st_ino != parent->ino)
    return esbx_make_error (err, 0, "`%s`: `%s` was moved during the walk", w->top,
                            w->levels[w->n - 1].name);
  if (w->remove && unlinkat (up, w->levels[w->n - 1].name, AT_REMOVEDIR) < 0 && errno != ENOENT)
    return esbx_make_error (err, errno, "rmdir `%s`", w->levels[w->n - 1].name);
  pop_level (w);
  close (*fd);
  *fd = take_fd (&up);
  return 0;
}

/* Remove or measure DIRFD/NAME, a directory, without recursion and with at
   most three fds open whatever its depth: each level is left through ".."
   and recognised by device and inode, its subdirectories are kept as names
   in memory.  */
static int
walk_tree (struct tree_walk *w, int dirfd, const char *name, esbx_error_t *err)
{
  _cleanup_close_ int fd = -1;
  int r = 0;

  fd = TEMP_FAILURE_RETRY (openat (dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (fd < 0 && errno == ENOENT && w->remove) /* removed by a concurrent remover */
    return 0;
  if (fd < 0)
    return esbx_make_error (err, errno, "open `%s`", name);
  if (push_level (w, fd, name, err) < 0 || visit_dir (w, fd, err) < 0)
    {
      r = -1;
      goto out;
    }
  for (;;)
    {
      r = descend (w, &fd, err);
      if (r < 0)
        goto out;
      if (r > 0)
        {
          if ((r = visit_dir (w, fd, err)) < 0)
            goto out;
          continue;
        }
      if (w->n == 1)
        break;
      if ((r = ascend (w, &fd, err)) < 0)
        goto out;
    }
  if (w->remove && unlinkat (dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
    r = esbx_make_error (err, errno, "rmdir `%s`", name);
out:
  while (w->n > 0)
    pop_level (w);
  free (w->levels);
  w->levels = NULL;
  w->cap = 0;
  return r < 0 ? -1 : 0;
}

int
esbx_rm_rf_at (int dirfd, const char *name, esbx_error_t *err)
{
  struct tree_walk w = { .top = name, .remove = true };
  struct stat st;

  if (fstatat (dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    {
      if (errno == ENOENT)
        return 0;
      return esbx_make_error (err, errno, "stat `%s`", name);
    }
  if (!S_ISDIR (st.st_mode))
    {
      if (unlinkat (dirfd, name, 0) < 0 && errno != ENOENT)
        return esbx_make_error (err, errno, "unlink `%s`", name);
      return 0;
    }
  if (walk_tree (&w, dirfd, name, err) < 0)
    return esbx_error_wrap (err, "remove `%s`", name);
  return 0;
}

int
esbx_lock_fd (int fd, bool exclusive, bool wait, const char *shown, esbx_error_t *err)
{
  int op = (exclusive ? LOCK_EX : LOCK_SH) | (wait ? 0 : LOCK_NB);

  if (TEMP_FAILURE_RETRY (flock (fd, op)) < 0)
    return esbx_make_error (err, errno, "lock `%s`", shown);
  return 0;
}

int
esbx_lock_at (int dirfd, const char *name, bool exclusive, bool wait, esbx_error_t *err)
{
  _cleanup_close_ int fd = -1;

  fd = TEMP_FAILURE_RETRY (openat (dirfd, name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (fd < 0)
    return esbx_make_error (err, errno, "open lock `%s`", name);
  if (esbx_lock_fd (fd, exclusive, wait, name, err) < 0)
    return -1;
  return take_fd (&fd);
}

bool
esbx_lock_is_held (int fd)
{
  if (flock (fd, LOCK_SH | LOCK_NB) == 0)
    {
      flock (fd, LOCK_UN);
      return false;
    }
  return errno == EWOULDBLOCK;
}

int
esbx_open_dir_at (int dirfd, const char *path, esbx_error_t *err)
{
  int fd
      = TEMP_FAILURE_RETRY (openat (dirfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
  if (fd < 0)
    return esbx_make_error (err, errno, "open directory `%s`", path);
  return fd;
}

bool
esbx_exists_at (int dirfd, const char *path)
{
  struct stat st;
  return fstatat (dirfd, path, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static int
cmp_str (const void *a, const void *b)
{
  return strcmp (*(char *const *)a, *(char *const *)b);
}

char **
esbx_list_dir_fd (int fd, const char *shown, esbx_error_t *err)
{
  struct strv names = { 0 };

  if (read_names (fd, &names) < 0)
    {
      esbx_make_error (err, errno, "read directory `%s`", shown);
      strv_free (&names);
      return NULL;
    }
  if (names.v == NULL)
    return xmalloc0 (sizeof (char *));
  esbx_sort (names.v, names.n, sizeof (char *), cmp_str);
  return names.v;
}

char **
esbx_list_dir_at (int dirfd, const char *path, esbx_error_t *err)
{
  _cleanup_close_ int fd = esbx_open_dir_at (dirfd, path, err);

  if (fd < 0)
    return NULL;
  return esbx_list_dir_fd (fd, path, err);
}

int
esbx_du_at (int dirfd, const char *path, unsigned long long *bytes, esbx_error_t *err)
{
  struct tree_walk w = { .top = path, .remove = false };
  int r = walk_tree (&w, dirfd, path, err);

  /* What was counted until an error is still the best answer we have.  */
  *bytes = w.bytes;
  esbx_inode_set_free (&w.linked);
  return r;
}

int
esbx_dir_release (int *dirfd, size_t depth, struct esbx_held_dir *held, esbx_error_t *err)
{
  struct stat st;

  held->released = false;
  if (depth < ESBX_WALK_HELD_FDS)
    return 0;
  if (fstat (*dirfd, &st) < 0)
    return esbx_make_error (err, errno, "stat directory");
  held->dev = st.st_dev;
  held->ino = st.st_ino;
  held->released = true;
  close (*dirfd);
  *dirfd = -1;
  return 0;
}

int
esbx_dir_retake (int *dirfd, int childfd, struct esbx_held_dir *held, esbx_error_t *err)
{
  _cleanup_close_ int fd = -1;
  struct stat st;

  if (!held->released)
    return 0;
  held->released = false;
  fd = TEMP_FAILURE_RETRY (openat (childfd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd < 0 || fstat (fd, &st) < 0)
    return esbx_make_error (err, errno, "open `..`");
  if (st.st_dev != held->dev || st.st_ino != held->ino)
    return esbx_make_error (err, 0, "a directory was moved during the walk");
  *dirfd = take_fd (&fd);
  return 0;
}
