/* ROOT/runtime/ID -> session, so that `delete` can name the session it
 * detaches from without asking runc (which would cost a second runc run on
 * every delete).  An entry is a symlink whose target is the session name:
 * one syscall to write, one to read, and atomic by nature.
 *
 * Container ids are unique per runc --root, not globally; Docker's are
 * 64 random hex digits, so one flat directory is enough.  */
#include "runtime.h"
#include "fs.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>

/* runc's rule for ids is ^[\w+-\.]+$; anything that could not be a file
   name is not mapped (runc refuses it anyway).  */
static bool
id_ok (const char *id)
{
  const char *p;

  if (id == NULL || *id == '\0' || strcmp (id, ".") == 0 || strcmp (id, "..") == 0
      || strlen (id) > NAME_MAX)
    return false;
  for (p = id; *p; p++)
    if (*p == '/')
      return false;
  return true;
}

int
runtime_map_set (const char *store_root, const char *id, const char *session, esbx_error_t *err)
{
  _cleanup_free_ char *dir = xasprintf ("%s/runtime", store_root);
  _cleanup_free_ char *suffix = NULL;
  _cleanup_free_ char *tmp = NULL;
  _cleanup_close_ int dirfd = -1;

  if (!id_ok (id))
    return 0;
  if (mkdir (dir, 0700) < 0 && errno != EEXIST)
    return esbx_make_error (err, errno, "mkdir `%s`", dir);
  dirfd = TEMP_FAILURE_RETRY (open (dir, O_DIRECTORY | O_RDONLY | O_CLOEXEC));
  if (dirfd < 0)
    return esbx_make_error (err, errno, "open `%s`", dir);
  /* A stale entry (a crash between create and delete) is replaced.  */
  suffix = esbx_random_hex (6);
  tmp = xasprintf (".%s.tmp-%s", id, suffix);
  if (symlinkat (session, dirfd, tmp) < 0)
    return esbx_make_error (err, errno, "symlink `%s/%s`", dir, tmp);
  if (renameat (dirfd, tmp, dirfd, id) < 0)
    {
      int saved = errno;
      unlinkat (dirfd, tmp, 0);
      return esbx_make_error (err, saved, "rename `%s/%s`", dir, id);
    }
  return 0;
}

char *
runtime_map_take (const char *store_root, const char *id)
{
  _cleanup_free_ char *path = NULL;
  char target[NAME_MAX + 1];
  ssize_t n;

  if (!id_ok (id))
    return NULL;
  path = xasprintf ("%s/runtime/%s", store_root, id);
  n = readlink (path, target, sizeof target - 1);
  if (n <= 0)
    return NULL;
  target[n] = '\0';
  unlink (path);
  if (!esbx_name_valid (target))
    return NULL;
  return xstrdup (target);
}
