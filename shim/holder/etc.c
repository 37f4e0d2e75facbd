/* The session's /etc is the host's, read-only, without its secrets: every
 * file that is not world-readable and every directory that is not
 * world-searchable (shadow, gshadow, sudoers, ssh host keys, ssl/private,
 * ...) is masked, and so are the host's identity and the configuration of
 * the engines that run sessions (machine-id, docker, containerd, esbx),
 * whatever their modes.  The walk is bounded in depth and holds one
 * directory open per level.  */
#include "root.h"
#include "utils.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

#define ETC_MAX_DEPTH 16

static const char *const always_masked[] = { "machine-id", "docker", "containerd", "esbx" };

static bool
is_secret (const struct stat *st)
{
  if (S_ISDIR (st->st_mode))
    return (st->st_mode & (S_IROTH | S_IXOTH)) != (S_IROTH | S_IXOTH);
  if (S_ISREG (st->st_mode))
    return (st->st_mode & S_IROTH) == 0;
  return false;
}

static int
mask_secrets (int dfd, const char *path, int depth, esbx_error_t *err)
{
  _cleanup_dir_ DIR *d = NULL;
  struct dirent *de;

  d = fdopendir (dfd);
  if (d == NULL)
    {
      esbx_make_error (err, errno, "open `%s`", path);
      close (dfd);
      return -1;
    }
  while ((de = readdir (d)) != NULL)
    {
      _cleanup_free_ char *p = NULL;
      struct stat st;
      int sub;

      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
        continue;
      if (fstatat (dirfd (d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        continue;
      p = xasprintf ("%s/%s", path, de->d_name);
      if (is_secret (&st))
        {
          if (holder_mask (p, err) < 0)
            return -1;
          continue;
        }
      if (!S_ISDIR (st.st_mode) || depth >= ETC_MAX_DEPTH)
        continue;
      sub = TEMP_FAILURE_RETRY (
          openat (dirfd (d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (sub < 0)
        continue;
      if (mask_secrets (sub, p, depth + 1, err) < 0)
        return -1;
    }
  return 0;
}

int
holder_mask_etc (const char *etc, esbx_error_t *err)
{
  size_t i;
  int fd;

  for (i = 0; i < ARRAY_SIZE (always_masked); i++)
    {
      _cleanup_free_ char *p = xasprintf ("%s/%s", etc, always_masked[i]);
      if (holder_mask (p, err) < 0)
        return -1;
    }
  fd = TEMP_FAILURE_RETRY (open (etc, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (fd < 0)
    return errno == ENOENT ? 0 : esbx_make_error (err, errno, "open `%s`", etc);
  return mask_secrets (fd, etc, 0, err);
}
