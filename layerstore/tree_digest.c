/* The content digest of a directory tree, which keys --rootfs images
 * (image_root.c): SHA-256 over a domain tag and one record per entry beneath
 * the root (the root itself not: its copy is made by esbx), in a
 * depth-first walk with names in byte order:
 *
 *   TYPE MODE UID GID LEN:NAME[ SIZE CONTENT-SHA256 | LEN:TARGET]\n
 *
 * TYPE is d, f, l or p; MODE the permission bits without setuid and setgid
 * (import strips those, and a digest of the source must equal the digest
 * of its import); NAME the path from the root; regular files add their
 * size and the SHA-256 of their bytes, symlinks their target.  Lengths
 * make every record unambiguous.  Times are left out: a copy of the same
 * files is the same image.  Device nodes and sockets are refused, as the
 * import refuses them.  */
#include "internal.h"
#include "fs.h"
#include "hash.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <nettle/sha2.h>
#include <string.h>
#include <sys/stat.h>

#define TREE_TAG  "esbx-rootfs-tree-v1\n"
#define MAX_DEPTH 256

static void
feed (struct sha256_ctx *ctx, const char *s)
{
  sha256_update (ctx, strlen (s), (const uint8_t *)s);
}

static int walk (struct sha256_ctx *ctx, int dfd, const char *rel, unsigned depth,
                 esbx_error_t *err);

static int
entry (struct sha256_ctx *ctx, int dfd, const char *name, const char *rel, unsigned depth,
       esbx_error_t *err)
{
  _cleanup_free_ char *head = NULL, *tail = NULL, *shown = NULL;
  char hex[ESBX_SHA256_HEX_LEN + 1];
  struct stat st;
  char type;

  if (fstatat (dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return esbx_make_error (err, errno, "stat `%s`", rel);
  switch (st.st_mode & S_IFMT)
    {
    case S_IFDIR:
      type = 'd';
      break;
    case S_IFREG:
      type = 'f';
      break;
    case S_IFLNK:
      type = 'l';
      break;
    case S_IFIFO:
      type = 'p';
      break;
    default:
      shown = esbx_quote_path (rel);
      return esbx_make_error (err, 0, "`%s`: device nodes and sockets are not allowed", shown);
    }
  head = xasprintf ("%c %o %u %u %zu:%s", type, (unsigned)(st.st_mode & 01777), (unsigned)st.st_uid,
                    (unsigned)st.st_gid, strlen (rel), rel);
  feed (ctx, head);
  if (type == 'f')
    {
      _cleanup_close_ int fd = esbx_open_regular_at (dfd, name, err);
      off_t size;

      if (fd < 0 || esbx_sha256_fd (fd, hex, &size, err) < 0)
        return esbx_error_wrap (err, "`%s`", rel);
      tail = xasprintf (" %lld %s", (long long)size, hex);
    }
  else if (type == 'l')
    {
      _cleanup_free_ char *target = xmalloc ((size_t)st.st_size + 2);
      ssize_t n = readlinkat (dfd, name, target, (size_t)st.st_size + 2);

      if (n < 0)
        return esbx_make_error (err, errno, "readlink `%s`", rel);
      if (n > st.st_size)
        return esbx_make_error (err, EAGAIN, "readlink `%s`: changed while reading", rel);
      target[n] = '\0';
      tail = xasprintf (" %zd:%s", n, target);
    }
  if (tail)
    feed (ctx, tail);
  feed (ctx, "\n");
  if (type == 'd')
    {
      _cleanup_close_ int sub = TEMP_FAILURE_RETRY (
          openat (dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));

      if (sub < 0)
        return esbx_make_error (err, errno, "open `%s`", rel);
      return walk (ctx, sub, rel, depth + 1, err);
    }
  return 0;
}

static int
walk (struct sha256_ctx *ctx, int dfd, const char *rel, unsigned depth, esbx_error_t *err)
{
  _cleanup_strv_ char **names = NULL;
  char **p;

  if (depth > MAX_DEPTH)
    return esbx_make_error (err, ELOOP, "`%s`: more than %u levels deep", rel, MAX_DEPTH);
  names = esbx_list_dir_at (dfd, ".", err);
  if (names == NULL)
    return esbx_error_wrap (err, "`%s`", rel[0] ? rel : ".");
  for (p = names; *p; p++)
    {
      _cleanup_free_ char *path = rel[0] ? xasprintf ("%s/%s", rel, *p) : xstrdup (*p);

      if (entry (ctx, dfd, *p, path, depth, err) < 0)
        return -1;
    }
  return 0;
}

int
esbx_tree_digest_at (int dirfd, char out[ESBX_SHA256_HEX_LEN + 1], esbx_error_t *err)
{
  static const char digits[] = "0123456789abcdef";
  unsigned char md[SHA256_DIGEST_SIZE];
  struct sha256_ctx ctx;
  size_t i;

  sha256_init (&ctx);
  feed (&ctx, TREE_TAG);
  if (walk (&ctx, dirfd, "", 0, err) < 0)
    return -1;
  sha256_digest (&ctx, sizeof md, md);
  for (i = 0; i < sizeof md; i++)
    {
      out[2 * i] = digits[md[i] >> 4];
      out[2 * i + 1] = digits[md[i] & 0xf];
    }
  out[ESBX_SHA256_HEX_LEN] = '\0';
  return 0;
}
