/* liblayerstore: fill a project's first layer from a directory, an archive
 * (tar, tar.gz, tar.zst, tar.xz, zip) or a `docker save` archive.
 *
 * All of the work runs in a forked child that fchdir()s into the destination
 * and, when it may, chroot()s there: libarchive resolves archive paths
 * against the cwd, so a bug in its SECURE_* checks or in ours still cannot
 * reach outside the destination, and esbxd's other threads never see their
 * cwd change.  The child reports a failure as one line through a pipe.
 *
 * Limits: ESBX_IMPORT_MAX_BYTES (default 8 GiB) bounds the bytes written,
 * counted from entry headers before anything is written (so a huge sparse
 * file fails up front) and from the data actually produced (so a zip whose
 * headers lie still stops); ESBX_IMPORT_MAX_ENTRIES (default 1048576) bounds
 * the number of entries.
 *
 * Names: every entry name and file name must be valid UTF-8 without control
 * characters, and no component may start with `.wh.`, which would read as an
 * overlayfs-era whiteout once the tree is a layer.
 *
 * Not restored: extended attributes, ACLs and file flags (an archive must
 * not be able to plant trusted.overlay.* attributes in a layer), device
 * nodes and sockets (refused), setuid/setgid bits (stripped, with a
 * warning).  Owners are restored numerically when running as root, as tar
 * does.  A hard link in a directory import becomes two files; a hard link in
 * an archive must name a regular file already extracted beneath the
 * destination.
 *
 * `docker save` archives: detected by a top-level manifest.json holding
 * `[{"Layers": [...]}]`.  The image layers of the first (only) image are
 * applied in order into the one destination, because esbx keeps an imported
 * image as a single flat base layer.  Whiteouts therefore only ever delete
 * what earlier image layers put there and are realised as deletions: a
 * `.wh.NAME` entry removes NAME, `.wh..wh..opq` empties its directory, and
 * neither stays in the result.  Each image layer is read twice, first for its
 * whiteouts and then for its content, so that an opaque marker listed after
 * the layer's own entries of that directory does not delete them.  */
#include "fs.h"
#include "internal.h"
#include "json.h"
#include "layerstore.h"
#include "log.h"
#include "path.h"
#include "text.h"
#include "utils.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <inttypes.h>
#include <locale.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define DEFAULT_MAX_BYTES   (8ULL << 30)
#define DEFAULT_MAX_ENTRIES (1ULL << 20)
#define MANIFEST_MAX        (4U << 20)
#define WHITEOUT_PREFIX     ".wh."
#define OPAQUE_MARKER       ".wh..wh..opq"
#define READ_BUF            (64 * 1024)

struct import
{
  int srcfd;  /* the archive file or the source directory */
  int destfd; /* the destination directory */
  bool root;  /* may restore owners */
  uint64_t max_bytes;
  uint64_t max_entries;
  uint64_t bytes;
  uint64_t entries;
  bool is_dir;
};

/* Reading FROM through our own callbacks rather than archive_read_open_fd:
   seekable zip needs a seek callback, and every pass starts from offset 0.  */
struct source
{
  int fd;
  char buf[READ_BUF];
};

/* An image layer is an entry of the outer archive read as a stream.  */
struct nested
{
  struct archive *outer;
  char buf[READ_BUF];
};

static char *
format_bytes (uint64_t n)
{
  if (n != 0 && n % (1ULL << 30) == 0)
    return xasprintf ("%" PRIu64 " GiB", n >> 30);
  if (n != 0 && n % (1ULL << 20) == 0)
    return xasprintf ("%" PRIu64 " MiB", n >> 20);
  if (n != 0 && n % (1ULL << 10) == 0)
    return xasprintf ("%" PRIu64 " KiB", n >> 10);
  return xasprintf ("%" PRIu64 " bytes", n);
}

static int
too_big (struct import *im, esbx_error_t *err)
{
  _cleanup_free_ char *limit = format_bytes (im->max_bytes);

  return esbx_make_error (err, 0, "%s the %s limit",
                          im->is_dir ? "tree is larger than" : "archive expands beyond", limit);
}

static int
count_bytes (struct import *im, uint64_t n, esbx_error_t *err)
{
  if (n > im->max_bytes || im->bytes > im->max_bytes - n)
    return too_big (im, err);
  return 0;
}

