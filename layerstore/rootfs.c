/* Image roots for sessions (`session create --rootfs DIR|IMAGE.tar`).
 *
 *   ROOT/rootfs/KEY/root/     the tree, imported once (esbx_import_tree:
 *                             a directory, a tar or a `docker save` archive)
 *   ROOT/rootfs/KEY/source    where it came from, for people
 *
 * KEY names the source: the SHA-256 of an archive's bytes, or of a
 * directory's listing (every path with its type, mode, size, mtime and
 * symlink target), so that sessions made from one source share one tree
 * and a changed source makes a new one.  A session's holder binds the tree
 * read-only in place of the host's /usr, /etc and friends.  gc (gc.c)
 * removes the trees no session names.  */
#include "internal.h"
#include "fs.h"
#include "hash.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ROOTFS_DIR "rootfs"
#define KEY_LEN    16

/* XOR of the SHA-256 of every entry's line: independent of readdir order.  */
static unsigned char listing[32];

static int
hex_value (char c)
{
  return c <= '9' ? c - '0' : c - 'a' + 10;
}

static int
list_entry (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  char target[4096] = "", hex[ESBX_SHA256_HEX_LEN + 1];
  _cleanup_free_ char *line = NULL;
  ssize_t n;
  size_t i;

  (void)ftw;
  if (flag == FTW_SL && (n = readlink (path, target, sizeof target - 1)) > 0)
    target[n] = '\0';
  line = xasprintf ("%s\n%o %lld %lld.%09ld\n%s", path, (unsigned)st->st_mode,
                    (long long)st->st_size, (long long)st->st_mtim.tv_sec, st->st_mtim.tv_nsec,
                    target);
  esbx_sha256_buf (line, strlen (line), hex);
  for (i = 0; i < 32; i++)
    listing[i] ^= (unsigned char)(hex_value (hex[2 * i]) << 4 | hex_value (hex[2 * i + 1]));
  return 0;
}

static int
source_key (const char *from, char **key, esbx_error_t *err)
{
  char hex[ESBX_SHA256_HEX_LEN + 1];
  _cleanup_close_ int fd = -1;
  struct stat st;
  size_t i;

  fd = TEMP_FAILURE_RETRY (open (from, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (fd < 0 || fstat (fd, &st) < 0)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, errno, "rootfs `%s`", from);
  if (S_ISREG (st.st_mode))
    {
      if (esbx_sha256_fd (fd, hex, NULL, err) < 0)
        return esbx_error_wrap (err, "rootfs `%s`", from);
    }
  else if (S_ISDIR (st.st_mode))
    {
      memset (listing, 0, sizeof listing);
      if (nftw (from, list_entry, 16, FTW_PHYS) < 0)
        return esbx_make_error (err, errno, "rootfs `%s`: list the directory", from);
      for (i = 0; i < 32; i++)
        snprintf (hex + 2 * i, 3, "%02x", listing[i]);
    }
  else
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "rootfs `%s`: not a directory or an archive", from);
  *key = xstrndup (hex, KEY_LEN);
  return 0;
}

bool
esbx_rootfs_valid_key (const char *key)
{
  size_t i;

  for (i = 0; key && key[i]; i++)
    if (!((key[i] >= '0' && key[i] <= '9') || (key[i] >= 'a' && key[i] <= 'f')))
      return false;
  return key && i == KEY_LEN;
}

char *
esbx_rootfs_dir (esbx_store_t *store, const char *key)
{
  return xasprintf ("%s/" ROOTFS_DIR "/%s/root", store->root, key);
}

static int
import_new (esbx_store_t *store, const char *from, const char *key, esbx_error_t *err)
{
  _cleanup_free_ char *tmp = NULL, *dest = xasprintf (ROOTFS_DIR "/%s", key);
  _cleanup_close_ int tmpfd = -1, rootfd = -1;
  esbx_error_t ignored = NULL;

  tmpfd = esbx_store_tmpdir (store, "rootfs", &tmp, err);
  if (tmpfd < 0)
    return -1;
  if (mkdirat (tmpfd, "root", 0755) < 0)
    return esbx_make_error (err, errno, "rootfs: mkdir `%s/root`", tmp);
  rootfd = esbx_open_dir_at (tmpfd, "root", err);
  if (rootfd < 0 || esbx_import_tree (from, rootfd, err) < 0)
    goto fail;
  if (esbx_write_file_atomic_at (tmpfd, "source", from, strlen (from), 0644, err) < 0)
    goto fail;
  if (mkdirat (store->rootfd, ROOTFS_DIR, 0711) < 0 && errno != EEXIST)
    {
      esbx_make_error (err, errno, "mkdir `%s/" ROOTFS_DIR "`", store->root);
      goto fail;
    }
  /* Made meanwhile by another session of the same source: use that one.  */
  if (renameat2 (AT_FDCWD, tmp, store->rootfd, dest, RENAME_NOREPLACE) < 0 && errno != EEXIST)
    {
      esbx_make_error (err, errno, "rootfs `%s`", from);
      goto fail;
    }
  if (esbx_exists_at (AT_FDCWD, tmp) && esbx_rm_rf_at (AT_FDCWD, tmp, &ignored) < 0)
    esbx_error_free (&ignored);
  fsync (store->rootfd);
  return 0;

fail:
  if (esbx_rm_rf_at (AT_FDCWD, tmp, &ignored) < 0)
    esbx_error_free (&ignored);
  return esbx_error_wrap (err, "rootfs `%s`", from);
}

int
esbx_rootfs_add (esbx_store_t *store, const char *from, char **key, esbx_error_t *err)
{
  _cleanup_free_ char *k = NULL, *dest = NULL;

  if (source_key (from, &k, err) < 0)
    return -1;
  dest = xasprintf (ROOTFS_DIR "/%s/root", k);
  if (!esbx_exists_at (store->rootfd, dest) && import_new (store, from, k, err) < 0)
    return -1;
  *key = steal_pointer (&k);
  return 0;
}
