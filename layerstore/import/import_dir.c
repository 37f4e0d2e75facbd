/* liblayerstore import: a source directory copied into the destination, its
 * metadata set on the copy by fd.  */
#include "copy.h"
#include "fs.h"
#include "importer.h"
#include "path.h"
#include "text.h"
#include "utils.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

/* Holes stay holes (copy.h).  The size was counted against the limit
   before; what the copy took is what the file held when it started.  */
static int
copy_data_fd (struct importer *im, int in, int out, const char *rel, esbx_error_t *err)
{
  off_t size = 0;

  if (esbx_copy_file_data (in, out, NULL, NULL, &size, err) < 0)
    return esbx_error_wrap (err, "copy `%s`", rel);
  if (esbx_import_count_bytes (im, (uint64_t)size, err) < 0)
    return -1;
  im->bytes += (uint64_t)size;
  return 0;
}

static int
set_meta_fd (struct importer *im, int fd, const struct stat *st, mode_t mode, const char *rel,
             esbx_error_t *err)
{
  struct timespec times[2] = { st->st_atim, st->st_mtim };

  if (im->root && fchown (fd, st->st_uid, st->st_gid) < 0)
    return esbx_make_error (err, errno, "chown `%s`", rel);
  if (fchmod (fd, mode) < 0)
    return esbx_make_error (err, errno, "chmod `%s`", rel);
  if (futimens (fd, times) < 0)
    return esbx_make_error (err, errno, "set times of `%s`", rel);
  return 0;
}

static int copy_dir (struct importer *im, int *srcdfd, int *dstdfd, const char *rel, size_t depth,
                     esbx_error_t *err);

/* A source file ST with several names (a hard link, a squash of a layer
   that has them): its first name copied is linked to NAME instead of
   copying it again.  1 when linked, 0 when the caller copies.  */
static int
link_copy (struct importer *im, int dstdfd, const char *name, const char *rel,
           const struct stat *st, esbx_error_t *err)
{
  const struct esbx_inode *first;
  _cleanup_free_ char *base = NULL;
  _cleanup_close_ int pfd = -1;
  bool found;

  first = esbx_inode_set_add (&im->linked, st->st_dev, st->st_ino, rel, 0, &found);
  if (!found)
    return 0;
  pfd = esbx_open_parent_beneath (im->destfd, first->path, &base, err);
  if (pfd < 0)
    return esbx_error_wrap (err, "link `%s`", rel);
  if (linkat (pfd, base, dstdfd, name, 0) < 0)
    return esbx_make_error (err, errno, "link `%s` to `%s`", rel, first->path);
  return 1;
}

/* A directory and what is beneath it.  Deep trees: the parents' fds may be
   given back while the copy is below them (esbx_dir_release), so that a
   copy holds a bounded number of fds whatever the depth.  */
