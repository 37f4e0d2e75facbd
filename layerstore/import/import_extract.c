/* liblayerstore import: the entries of an archive written beneath the
 * destination by archive_write_disk with its SECURE_* checks, once ours
 * (prepare_entry) have passed and rewritten them.  */
#include "fs.h"
#include "importer.h"
#include "path.h"
#include "text.h"
#include "utils.h"

#include <fcntl.h>
#include <sys/stat.h>

static struct archive *
new_disk_writer (struct importer *im)
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
check_hardlink (struct importer *im, const char *rel, const char *link, char **clean,
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
  if (esbx_import_check_name (target, err) < 0)
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
prepare_entry (struct importer *im, struct archive_entry *e, char **relp, esbx_error_t *err)
{
  _cleanup_free_ char *rel = NULL;
  _cleanup_free_ char *shown = NULL;
  _cleanup_free_ char *link = NULL;
  const char *hardlink;
  mode_t mode;
  int64_t size;

  if (esbx_import_clean_entry_name (archive_entry_pathname (e), &rel, err) < 0)
    return -1;
  if (rel[0] == '\0' || esbx_import_skip_git (im, rel))
    return 0;
  if (esbx_import_check_name (rel, err) < 0)
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
  if (archive_entry_filetype (e) != AE_IFLNK && esbx_import_strip_setid (rel, &mode))
    archive_entry_set_perm (e, mode);

  size = archive_entry_size_is_set (e) ? archive_entry_size (e) : 0;
  if (size < 0)
    return esbx_make_error (err, 0, "entry `%s`: negative size", shown);
  if (esbx_import_count_bytes (im, (uint64_t)size, err) < 0)
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
copy_entry_data (struct importer *im, struct archive *in, struct archive *out, const char *rel,
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
        return esbx_import_archive_fail (in, "read", err);
      if (off < 0)
        return esbx_make_error (err, 0, "entry `%s`: bad data offset", rel);
      if ((uint64_t)off + len > *extent)
        *extent = (uint64_t)off + len;
      if (esbx_import_count_bytes (im, *extent, err) < 0)
        return -1;
      if (archive_write_data_block (out, buf, len, off) < ARCHIVE_WARN)
        return esbx_import_archive_fail (out, "write", err);
    }
}

int
esbx_import_extract (struct importer *im, struct archive *in, unsigned how, esbx_error_t *err)
{
  _cleanup_archive_write_ struct archive *out = new_disk_writer (im);
  struct archive_entry *e;
  int r;

  while ((r = esbx_import_next_header (in, &e, err)) > 0)
    {
      _cleanup_free_ char *rel = NULL;
      uint64_t extent = 0;
      int64_t size;

      if ((how & EXTRACT_SKIP_WHITEOUTS) && esbx_import_is_whiteout (archive_entry_pathname (e)))
        continue;
      if (esbx_import_count_entry (im, &im->entries, err) < 0)
        return -1;
      r = prepare_entry (im, e, &rel, err);
      if (r < 0)
        return -1;
      if (r == 0)
        continue;
      if ((how & EXTRACT_REPLACE_DIRS) && archive_entry_hardlink (e) == NULL
          && archive_entry_filetype (e) != AE_IFDIR && esbx_import_make_room (im, rel, err) < 0)
        return -1;
      if (archive_write_header (out, e) < ARCHIVE_WARN)
        return esbx_import_archive_fail (out, "extract", err);
      size = archive_entry_size_is_set (e) ? archive_entry_size (e) : 0;
      if (archive_entry_filetype (e) == AE_IFREG
          && copy_entry_data (im, in, out, rel, &extent, err) < 0)
        return -1;
      if (archive_write_finish_entry (out) < ARCHIVE_WARN)
        return esbx_import_archive_fail (out, "extract", err);
      im->bytes += extent > (uint64_t)size ? extent : (uint64_t)size;
    }
  if (r < 0)
    return -1;
  /* Directory modes and times are applied here, after their contents.  */
  if (archive_write_close (out) < ARCHIVE_WARN)
    return esbx_import_archive_fail (out, "extract", err);
  return 0;
}
