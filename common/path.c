#include "path.h"
#include "fs.h"
#include "text.h"
#include "utils.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>

static bool force_fallback;

void
esbx_path_force_fallback (bool on)
{
  force_fallback = on;
}

int
esbx_clean_relpath (const char *path, bool allow_root, char **out, esbx_error_t *err)
{
  _cleanup_free_ char *buf = xmalloc (strlen (path) + 1);
  _cleanup_free_ char *shown = NULL;
  const char *p = path;
  char *o = buf;

  while (*p)
    {
      const char *end;
      size_t n;

      while (*p == '/')
        p++;
      if (*p == '\0')
        break;
      end = strchrnul (p, '/');
      n = (size_t)(end - p);
      if (n == 1 && p[0] == '.')
        {
          p = end;
          continue;
        }
      if (n == 2 && p[0] == '.' && p[1] == '.')
        {
          shown = esbx_quote_path (path);
          return esbx_make_error (err, 0, "path `%s`: `..` is not allowed", shown);
        }
      if (n > 255)
        {
          shown = esbx_quote_path (path);
          return esbx_make_error (err, ENAMETOOLONG, "path `%s`", shown);
        }
      if (o != buf)
        *o++ = '/';
      memcpy (o, p, n);
      o += n;
      p = end;
    }
  *o = '\0';
  if (buf[0] == '\0' && !allow_root)
    {
      shown = esbx_quote_path (path);
      return esbx_make_error (err, 0, "path `%s` names the root", shown);
    }
  if (strlen (buf) >= 4096)
    return esbx_make_error (err, ENAMETOOLONG, "path");
  *out = steal_pointer (&buf);
  return 0;
}

/* A failed open of NAME beneath DFD: ELOOP when NAME is a symlink, as
   openat2 with RESOLVE_NO_SYMLINKS says, the open's errno otherwise.  */
static int
symlink_is_eloop (int dfd, const char *name)
{
  int saved = errno;
  struct stat st;

  errno
      = fstatat (dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK (st.st_mode) ? ELOOP : saved;
  return -1;
}

static int
open_walk (int rootfd, const char *rel, int flags, mode_t mode)
{
  _cleanup_free_ char *copy = xstrdup (rel);
  _cleanup_close_ int dfd = -1;
  char *p = copy, *slash;
  struct stat st;
  int fd;

  dfd = TEMP_FAILURE_RETRY (openat (rootfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (dfd < 0)
    return -1;
  if (*p == '\0')
    return TEMP_FAILURE_RETRY (openat (rootfd, ".", flags | O_CLOEXEC, mode));
  while ((slash = strchr (p, '/')) != NULL)
    {
      *slash = '\0';
      fd = TEMP_FAILURE_RETRY (openat (dfd, p, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (fd < 0)
        return symlink_is_eloop (dfd, p);
      close (dfd);
      dfd = fd;
      p = slash + 1;
    }
  fd = TEMP_FAILURE_RETRY (openat (dfd, p, flags | O_CLOEXEC | O_NOFOLLOW, mode));
  if (fd < 0)
    return symlink_is_eloop (dfd, p);
  /* O_PATH | O_NOFOLLOW opens a symlink itself; RESOLVE_NO_SYMLINKS
     refuses it.  */
  if ((flags & O_PATH) && fstat (fd, &st) == 0 && S_ISLNK (st.st_mode))
    {
      close (fd);
      errno = ELOOP;
      return -1;
    }
  return fd;
}

static int
open_clean (int rootfd, const char *rel, int flags, mode_t mode)
{
  struct open_how how = { 0 };
  int fd;

  if (!force_fallback)
    {
      how.flags = (unsigned long long)(flags | O_CLOEXEC | O_NOFOLLOW);
      how.mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0;
      how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
      fd = (int)TEMP_FAILURE_RETRY (
          syscall (SYS_openat2, rootfd, rel[0] ? rel : ".", &how, sizeof how));
      if (fd >= 0 || (errno != ENOSYS && errno != EPERM))
        return fd;
    }
  return open_walk (rootfd, rel, flags, mode);
}

int
esbx_open_beneath (int rootfd, const char *path, int flags, mode_t mode, esbx_error_t *err)
{
  _cleanup_free_ char *rel = NULL;
  _cleanup_free_ char *shown = NULL;
  int fd;

  if (esbx_clean_relpath (path, true, &rel, err) < 0)
    return -1;
  fd = open_clean (rootfd, rel, flags, mode);
  if (fd < 0)
    {
      shown = esbx_quote_path (path);
      return esbx_make_error (err, errno == ELOOP || errno == EXDEV ? ELOOP : errno,
                              "open `%s` beneath the session root", shown);
    }
  return fd;
}

int
esbx_open_parent_beneath (int rootfd, const char *path, char **base, esbx_error_t *err)
{
  _cleanup_free_ char *rel = NULL;
  _cleanup_free_ char *shown = NULL;
  char *slash;
  int fd;

  if (esbx_clean_relpath (path, false, &rel, err) < 0)
    return -1;
  slash = strrchr (rel, '/');
  if (slash == NULL)
    {
      fd = TEMP_FAILURE_RETRY (openat (rootfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC));
      *base = xstrdup (rel);
    }
  else
    {
      *slash = '\0';
      fd = open_clean (rootfd, rel, O_PATH | O_DIRECTORY, 0);
      *base = xstrdup (slash + 1);
    }
  if (fd < 0)
    {
      free (*base);
      *base = NULL;
      shown = esbx_quote_path (path);
      return esbx_make_error (err, errno == EXDEV ? ELOOP : errno,
                              "open parent of `%s` beneath the session root", shown);
    }
  return fd;
}

int
esbx_open_regular_beneath (int rootfd, const char *path, esbx_error_t *err)
{
  _cleanup_free_ char *base = NULL;
  _cleanup_free_ char *shown = NULL;
  _cleanup_close_ int dirfd = -1;
  _cleanup_close_ int pathfd = -1;

  dirfd = esbx_open_parent_beneath (rootfd, path, &base, err);
  if (dirfd < 0)
    return -1;
  shown = esbx_quote_path (path);
  pathfd = TEMP_FAILURE_RETRY (openat (dirfd, base, O_PATH | O_NOFOLLOW | O_CLOEXEC));
  if (pathfd < 0)
    return esbx_make_error (err, errno == ELOOP ? ELOOP : errno,
                            "open `%s` beneath the session root", shown);
  return esbx_reopen_regular (pathfd, dirfd, base, shown, err);
}
