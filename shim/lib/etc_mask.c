/* The host's /etc as a session sees it: read-only, without its secrets.
 * Every file that is not world-readable and every directory that is not
 * world-searchable (shadow, gshadow, sudoers, ssh host keys, ssl/private,
 * ...) is masked, and so are the host's identity and the configuration of
 * the engines that run sessions (machine-id, docker, containerd, esbx),
 * whatever their modes.  The holder masks them in its mount namespace
 * (shim/holder/etc.c), a gVisor session's spec binds over them
 * (gvisor_spec.c): both walk here.  The walk is bounded in depth and holds
 * one directory open per level.  */
#include "etc_mask.h"
#include "utils.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>

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

static bool
masked_by_name (const char *name)
{
  for (size_t i = 0; i < ARRAY_SIZE (always_masked); i++)
    if (strcmp (name, always_masked[i]) == 0)
      return true;
  return false;
}

/* DFD (taken) is PATH, DEPTH levels beneath ETC.  */
static int
walk (int dfd, const char *path, int depth, esbx_etc_mask_fn mask, void *data, esbx_error_t *err)
{
  _cleanup_dir_ DIR *d = fdopendir (dfd);
  struct dirent *de;

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
      if ((depth == 0 && masked_by_name (de->d_name)) || is_secret (&st))
        {
          if (mask (data, p, &st, err) < 0)
            return -1;
          continue;
        }
      if (!S_ISDIR (st.st_mode) || depth >= ETC_MAX_DEPTH)
        continue;
      sub = TEMP_FAILURE_RETRY (
          openat (dirfd (d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (sub >= 0 && walk (sub, p, depth + 1, mask, data, err) < 0)
        return -1;
    }
  return 0;
}

int
esbx_etc_mask_walk (const char *etc, esbx_etc_mask_fn mask, void *data, esbx_error_t *err)
{
  int fd = TEMP_FAILURE_RETRY (open (etc, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));

  if (fd < 0)
    return errno == ENOENT ? 0 : esbx_make_error (err, errno, "open `%s`", etc);
  return walk (fd, etc, 0, mask, data, err);
}