static int
copy_subdir (struct importer *im, int *srcdfd, int *dstdfd, const char *name, const char *rel,
             size_t depth, const struct stat *st, mode_t mode, esbx_error_t *err)
{
  _cleanup_close_ int in = -1;
  _cleanup_close_ int out = -1;
  struct esbx_held_dir src_held, dst_held;

  if (mkdirat (*dstdfd, name, 0700) < 0)
    return esbx_make_error (err, errno, "mkdir `%s`", rel);
  in = TEMP_FAILURE_RETRY (openat (*srcdfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (in < 0)
    return esbx_make_error (err, errno, "open `%s`", rel);
  out = TEMP_FAILURE_RETRY (
      openat (*dstdfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (out < 0)
    return esbx_make_error (err, errno, "open `%s`", rel);
  if (esbx_dir_release (srcdfd, depth, &src_held, err) < 0
      || esbx_dir_release (dstdfd, depth, &dst_held, err) < 0)
    return esbx_error_wrap (err, "`%s`", rel);
  if (copy_dir (im, &in, &out, rel, depth + 1, err) < 0)
    return -1;
  if (esbx_dir_retake (srcdfd, in, &src_held, err) < 0
      || esbx_dir_retake (dstdfd, out, &dst_held, err) < 0)
    return esbx_error_wrap (err, "`%s`", rel);
  /* Last, so that creating the children does not change the mtime.  */
  return set_meta_fd (im, out, st, mode, rel, err);
}

static int
copy_entry (struct importer *im, int *srcdfdp, int *dstdfdp, const char *name, const char *rel,
            size_t depth, esbx_error_t *err)
{
  int srcdfd = *srcdfdp, dstdfd = *dstdfdp;
  _cleanup_close_ int in = -1;
  _cleanup_close_ int out = -1;
  _cleanup_free_ char *target = NULL;
  _cleanup_free_ char *shown = NULL;
  struct timespec times[2];
  struct stat st;
  mode_t mode;
  ssize_t n;

  if (strlen (rel) >= 4095)
    {
      shown = esbx_quote_path (rel);
      return esbx_make_error (err, 0,
                              "`%.64s...`: path too long (more than 4,095 bytes, %zu levels deep)",
                              shown, depth + 1);
    }
  if (esbx_import_check_name (rel, err) < 0 || esbx_import_count_entry (im, &im->entries, err) < 0)
    return -1;
  if (fstatat (srcdfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return esbx_make_error (err, errno, "stat `%s`", rel);
  mode = st.st_mode & 07777;
  times[0] = st.st_atim;
  times[1] = st.st_mtim;

  switch (st.st_mode & S_IFMT)
    {
    case S_IFREG:
      if (st.st_nlink > 1)
        {
          int r = link_copy (im, dstdfd, name, rel, &st, err);
          if (r != 0)
            return r < 0 ? -1 : 0;
        }
      esbx_import_strip_setid (rel, &mode);
      if (esbx_import_count_bytes (im, (uint64_t)st.st_size, err) < 0)
        return -1;
      in = esbx_open_regular_at (srcdfd, name, err);
      if (in < 0)
        return esbx_error_wrap (err, "`%s`", rel);
      out = TEMP_FAILURE_RETRY (
          openat (dstdfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
      if (out < 0)
        return esbx_make_error (err, errno, "create `%s`", rel);
      if (copy_data_fd (im, in, out, rel, err) < 0)
        return -1;
      return set_meta_fd (im, out, &st, mode, rel, err);

    case S_IFDIR:
      esbx_import_strip_setid (rel, &mode);
      return copy_subdir (im, srcdfdp, dstdfdp, name, rel, depth, &st, mode, err);

    case S_IFLNK:
      target = xmalloc ((size_t)st.st_size + 2);
      n = readlinkat (srcdfd, name, target, (size_t)st.st_size + 2);
      if (n < 0)
        return esbx_make_error (err, errno, "readlink `%s`", rel);
      if (n > st.st_size)
        return esbx_make_error (err, EAGAIN, "readlink `%s` changed while copying", rel);
      target[n] = '\0';
      if (symlinkat (target, dstdfd, name) < 0)
        return esbx_make_error (err, errno, "symlink `%s`", rel);
      if (im->root && fchownat (dstdfd, name, st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW) < 0)
        return esbx_make_error (err, errno, "chown `%s`", rel);
      if (utimensat (dstdfd, name, times, AT_SYMLINK_NOFOLLOW) < 0)
        return esbx_make_error (err, errno, "set times of `%s`", rel);
      return 0;

    case S_IFIFO:
      esbx_import_strip_setid (rel, &mode);
      if (mkfifoat (dstdfd, name, 0600) < 0)
        return esbx_make_error (err, errno, "mkfifo `%s`", rel);
      if (im->root && fchownat (dstdfd, name, st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW) < 0)
        return esbx_make_error (err, errno, "chown `%s`", rel);
      if (fchmodat (dstdfd, name, mode, 0) < 0)
        return esbx_make_error (err, errno, "chmod `%s`", rel);
      if (utimensat (dstdfd, name, times, AT_SYMLINK_NOFOLLOW) < 0)
        return esbx_make_error (err, errno, "set times of `%s`", rel);
      return 0;

    default:
      shown = esbx_quote_path (rel);
      return esbx_make_error (err, 0, "`%s`: device nodes and sockets are not allowed", shown);
    }
}

static int
copy_dir (struct importer *im, int *srcdfd, int *dstdfd, const char *rel, size_t depth,
          esbx_error_t *err)
{
  _cleanup_strv_ char **names = NULL;
  char **p;

  names = esbx_list_dir_at (*srcdfd, ".", err);
  if (names == NULL)
    return -1;
  for (p = names; *p; p++)
    {
      _cleanup_free_ char *path = rel[0] ? xasprintf ("%s/%s", rel, *p) : xstrdup (*p);

      if (esbx_import_skip_git (im, path))
        continue;
      if (copy_entry (im, srcdfd, dstdfd, *p, path, depth, err) < 0)
        return -1;
    }
  return 0;
}

int
esbx_import_dir (struct importer *im, esbx_error_t *err)
{
  int src = im->srcfd, dst = im->destfd; /* depth 0: never given back */
  int r = copy_dir (im, &src, &dst, "", 0, err);

  esbx_inode_set_free (&im->linked);
  return r;
}