static int
count_entry (struct import *im, uint64_t *counter, esbx_error_t *err)
{
  if (++*counter > im->max_entries)
    return esbx_make_error (err, 0, "%s more than %" PRIu64 " entries",
                            im->is_dir ? "tree has" : "archive has", im->max_entries);
  return 0;
}

/* Names end up in shells, JSON reports and one-line errors: refuse what they
   cannot show, and `.wh.` components, which would read as whiteouts.  */
static int
check_name (const char *name, esbx_error_t *err)
{
  _cleanup_free_ char *shown = esbx_quote_path (name);
  const unsigned char *p;
  const char *c;

  if (!esbx_utf8_valid (name, strlen (name)))
    return esbx_make_error (err, 0, "name `%s` is not valid UTF-8", shown);
  for (p = (const unsigned char *)name; *p; p++)
    if (*p < 0x20 || *p == 0x7f)
      return esbx_make_error (err, 0, "name `%s` contains a control character", shown);
  for (c = name; c; c = strchr (c, '/'))
    {
      if (*c == '/')
        c++;
      if (esbx_has_prefix (c, WHITEOUT_PREFIX))
        return esbx_make_error (err, 0, "name `%s`: names starting with `.wh.` are not allowed",
                                shown);
    }
  return 0;
}

/* The relative path an archive entry name stands for ("" for the root).  */
static int
clean_entry_name (const char *name, char **out, esbx_error_t *err)
{
  _cleanup_free_ char *shown = NULL;

  if (name == NULL || name[0] == '\0')
    return esbx_make_error (err, 0, "entry without a name");
  if (name[0] == '/')
    {
      shown = esbx_quote_path (name);
      return esbx_make_error (err, 0, "entry `%s`: absolute paths are not allowed", shown);
    }
  return esbx_clean_relpath (name, true, out, err);
}

static bool
missing (esbx_error_t *err)
{
  if (*err && ((*err)->status == ENOENT || (*err)->status == ENOTDIR))
    {
      esbx_error_free (err);
      return true;
    }
  return false;
}

static const char *
last_component (const char *rel)
{
  const char *slash = strrchr (rel, '/');
  return slash ? slash + 1 : rel;
}

static int
strip_setid (const char *rel, mode_t *mode)
{
  _cleanup_free_ char *shown = NULL;

  if ((*mode & (S_ISUID | S_ISGID)) == 0)
    return 0;
  shown = esbx_quote_path (rel);
  esbx_warn ("import: stripped setuid/setgid bits from `%s`", shown);
  *mode &= ~(mode_t)(S_ISUID | S_ISGID);
  return 1;
}

/* ---- directories -------------------------------------------------------- */

static int
copy_data_fd (struct import *im, int in, int out, const char *rel, esbx_error_t *err)
{
  _cleanup_free_ char *buf = NULL;
  bool plain = false;
  ssize_t n;

  for (;;)
    {
      if (!plain)
        {
          n = TEMP_FAILURE_RETRY (copy_file_range (in, NULL, out, NULL, 1 << 20, 0));
          if (n < 0
              && (errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP))
            {
              plain = true;
              buf = xmalloc (READ_BUF);
              continue;
            }
        }
      else
        n = TEMP_FAILURE_RETRY (read (in, buf, READ_BUF));
      if (n < 0)
        return esbx_make_error (err, errno, "copy `%s`", rel);
      if (n == 0)
        return 0;
      if (count_bytes (im, (uint64_t)n, err) < 0)
        return -1;
      im->bytes += (uint64_t)n;
      if (plain && esbx_write_all (out, buf, (size_t)n) < 0)
        return esbx_make_error (err, errno, "write `%s`", rel);
    }
}

