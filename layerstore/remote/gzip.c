/* liblayerstore: a file gzip-compressed into another, the same bytes for
 * the same input (no time, no name in the header), for the layer blobs of
 * a registry (docs/SCALE-OUT.md).  libarchive's gzip filter over its raw
 * format: the library is loaded already for the tar, and esbx links no
 * zlib of its own.  */
#include "archive_load.h"
#include "remote.h"
#include "utils.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#define GZIP_BUF (64 * 1024)

static int
copy (struct archive *a, int in, esbx_error_t *err)
{
  _cleanup_free_ char *buf = xmalloc (GZIP_BUF);
  ssize_t n;

  for (;;)
    {
      n = TEMP_FAILURE_RETRY (read (in, buf, GZIP_BUF));
      if (n < 0)
        return esbx_make_error (err, errno, "read");
      if (n == 0)
        return 0;
      if (archive_write_data (a, buf, (size_t)n) != n)
        return esbx_make_error (err, archive_errno (a), "gzip: %s", archive_error_string (a));
    }
}

int
esbx_gzip_fd (int in, int out, esbx_error_t *err)
{
  struct archive *a;
  struct archive_entry *e;
  struct stat st;
  int ret = -1;

  if (esbx_archive_load (err) < 0)
    return -1;
  if (fstat (in, &st) < 0 || lseek (in, 0, SEEK_SET) < 0)
    return esbx_make_error (err, errno, "gzip: read the input");
  a = archive_write_new ();
  e = archive_entry_new ();
  archive_entry_set_filetype (e, AE_IFREG);
  archive_entry_set_size (e, st.st_size);
  if (archive_write_add_filter_gzip (a) != ARCHIVE_OK
      || archive_write_set_filter_option (a, "gzip", "timestamp", NULL) != ARCHIVE_OK
      || archive_write_set_format_raw (a) != ARCHIVE_OK
      || archive_write_set_bytes_in_last_block (a, 1) != ARCHIVE_OK
      || archive_write_open_fd (a, out) != ARCHIVE_OK || archive_write_header (a, e) != ARCHIVE_OK)
    esbx_make_error (err, archive_errno (a), "gzip: %s", archive_error_string (a));
  else if (copy (a, in, err) < 0)
    ;
  else if (archive_write_close (a) != ARCHIVE_OK)
    esbx_make_error (err, archive_errno (a), "gzip: %s", archive_error_string (a));
  else
    ret = 0;
  archive_entry_free (e);
  archive_write_free (a);
  return ret;
}
