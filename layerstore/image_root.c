/* Image roots for sessions (`session create --rootfs DIR|IMAGE.tar`).
 *
 *   ROOT/rootfs/KEY/root/     the tree, imported once (esbx_import_tree:
 *                             a directory, a tar or a `docker save` archive)
 *   ROOT/rootfs/KEY/source    where it came from, for people
 *
 * KEY is a SHA-256 of the content, full length: of a directory, its tree
 * digest (tree_digest.c: names, types, modes, owners, link targets and
 * file contents); of an archive, its bytes.  Sessions made from one source
 * share one tree, a changed source makes a new one, and no source can be
 * crafted to take another's key.  A tree is named by what was imported,
 * never by what was read before: a directory's copy is hashed again once
 * imported, and an archive is first copied into the store (hashed while
 * copied) and imported from that copy, so a source that changes meanwhile
 * only gets a key of its own.  A tree found under a key is used as it is:
 * it was checked when it was made, and the store is root's.  Keys of 16
 * hex digits were made by earlier versions (a 64-bit XOR of metadata);
 * sessions that name one keep it, no new session gets one.
 *
 * A session's holder binds the tree read-only in place of the host's /usr,
 * /etc and friends.  gc (gc.c) removes the trees no session names.  */
#include "internal.h"
#include "fs.h"
#include "hash.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ROOTFS_DIR  "rootfs"
#define KEY_LEN     ESBX_SHA256_HEX_LEN
#define OLD_KEY_LEN 16

bool
esbx_rootfs_valid_key (const char *key)
{
  size_t i;

  for (i = 0; key && key[i]; i++)
    if (!((key[i] >= '0' && key[i] <= '9') || (key[i] >= 'a' && key[i] <= 'f')))
      return false;
  return key && (i == KEY_LEN || i == OLD_KEY_LEN);
}

char *
esbx_rootfs_dir (esbx_store_t *store, const char *key)
{
  return xasprintf ("%s/" ROOTFS_DIR "/%s/root", store->root, key);
}

/* Import FROM (a directory, or the store's copy of an archive, whose
   digest ARCHIVE_KEY names the tree) into a staging directory and move it
   to ROOT/rootfs/KEY; *key receives KEY.  */
static int
import_new (esbx_store_t *store, const char *from, const char *shown, int tmpfd, const char *tmp,
            const char *archive_key, char **key, esbx_error_t *err)
{
  _cleanup_free_ char *dest = NULL;
  _cleanup_close_ int rootfd = -1;
  char hex[ESBX_SHA256_HEX_LEN + 1];

  if (mkdirat (tmpfd, "root", 0755) < 0)
    return esbx_make_error (err, errno, "mkdir `%s/root`", tmp);
  rootfd = esbx_open_dir_at (tmpfd, "root", err);
  if (rootfd < 0 || esbx_import_tree (from, rootfd, err) < 0)
    return -1;
  if (archive_key)
    {
      memcpy (hex, archive_key, sizeof hex);
      unlinkat (tmpfd, "archive", 0);
    }
  else if (esbx_tree_digest_at (rootfd, hex, err) < 0)
    return esbx_error_wrap (err, "hash the imported tree");
  if (esbx_write_file_atomic_at (tmpfd, "source", shown, strlen (shown), 0644, err) < 0)
    return -1;
  if (mkdirat (store->rootfd, ROOTFS_DIR, 0711) < 0 && errno != EEXIST)
    return esbx_make_error (err, errno, "mkdir `%s/" ROOTFS_DIR "`", store->root);
  dest = xasprintf (ROOTFS_DIR "/%s", hex);
  /* Made meanwhile by another session of the same content: use that one.  */
  if (renameat2 (AT_FDCWD, tmp, store->rootfd, dest, RENAME_NOREPLACE) < 0 && errno != EEXIST
      && errno != ENOTEMPTY)
    return esbx_make_error (err, errno, "rename into `%s/%s`", store->root, dest);
  fsync (store->rootfd);
  *key = xstrdup (hex);
  return 0;
}

static bool
have_tree (esbx_store_t *store, const char *key)
{
  _cleanup_free_ char *dest = xasprintf (ROOTFS_DIR "/%s/root", key);

  return esbx_exists_at (store->rootfd, dest);
}

int
esbx_rootfs_add (esbx_store_t *store, const char *from, char **key, esbx_error_t *err)
{
  _cleanup_free_ char *tmp = NULL, *copy = NULL;
  _cleanup_close_ int fd = -1, tmpfd = -1;
  char hex[ESBX_SHA256_HEX_LEN + 1];
  esbx_error_t ignored = NULL;
  struct stat st;
  int ret;

  fd = TEMP_FAILURE_RETRY (open (from, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (fd < 0 || fstat (fd, &st) < 0)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, errno, "rootfs `%s`", from);
  if (!S_ISREG (st.st_mode) && !S_ISDIR (st.st_mode))
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "rootfs `%s`: not a directory or an archive", from);
  if (S_ISDIR (st.st_mode) ? esbx_tree_digest_at (fd, hex, err) < 0
                           : esbx_sha256_fd (fd, hex, NULL, err) < 0)
    return esbx_error_wrap (err, "rootfs `%s`", from);
  if (have_tree (store, hex))
    {
      *key = xstrdup (hex);
      return 0;
    }
  tmpfd = esbx_store_tmpdir (store, "rootfs", &tmp, err);
  if (tmpfd < 0)
    return esbx_error_wrap (err, "rootfs `%s`", from);
  if (S_ISREG (st.st_mode))
    {
      /* Imported from a copy hashed while made: the tree is that of the
         bytes its key names, whatever the source does meanwhile.  */
      _cleanup_close_ int out = -1;

      copy = xasprintf ("%s/archive", tmp);
      out = TEMP_FAILURE_RETRY (
          openat (tmpfd, "archive", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
      if (out < 0 || lseek (fd, 0, SEEK_SET) < 0)
        ret = esbx_make_error (err, errno, "copy `%s`", from);
      else
        ret = esbx_copy_hash_fd (fd, out, hex, NULL, err);
      if (ret == 0 && have_tree (store, hex))
        {
          *key = xstrdup (hex);
          goto out;
        }
    }
  else
    ret = 0;
  if (ret == 0)
    ret = import_new (store, copy ? copy : from, from, tmpfd, tmp, copy ? hex : NULL, key, err);
out:
  if (esbx_exists_at (AT_FDCWD, tmp) && esbx_rm_rf_at (AT_FDCWD, tmp, &ignored) < 0)
    esbx_error_free (&ignored);
  return ret < 0 ? esbx_error_wrap (err, "rootfs `%s`", from) : 0;
}