static int
set_meta_fd (struct import *im, int fd, const struct stat *st, mode_t mode, const char *rel,
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

static int copy_dir (struct import *im, int *srcdfd, int *dstdfd, const char *rel, size_t depth,
                     esbx_error_t *err);

/* A directory and what is beneath it.  Deep trees: the parents' fds may be
   given back while the copy is below them (esbx_dir_release), so that a
   copy holds a bounded number of fds whatever the depth.  */
static int
copy_subdir (struct import *im, int *srcdfd, int *dstdfd, const char *name, const char *rel,
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
copy_entry (struct import *im, int *srcdfdp, int *dstdfdp, const char *name, const char *rel,
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
  if (check_name (rel, err) < 0 || count_entry (im, &im->entries, err) < 0)
    return -1;
  if (fstatat (srcdfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return esbx_make_error (err, errno, "stat `%s`", rel);
  mode = st.st_mode & 07777;
  times[0] = st.st_atim;
  times[1] = st.st_mtim;

  switch (st.st_mode & S_IFMT)
    {
    case S_IFREG:
      strip_setid (rel, &mode);
      if (count_bytes (im, (uint64_t)st.st_size, err) < 0)
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
      strip_setid (rel, &mode);
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
      strip_setid (rel, &mode);
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
copy_dir (struct import *im, int *srcdfd, int *dstdfd, const char *rel, size_t depth,
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

      if (copy_entry (im, srcdfd, dstdfd, *p, path, depth, err) < 0)
        return -1;
    }
  return 0;
}

/* ---- archives ----------------------------------------------------------- */

static la_ssize_t
source_read (struct archive *a, void *data, const void **buf)
{
  struct source *s = data;
  ssize_t n = TEMP_FAILURE_RETRY (read (s->fd, s->buf, sizeof s->buf));

  if (n < 0)
    archive_set_error (a, errno, "read");
  *buf = s->buf;
  return n;
}

static la_int64_t
source_seek (struct archive *a, void *data, la_int64_t offset, int whence)
{
  struct source *s = data;
  off_t r = lseek (s->fd, (off_t)offset, whence);

  if (r < 0)
    {
      archive_set_error (a, errno, "seek");
      return ARCHIVE_FATAL;
    }
  return r;
}

static la_int64_t
source_skip (struct archive *a, void *data, la_int64_t request)
{
  struct source *s = data;

  if (lseek (s->fd, (off_t)request, SEEK_CUR) < 0)
    return 0;
  return request;
}

static la_ssize_t
nested_read (struct archive *a, void *data, const void **buf)
{
  struct nested *n = data;
  la_ssize_t r = archive_read_data (n->outer, n->buf, sizeof n->buf);

  if (r < 0)
    archive_set_error (a, archive_errno (n->outer), "%s", archive_error_string (n->outer));
  *buf = n->buf;
  return r;
}

static void
support_filters (struct archive *a)
{
  /* Named rather than "all": the rest would run external programs.  */
  archive_read_support_filter_gzip (a);
  archive_read_support_filter_bzip2 (a);
  archive_read_support_filter_xz (a);
  archive_read_support_filter_lzma (a);
  archive_read_support_filter_zstd (a);
  archive_read_support_filter_lz4 (a);
}

static void
cleanup_archive_readp (struct archive **a)
{
  if (*a)
    archive_read_free (*a);
}
#define _cleanup_archive_read_ __attribute__ ((cleanup (cleanup_archive_readp)))

static void
cleanup_archive_writep (struct archive **a)
{
  if (*a)
    archive_write_free (*a);
}
#define _cleanup_archive_write_ __attribute__ ((cleanup (cleanup_archive_writep)))

static int
archive_fail (struct archive *a, const char *what, esbx_error_t *err)
{
  const char *msg = archive_error_string (a);

  return esbx_make_error (err, 0, "%s: %s", what, msg ? msg : "unknown libarchive error");
}

static int
open_source (struct source *src, struct archive **out, esbx_error_t *err)
{
  _cleanup_archive_read_ struct archive *a = archive_read_new ();

  if (lseek (src->fd, 0, SEEK_SET) < 0)
    return esbx_make_error (err, errno, "seek");
  archive_read_support_format_tar (a);
  archive_read_support_format_zip (a);
  support_filters (a);
  archive_read_set_callback_data (a, src);
  archive_read_set_read_callback (a, source_read);
  archive_read_set_seek_callback (a, source_seek);
  archive_read_set_skip_callback (a, source_skip);
  if (archive_read_open1 (a) != ARCHIVE_OK)
    return archive_fail (a, "not a directory or an archive esbx reads", err);
  *out = steal_pointer (&a);
  return 0;
}

static int
next_header (struct archive *a, struct archive_entry **e, esbx_error_t *err)
{
  int r = archive_read_next_header (a, e);

  if (r == ARCHIVE_EOF)
    return 0;
  if (r < ARCHIVE_WARN)
    return archive_fail (a, "read", err);
  return 1;
}

static struct archive *
new_disk_writer (struct import *im)
{
  struct archive *w = archive_write_disk_new ();
  int flags = ARCHIVE_EXTRACT_SECURE_SYMLINKS | ARCHIVE_EXTRACT_SECURE_NODOTDOT
              | ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS | ARCHIVE_EXTRACT_PERM
              | ARCHIVE_EXTRACT_TIME;

  if (im->root)
    flags |= ARCHIVE_EXTRACT_OWNER;
  archive_write_disk_set_options (w, flags);
  return w;
}

/* A hard link may only join two names of the destination: its target must
   already be a regular file beneath it, reached without symlinks.  */
static int
check_hardlink (struct import *im, const char *rel, const char *link, char **clean,
                esbx_error_t *err)
{
  _cleanup_free_ char *shown = esbx_quote_path (rel);
  _cleanup_free_ char *shown_link = esbx_quote_path (link);
  _cleanup_free_ char *target = NULL;
  _cleanup_close_ int fd = -1;
  esbx_error_t sub = NULL;
  struct stat st;

  if (link[0] == '/' || esbx_clean_relpath (link, false, &target, &sub) < 0)
    {
      esbx_error_free (&sub);
      return esbx_make_error (err, 0, "hard link `%s` to `%s` points outside the archive", shown,
                              shown_link);
    }
  if (check_name (target, err) < 0)
    return -1;
  fd = esbx_open_beneath (im->destfd, target, O_PATH, 0, &sub);
  if (fd < 0 || fstat (fd, &st) < 0 || !S_ISREG (st.st_mode))
    {
      esbx_error_free (&sub);
      return esbx_make_error (err, 0,
                              "hard link `%s` to `%s`: the target is not a file extracted "
                              "earlier from the archive",
                              shown, shown_link);
    }
  *clean = steal_pointer (&target);
  return 0;
}

/* Check and rewrite one entry before it reaches archive_write_disk.
   Returns 1 to extract it, 0 to skip it (the root).  */
static int
prepare_entry (struct import *im, struct archive_entry *e, char **relp, esbx_error_t *err)
{
  _cleanup_free_ char *rel = NULL;
  _cleanup_free_ char *shown = NULL;
  _cleanup_free_ char *link = NULL;
  const char *hardlink;
  mode_t mode;
  int64_t size;

  if (clean_entry_name (archive_entry_pathname (e), &rel, err) < 0)
    return -1;
  if (rel[0] == '\0')
    return 0;
  if (check_name (rel, err) < 0)
    return -1;
  shown = esbx_quote_path (rel);

  hardlink = archive_entry_hardlink (e);
  if (hardlink)
    {
      if (check_hardlink (im, rel, hardlink, &link, err) < 0)
        return -1;
      archive_entry_set_hardlink (e, link);
    }
  else
    switch (archive_entry_filetype (e))
      {
      case AE_IFREG:
      case AE_IFDIR:
      case AE_IFIFO:
        break;
      case AE_IFLNK:
        if (archive_entry_symlink (e) == NULL)
          return esbx_make_error (err, 0, "entry `%s`: symlink without a target", shown);
        break;
      default:
        return esbx_make_error (err, 0, "entry `%s`: device nodes and sockets are not allowed",
                                shown);
      }

  mode = archive_entry_perm (e);
  if (archive_entry_filetype (e) != AE_IFLNK && strip_setid (rel, &mode))
    archive_entry_set_perm (e, mode);

  size = archive_entry_size_is_set (e) ? archive_entry_size (e) : 0;
  if (size < 0)
    return esbx_make_error (err, 0, "entry `%s`: negative size", shown);
  if (count_bytes (im, (uint64_t)size, err) < 0)
    return -1;

  /* Nothing the archive says about extended attributes, ACLs or file flags
     is wanted in a layer.  */
  archive_entry_xattr_clear (e);
  archive_entry_acl_clear (e);
  archive_entry_set_fflags (e, 0, 0);
  archive_entry_set_pathname (e, rel);
  *relp = steal_pointer (&rel);
  return 1;
}

static int
copy_entry_data (struct import *im, struct archive *in, struct archive *out, const char *rel,
                 uint64_t *extent, esbx_error_t *err)
{
  const void *buf;
  size_t len;
  la_int64_t off;
  int r;

  *extent = 0;
  for (;;)
    {
      r = archive_read_data_block (in, &buf, &len, &off);
      if (r == ARCHIVE_EOF)
        return 0;
      if (r < ARCHIVE_WARN)
        return archive_fail (in, "read", err);
      if (off < 0)
        return esbx_make_error (err, 0, "entry `%s`: bad data offset", rel);
      if ((uint64_t)off + len > *extent)
        *extent = (uint64_t)off + len;
      if (count_bytes (im, *extent, err) < 0)
        return -1;
      if (archive_write_data_block (out, buf, len, off) < ARCHIVE_WARN)
        return archive_fail (out, "write", err);
    }
}

/* Docker semantics for a later image layer: an entry that is not a
   directory replaces a directory an earlier layer left at its path.  */
static int
make_room (struct import *im, const char *rel, esbx_error_t *err)
{
  _cleanup_free_ char *base = NULL;
  _cleanup_close_ int pfd = -1;
  struct stat st;

  pfd = esbx_open_parent_beneath (im->destfd, rel, &base, err);
  if (pfd < 0)
    return missing (err) ? 0 : -1;
  if (fstatat (pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR (st.st_mode))
    return 0;
  return esbx_rm_rf_at (pfd, base, err);
}

static bool
is_whiteout_name (const char *name)
{
  return name && esbx_has_prefix (last_component (name), WHITEOUT_PREFIX);
}

static int
extract_all (struct import *im, struct archive *in, bool image_layer, esbx_error_t *err)
{
  _cleanup_archive_write_ struct archive *out = new_disk_writer (im);
  struct archive_entry *e;
  int r;

  while ((r = next_header (in, &e, err)) > 0)
    {
      _cleanup_free_ char *rel = NULL;
      uint64_t extent = 0;
      int64_t size;

      if (image_layer && is_whiteout_name (archive_entry_pathname (e)))
        continue;
      if (count_entry (im, &im->entries, err) < 0)
        return -1;
      r = prepare_entry (im, e, &rel, err);
      if (r < 0)
        return -1;
      if (r == 0)
        continue;
      if (image_layer && archive_entry_hardlink (e) == NULL
          && archive_entry_filetype (e) != AE_IFDIR && make_room (im, rel, err) < 0)
        return -1;
      if (archive_write_header (out, e) < ARCHIVE_WARN)
        return archive_fail (out, "extract", err);
      size = archive_entry_size_is_set (e) ? archive_entry_size (e) : 0;
      if (archive_entry_filetype (e) == AE_IFREG
          && copy_entry_data (im, in, out, rel, &extent, err) < 0)
        return -1;
      if (archive_write_finish_entry (out) < ARCHIVE_WARN)
        return archive_fail (out, "extract", err);
      im->bytes += extent > (uint64_t)size ? extent : (uint64_t)size;
    }
  if (r < 0)
    return -1;
  /* Directory modes and times are applied here, after their contents.  */
  if (archive_write_close (out) < ARCHIVE_WARN)
    return archive_fail (out, "extract", err);
  return 0;
}

/* ---- docker save -------------------------------------------------------- */

static int
remove_beneath (struct import *im, const char *rel, esbx_error_t *err)
{
  _cleanup_free_ char *base = NULL;
  _cleanup_close_ int pfd = -1;

  pfd = esbx_open_parent_beneath (im->destfd, rel, &base, err);
  if (pfd < 0)
    return missing (err) ? 0 : -1;
  return esbx_rm_rf_at (pfd, base, err);
}

static int
empty_beneath (struct import *im, const char *rel, esbx_error_t *err)
{
  _cleanup_strv_ char **names = NULL;
  _cleanup_close_ int dfd = -1;
  char **p;

  dfd = esbx_open_beneath (im->destfd, rel, O_RDONLY | O_DIRECTORY, 0, err);
  if (dfd < 0)
    return missing (err) ? 0 : -1;
  names = esbx_list_dir_at (dfd, ".", err);
  if (names == NULL)
    return -1;
  for (p = names; *p; p++)
    if (esbx_rm_rf_at (dfd, *p, err) < 0)
      return -1;
  return 0;
}

static int
apply_whiteouts (struct import *im, struct archive *in, esbx_error_t *err)
{
  struct archive_entry *e;
  uint64_t seen = im->entries;
  int r;

  while ((r = next_header (in, &e, err)) > 0)
    {
      _cleanup_free_ char *rel = NULL;
      _cleanup_free_ char *victim = NULL;
      _cleanup_free_ char *shown = NULL;
      const char *base;
      size_t dirlen;

      if (count_entry (im, &seen, err) < 0)
        return -1;
      if (!is_whiteout_name (archive_entry_pathname (e)))
        continue;
      if (clean_entry_name (archive_entry_pathname (e), &rel, err) < 0)
        return -1;
      base = last_component (rel);
      dirlen = base == rel ? 0 : (size_t)(base - rel - 1);
      victim = strcmp (base, OPAQUE_MARKER) == 0
                   ? xstrndup (rel, dirlen)
                   : xasprintf ("%.*s%s%s", (int)dirlen, rel, dirlen ? "/" : "",
                                base + strlen (WHITEOUT_PREFIX));
      shown = esbx_quote_path (rel);
      if (strcmp (base, OPAQUE_MARKER) != 0
          && (base[strlen (WHITEOUT_PREFIX)] == '\0' || strcmp (base, ".wh..") == 0
              || strcmp (base, ".wh...") == 0))
        return esbx_make_error (err, 0, "whiteout `%s` names no file", shown);
      if (victim[0] && check_name (victim, err) < 0)
        return esbx_error_wrap (err, "whiteout `%s`", shown);
      if (strcmp (base, OPAQUE_MARKER) == 0)
        r = empty_beneath (im, victim, err);
      else
        r = remove_beneath (im, victim, err);
      if (r < 0)
        return esbx_error_wrap (err, "whiteout `%s`", shown);
    }
  return r;
}

/* Docker writes a layer that two saved images share once and makes the other
   layer.tar a relative symlink to it: resolve such a link lexically inside
   the archive.  NULL when it leaves the archive.  */
static char *
resolve_in_archive (const char *entry, const char *target)
{
  _cleanup_free_ char *joined = NULL;
  struct strv parts = { 0 };
  char *save = NULL, *tok;
  size_t i, len = 0;
  char *out, *o;

  if (target[0] == '/')
    return NULL;
  joined = xasprintf ("%.*s/%s", (int)(last_component (entry) - entry), entry, target);
  for (tok = strtok_r (joined, "/", &save); tok; tok = strtok_r (NULL, "/", &save))
    {
      if (strcmp (tok, ".") == 0)
        continue;
      if (strcmp (tok, "..") == 0)
        {
          if (parts.n == 0)
            {
              strv_free (&parts);
              return NULL;
            }
          free (parts.v[--parts.n]);
          parts.v[parts.n] = NULL;
          continue;
        }
      strv_push (&parts, xstrdup (tok));
    }
  for (i = 0; i < parts.n; i++)
    len += strlen (parts.v[i]) + 1;
  out = o = xmalloc0 (len + 1);
  for (i = 0; i < parts.n; i++)
    o += sprintf (o, "%s%s", i ? "/" : "", parts.v[i]);
  strv_free (&parts);
  return out;
}

/* Position a new reader of the outer archive at the regular file NAME,
   following the links of resolve_in_archive.  */
static int
find_layer (struct source *src, const char *name, struct archive **outerp, esbx_error_t *err)
{
  _cleanup_free_ char *want = xstrdup (name);
  _cleanup_free_ char *shown = esbx_quote_path (name);
  int hops;

  for (hops = 0; hops < 8; hops++)
    {
      _cleanup_archive_read_ struct archive *outer = NULL;
      struct archive_entry *e;
      int r;

      if (open_source (src, &outer, err) < 0)
        return -1;
      while ((r = next_header (outer, &e, err)) > 0)
        {
          _cleanup_free_ char *rel = NULL;
          esbx_error_t sub = NULL;
          const char *path = archive_entry_pathname (e);

          if (esbx_clean_relpath (path ? path : "", true, &rel, &sub) < 0)
            {
              esbx_error_free (&sub);
              continue;
            }
          if (strcmp (rel, want) != 0)
            continue;
          if (archive_entry_filetype (e) == AE_IFREG)
            {
              *outerp = steal_pointer (&outer);
              return 0;
            }
          if (archive_entry_filetype (e) == AE_IFLNK && archive_entry_symlink (e))
            {
              char *next = resolve_in_archive (rel, archive_entry_symlink (e));

              if (next == NULL)
                return esbx_make_error (err, 0, "image layer `%s` links outside the archive",
                                        shown);
              free (want);
              want = next;
              break;
            }
          return esbx_make_error (err, 0, "image layer `%s` is not a file", shown);
        }
      if (r < 0)
        return -1;
      if (r == 0)
        return esbx_make_error (err, 0, "image layer `%s` listed in manifest.json is missing",
                                shown);
    }
  return esbx_make_error (err, ELOOP, "image layer `%s`", shown);
}

static int
import_layer (struct import *im, struct source *src, const char *name, bool whiteouts,
              esbx_error_t *err)
{
  _cleanup_archive_read_ struct archive *outer = NULL;
  _cleanup_archive_read_ struct archive *inner = NULL;
  _cleanup_free_ struct nested *nested = xmalloc0 (sizeof *nested);
  _cleanup_free_ char *shown = esbx_quote_path (name);

  if (find_layer (src, name, &outer, err) < 0)
    return -1;
  nested->outer = outer;
  inner = archive_read_new ();
  archive_read_support_format_tar (inner);
  support_filters (inner);
  if (archive_read_open (inner, nested, NULL, nested_read, NULL) != ARCHIVE_OK)
    {
      archive_fail (inner, "read", err);
      return esbx_error_wrap (err, "image layer `%s`", shown);
    }
  if (whiteouts)
    return apply_whiteouts (im, inner, err);
  return extract_all (im, inner, true, err);
}

/* The manifest of a `docker save` archive, or NULL for any other archive.
   A plain project may well have a manifest.json of its own: only docker's
   shape counts.  */
static int
read_manifest (struct import *im, struct source *src, json_t **out, esbx_error_t *err)
{
  _cleanup_archive_read_ struct archive *a = NULL;
  _cleanup_free_ char *buf = NULL;
  struct archive_entry *e;
  uint64_t seen = 0;
  la_ssize_t n;
  int64_t size;
  int r;

  *out = NULL;
  if (open_source (src, &a, err) < 0)
    return -1;
  while ((r = next_header (a, &e, err)) > 0)
    {
      const char *name = archive_entry_pathname (e);
      json_t *j, *first, *layers;
      esbx_error_t sub = NULL;

      if (count_entry (im, &seen, err) < 0)
        return -1;
      if (name == NULL || archive_entry_filetype (e) != AE_IFREG
          || (strcmp (name, "manifest.json") != 0 && strcmp (name, "./manifest.json") != 0))
        continue;
      size = archive_entry_size (e);
      if (size <= 0 || size > MANIFEST_MAX)
        continue;
      buf = xmalloc ((size_t)size);
      n = archive_read_data (a, buf, (size_t)size);
      if (n != size)
        return archive_fail (a, "read manifest.json", err);
      j = json_parse (buf, (size_t)n, &sub);
      esbx_error_free (&sub);
      first = j && j->type == JSON_ARRAY && j->n > 0 ? j->items[0] : NULL;
      layers = json_get (first, "Layers");
      if (layers == NULL || layers->type != JSON_ARRAY)
        {
          json_free (j);
          return 0;
        }
      *out = j;
      return 0;
    }
  return r;
}

static int
import_docker_save (struct import *im, struct source *src, json_t *manifest, esbx_error_t *err)
{
  json_t *layers = json_get (manifest->items[0], "Layers");
  size_t i;

  if (manifest->n != 1)
    return esbx_make_error (err, 0, "docker save archive holds %zu images; save one image",
                            manifest->n);
  for (i = 0; i < layers->n; i++)
    {
      _cleanup_free_ char *name = NULL;

      if (layers->items[i]->type != JSON_STRING)
        return esbx_make_error (err, 0, "manifest.json: layer %zu is not a string", i);
      if (esbx_clean_relpath (layers->items[i]->text, false, &name, err) < 0)
        return esbx_error_wrap (err, "manifest.json");
      if (import_layer (im, src, name, true, err) < 0
          || import_layer (im, src, name, false, err) < 0)
        return -1;
    }
  return 0;
}

static int
import_archive (struct import *im, esbx_error_t *err)
{
  _cleanup_free_ struct source *src = xmalloc0 (sizeof *src);
  _cleanup_archive_read_ struct archive *a = NULL;
  _cleanup_json_ json_t *manifest = NULL;

  src->fd = im->srcfd;
  if (read_manifest (im, src, &manifest, err) < 0)
    return -1;
  if (manifest)
    return import_docker_save (im, src, manifest, err);
  if (open_source (src, &a, err) < 0)
    return -1;
  return extract_all (im, a, false, err);
}

/* ---- the child ---------------------------------------------------------- */

static int
run_child (struct import *im, esbx_error_t *err)
{
  /* esbxd may die mid-import: no orphan should keep writing.  */
  prctl (PR_SET_PDEATHSIG, SIGKILL);
  if (fchdir (im->destfd) < 0)
    return esbx_make_error (err, errno, "enter the destination");
  /* Defence in depth; without CAP_SYS_CHROOT the SECURE_* flags and our
     own checks still hold.  */
  if (im->root && chroot (".") == 0 && chdir ("/") < 0)
    return esbx_make_error (err, errno, "chdir");
  /* libarchive converts pax UTF-8 names to the locale's charset.  */
  setlocale (LC_CTYPE, "C.UTF-8");
  if (im->is_dir)
    {
      int src = im->srcfd, dst = im->destfd; /* depth 0: never given back */
      return copy_dir (im, &src, &dst, "", 0, err);
    }
  return import_archive (im, err);
}

static int
read_limit (const char *var, uint64_t dflt, uint64_t *out, esbx_error_t *err)
{
  const char *v = getenv (var);

  *out = dflt;
  if (v == NULL || *v == '\0')
    return 0;
  if (esbx_parse_size (v, out, err) < 0)
    return esbx_error_wrap (err, "%s", var);
  return 0;
}

int
esbx_import_tree (const char *from, int destfd, esbx_error_t *err)
{
  _cleanup_free_ char *shown = esbx_quote_path (from);
  _cleanup_close_ int srcfd = -1;
  _cleanup_close_ int rfd = -1;
  _cleanup_close_ int wfd = -1;
  struct import im = { 0 };
  char msg[4096];
  size_t len = 0;
  struct stat st;
  int fds[2], status;
  ssize_t n;
  pid_t pid;

  if (read_limit ("ESBX_IMPORT_MAX_BYTES", DEFAULT_MAX_BYTES, &im.max_bytes, err) < 0
      || read_limit ("ESBX_IMPORT_MAX_ENTRIES", DEFAULT_MAX_ENTRIES, &im.max_entries, err) < 0)
    return esbx_error_wrap (err, "import `%s`", shown);

  /* O_NONBLOCK: a FIFO must not hang the caller before it is refused.  */
  srcfd = TEMP_FAILURE_RETRY (open (from, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (srcfd < 0)
    return esbx_make_error (err, errno, "import `%s`", shown);
  if (fstat (srcfd, &st) < 0)
    return esbx_make_error (err, errno, "import `%s`: stat", shown);
  if (!S_ISDIR (st.st_mode) && !S_ISREG (st.st_mode))
    return esbx_make_error (err, 0, "import `%s`: not a directory or an archive file", shown);
  im.srcfd = srcfd;
  im.destfd = destfd;
  im.is_dir = S_ISDIR (st.st_mode);
  im.root = geteuid () == 0;

  if (pipe2 (fds, O_CLOEXEC) < 0)
    return esbx_make_error (err, errno, "import `%s`: pipe", shown);
  rfd = fds[0];
  wfd = fds[1];
  pid = fork ();
  if (pid < 0)
    return esbx_make_error (err, errno, "import `%s`: fork", shown);
  if (pid == 0)
    {
      esbx_error_t cerr = NULL;
      char *p;

      if (run_child (&im, &cerr) == 0)
        _exit (0);
      for (p = cerr->msg; *p; p++)
        if (*p == '\n')
          *p = ' ';
      esbx_write_all (wfd, cerr->msg, strlen (cerr->msg));
      _exit (1);
    }
  close (take_fd (&wfd));
  while (len < sizeof msg - 1)
    {
      n = TEMP_FAILURE_RETRY (read (rfd, msg + len, sizeof msg - 1 - len));
      if (n <= 0)
        break;
      len += (size_t)n;
    }
  msg[len] = '\0';
  if (TEMP_FAILURE_RETRY (waitpid (pid, &status, 0)) < 0)
    return esbx_make_error (err, errno, "import `%s`: wait", shown);
  if (WIFEXITED (status) && WEXITSTATUS (status) == 0)
    return 0;
  if (len > 0)
    return esbx_make_error (err, 0, "import `%s`: %s", shown, msg);
  if (WIFSIGNALED (status))
    return esbx_make_error (err, 0, "import `%s`: extraction killed by signal %d", shown,
                            WTERMSIG (status));
  return esbx_make_error (err, 0, "import `%s`: extraction failed with status %d", shown,
                          WEXITSTATUS (status));
}
