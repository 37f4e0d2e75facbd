/* liblayerstore import: reading archives (tar, tar.gz, tar.zst, tar.xz,
 * zip) with libarchive from the source file.  */
#include "importer.h"
#include "utils.h"

#include <errno.h>
#include <unistd.h>

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

void
esbx_import_support_filters (struct archive *a)
{
  /* Named rather than "all": the rest would run external programs.  */
  archive_read_support_filter_gzip (a);
  archive_read_support_filter_bzip2 (a);
  archive_read_support_filter_xz (a);
  archive_read_support_filter_lzma (a);
  archive_read_support_filter_zstd (a);
  archive_read_support_filter_lz4 (a);
}

int
esbx_import_archive_fail (struct archive *a, const char *what, esbx_error_t *err)
{
  const char *msg = archive_error_string (a);

  return esbx_make_error (err, 0, "%s: %s", what, msg ? msg : "unknown libarchive error");
}

int
esbx_import_open_source (struct source *src, struct archive **out, esbx_error_t *err)
{
  _cleanup_archive_read_ struct archive *a = archive_read_new ();

  if (lseek (src->fd, 0, SEEK_SET) < 0)
    return esbx_make_error (err, errno, "seek");
  archive_read_support_format_tar (a);
  archive_read_support_format_zip (a);
  esbx_import_support_filters (a);
  archive_read_set_callback_data (a, src);
  archive_read_set_read_callback (a, source_read);
  archive_read_set_seek_callback (a, source_seek);
  archive_read_set_skip_callback (a, source_skip);
  if (archive_read_open1 (a) != ARCHIVE_OK)
    return esbx_import_archive_fail (a, "not a directory or an archive esbx reads", err);
  *out = steal_pointer (&a);
  return 0;
}

int
esbx_import_next_header (struct archive *a, struct archive_entry **e, esbx_error_t *err)
{
  int r = archive_read_next_header (a, e);

  if (r == ARCHIVE_EOF)
    return 0;
  if (r < ARCHIVE_WARN)
    return esbx_import_archive_fail (a, "read", err);
  return 1;
}
