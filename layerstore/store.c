/* The store root: its directories and its temp area.  */
#include "internal.h"
#include "fs.h"
#include "text.h"
#include "utils.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>

int
esbx_store_open (const char *root, esbx_store_t **out, esbx_error_t *err)
{
  static const char *const dirs[] = { "projects", "sessions", "tmp" };
  _cleanup_close_ int fd = -1;
  esbx_store_t *s;
  size_t i;

  if (root == NULL || root[0] == '\0')
    root = getenv ("ESBX_ROOT");
  if (root == NULL || root[0] == '\0')
    root = ESBX_DEFAULT_ROOT;
  if (root[0] != '/')
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "store root `%s` must be absolute", root);
  if (esbx_mkdir_p (root, 0711, err) < 0)
    return esbx_error_wrap (err, "store `%s`", root);
  fd = esbx_open_dir_at (AT_FDCWD, root, err);
  if (fd < 0)
    return esbx_error_wrap (err, "store");
  for (i = 0; i < ARRAY_SIZE (dirs); i++)
    if (mkdirat (fd, dirs[i], 0711) < 0 && errno != EEXIST)
      return esbx_make_error (err, errno, "store `%s`: mkdir `%s`", root, dirs[i]);
  s = xmalloc0 (sizeof *s);
  /* Resolved once: paths built from it then compare equal to what
     /proc/self/mountinfo shows, and a session's root hides the store by
     where it really is, whatever symlinks lead to it.  */
  s->root = realpath (root, NULL);
  if (s->root == NULL)
    s->root = xstrdup (root);
  for (i = strlen (s->root); i > 1 && s->root[i - 1] == '/'; i--)
    s->root[i - 1] = '\0';
  s->rootfd = take_fd (&fd);
  *out = s;
  return 0;
}

void
esbx_store_close (esbx_store_t *store)
{
  if (store == NULL)
    return;
  if (store->rootfd >= 0)
    close (store->rootfd);
  free (store->root);
  free (store);
}

int
esbx_store_creation_lock (esbx_store_t *store, bool exclusive, esbx_error_t *err)
{
  return esbx_lock_at (store->rootfd, "gc.lock", exclusive, true, err);
}

int
esbx_mkdir_locked (esbx_store_t *store, const char *rel, esbx_error_t *err)
{
  _cleanup_close_ int guard = -1;
  _cleanup_close_ int fd = -1;

  /* gc sweeps temp areas holding this lock exclusively: it cannot see the
     directory between its mkdir and its flock.  */
  guard = esbx_store_creation_lock (store, false, err);
  if (guard < 0)
    return -1;
  if (mkdirat (store->rootfd, rel, 0700) < 0)
    return esbx_make_error (err, errno, "mkdir `%s/%s`", store->root, rel);
  fd = esbx_open_dir_at (store->rootfd, rel, err);
  if (fd < 0)
    return -1;
  if (esbx_lock_fd (fd, true, false, rel, err) < 0)
    return -1;
  return take_fd (&fd);
}

int
esbx_store_tmpdir (esbx_store_t *store, const char *prefix, char **path, esbx_error_t *err)
{
  _cleanup_free_ char *hex = esbx_random_hex (8);
  _cleanup_free_ char *name = xasprintf ("tmp/%s-%s", prefix, hex);
  int fd;

  /* gc skips temp dirs whose lock is held: the holder of this fd is alive.  */
  fd = esbx_mkdir_locked (store, name, err);
  if (fd < 0)
    return -1;
  *path = xasprintf ("%s/%s", store->root, name);
  return fd;
}
