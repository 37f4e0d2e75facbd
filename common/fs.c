#include "fs.h"
#include "text.h"
#include "utils.h"

#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>

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

int
esbx_read_file_at (int dirfd, const char *path, size_t limit, char **buf, size_t *len,
                   esbx_error_t *err)
{
  _cleanup_close_ int fd = -1;
  _cleanup_free_ char *data = NULL;
  size_t used = 0, cap = 4096;
  ssize_t r;

  fd = TEMP_FAILURE_RETRY (openat (dirfd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (fd < 0)
    return esbx_make_error (err, errno, "open `%s`", path);
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

static int
rm_rf_children (int dfd, const char *shown, esbx_error_t *err)
{
  _cleanup_dir_ DIR *d = NULL;
  struct dirent *de;
  int fd;

  fd = dup (dfd);
  if (fd < 0)
    return esbx_make_error (err, errno, "dup");
  d = fdopendir (fd);
  if (d == NULL)
    {
      close (fd);
      return esbx_make_error (err, errno, "opendir `%s`", shown);
    }
  while ((de = readdir (d)) != NULL)
    {
      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
        continue;
      if (esbx_rm_rf_at (dfd, de->d_name, err) < 0)
        return -1;
    }
  return 0;
}

int
esbx_rm_rf_at (int dirfd, const char *name, esbx_error_t *err)
{
  _cleanup_close_ int fd = -1;
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
  fd = TEMP_FAILURE_RETRY (openat (dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (fd < 0 && errno == ENOENT) /* removed by a concurrent remover */
    return 0;
  if (fd < 0)
    return esbx_make_error (err, errno, "open `%s`", name);
  /* A directory without write permission (chmod 0555 by a session) still
     has to go.  */
  if ((st.st_mode & 0700) != 0700)
    fchmod (fd, st.st_mode | 0700);
  if (rm_rf_children (fd, name, err) < 0)
    return -1;
  if (unlinkat (dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
    return esbx_make_error (err, errno, "rmdir `%s`", name);
  return 0;
}

int
esbx_lock_at (int dirfd, const char *name, bool exclusive, bool wait, esbx_error_t *err)
{
  _cleanup_close_ int fd = -1;
  int op = (exclusive ? LOCK_EX : LOCK_SH) | (wait ? 0 : LOCK_NB);

  fd = TEMP_FAILURE_RETRY (openat (dirfd, name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (fd < 0)
    return esbx_make_error (err, errno, "open lock `%s`", name);
  if (TEMP_FAILURE_RETRY (flock (fd, op)) < 0)
    return esbx_make_error (err, errno, "lock `%s`", name);
  return take_fd (&fd);
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
esbx_list_dir_at (int dirfd, const char *path, esbx_error_t *err)
{
  struct strv names = { 0 };
  _cleanup_dir_ DIR *d = NULL;
  struct dirent *de;
  int fd;

  fd = esbx_open_dir_at (dirfd, path, err);
  if (fd < 0)
    return NULL;
  d = fdopendir (fd);
  if (d == NULL)
    {
      close (fd);
      return esbx_make_error (err, errno, "opendir `%s`", path), NULL;
    }
  while ((de = readdir (d)) != NULL)
    {
      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
        continue;
      strv_push (&names, xstrdup (de->d_name));
    }
  if (names.v == NULL)
    return xmalloc0 (sizeof (char *));
  qsort (names.v, names.n, sizeof (char *), cmp_str);
  return names.v;
}

static int
du_fd (int dfd, unsigned long long *bytes, esbx_error_t *err)
{
  _cleanup_dir_ DIR *d = NULL;
  struct dirent *de;
  struct stat st;
  int fd = dup (dfd);

  if (fd < 0 || (d = fdopendir (fd)) == NULL)
    {
      if (fd >= 0)
        close (fd);
      return esbx_make_error (err, errno, "opendir");
    }
  while ((de = readdir (d)) != NULL)
    {
      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
        continue;
      if (fstatat (dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        continue;
      *bytes += (unsigned long long)st.st_blocks * 512;
      if (S_ISDIR (st.st_mode))
        {
          _cleanup_close_ int sub = TEMP_FAILURE_RETRY (
              openat (dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
          if (sub >= 0 && du_fd (sub, bytes, err) < 0)
            return -1;
        }
    }
  return 0;
}

int
esbx_du_at (int dirfd, const char *path, unsigned long long *bytes, esbx_error_t *err)
{
  _cleanup_close_ int fd = esbx_open_dir_at (dirfd, path, err);

  *bytes = 0;
  if (fd < 0)
    return -1;
  return du_fd (fd, bytes, err);
}
