/* Copying file contents with their holes.  A session can make a 2 GiB file
   of zeros with one truncate that takes no space; a copy that writes it out
   takes 2 GiB, fills the store's filesystem and fails, so every copy of
   session content keeps holes as holes.  */
#include "copy.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdbool.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#define COPY_CHUNK (128 * 1024)

static const unsigned char zeros[COPY_CHUNK];

struct copy
{
  int in, out;
  esbx_copy_sink_fn sink;
  void *ctx;
  char *buf;
  off_t done; /* the content is copied (and the sink fed) up to here */
  bool plain; /* copy_file_range failed once: read and write from then on */
};

static int
feed_zeros (struct copy *c, off_t len)
{
  while (len > 0)
    {
      size_t n = len < COPY_CHUNK ? (size_t)len : COPY_CHUNK;
      if (c->sink (c->ctx, zeros, n) < 0)
        return -1;
      len -= (off_t)n;
      c->done += (off_t)n;
    }
  return 0;
}

static int
write_at (int fd, const char *p, size_t len, off_t off)
{
  while (len > 0)
    {
      ssize_t w = TEMP_FAILURE_RETRY (pwrite (fd, p, len, off));
      if (w < 0)
        return -1;
      p += w;
      len -= (size_t)w;
      off += w;
    }
  return 0;
}

/* LEN bytes at OFF of IN to the same offset of OUT; *SHORT when IN ended
   before (it shrank).  */
static int
copy_range (struct copy *c, off_t off, off_t len, bool *shorter, esbx_error_t *err)
{
  while (len > 0)
    {
      size_t want = len < COPY_CHUNK ? (size_t)len : COPY_CHUNK;
      ssize_t n;

      if (!c->plain && c->sink == NULL)
        {
          off_t in_off = off, out_off = off;

          n = TEMP_FAILURE_RETRY (
              copy_file_range (c->in, &in_off, c->out, &out_off, (size_t)len, 0));
          if (n < 0
              && (errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP
                  || errno == EPERM))
            {
              c->plain = true;
              continue;
            }
          if (n < 0)
            return esbx_make_error (err, errno, "copy");
        }
      else
        {
          if (c->buf == NULL)
            c->buf = xmalloc (COPY_CHUNK);
          n = TEMP_FAILURE_RETRY (pread (c->in, c->buf, want, off));
          if (n < 0)
            return esbx_make_error (err, errno, "read");
          if (n > 0 && c->sink && c->sink (c->ctx, c->buf, (size_t)n) < 0)
            return esbx_make_error (err, errno, "copy");
          if (n > 0 && write_at (c->out, c->buf, (size_t)n, off) < 0)
            return esbx_make_error (err, errno, "write");
        }
      if (n == 0)
        {
          *shorter = true;
          return 0;
        }
      off += n;
      len -= n;
      c->done = off;
    }
  return 0;
}

/* The data extent at or after POS, up to END: *DATA, *HOLE; *DATA == END
   when only a hole is left.  */
static int
next_extent (int fd, off_t pos, off_t end, off_t *data, off_t *hole, esbx_error_t *err)
{
  *data = lseek (fd, pos, SEEK_DATA);
  if (*data < 0 && errno == ENXIO)
    *data = end;
  else if (*data < 0)
    return esbx_make_error (err, errno, "seek");
  if (*data >= end)
    {
      *data = *hole = end;
      return 0;
    }
  *hole = lseek (fd, *data, SEEK_HOLE);
  if (*hole < 0 && errno == ENXIO)
    *hole = end; /* shrank meanwhile: the rest is padded */
  else if (*hole < 0)
    return esbx_make_error (err, errno, "seek");
  if (*hole > end)
    *hole = end;
  return 0;
}

int
esbx_file_extents (int fd, off_t size, esbx_extent_fn extent, void *ctx, esbx_error_t *err)
{
  off_t pos = 0, data, hole;

  while (pos < size)
    {
      if (next_extent (fd, pos, size, &data, &hole, err) < 0)
        return -1;
      if (data >= size)
        break;
      if (extent (ctx, data, hole - data) < 0)
        return esbx_make_error (err, errno, "extent");
      pos = hole;
    }
  return 0;
}

int
esbx_copy_file_data (int in, int out, esbx_copy_sink_fn sink, void *ctx, off_t *size,
                     esbx_error_t *err)
{
  struct copy c = { .in = in, .out = out, .sink = sink, .ctx = ctx };
  _cleanup_free_ char *buf = NULL;
  off_t pos = 0, end, data, hole;
  bool shorter = false;
  struct stat st;
  int ret = -1;

  if (fstat (in, &st) < 0)
    return esbx_make_error (err, errno, "stat");
  end = st.st_size;
  if (sink == NULL && end > 0 && ioctl (out, FICLONE, in) == 0)
    {
      /* The clone is IN as it is now, which may be longer.  */
      if (fstat (out, &st) < 0)
        return esbx_make_error (err, errno, "stat");
      if (size)
        *size = st.st_size;
      return 0;
    }
  while (pos < end && !shorter)
    {
      if (next_extent (in, pos, end, &data, &hole, err) < 0)
        goto out;
      if (data > pos && sink && feed_zeros (&c, data - pos) < 0)
        {
          esbx_make_error (err, errno, "copy");
          goto out;
        }
      if (data >= end)
        break;
      if (copy_range (&c, data, hole - data, &shorter, err) < 0)
        goto out;
      pos = hole;
    }
  /* The hole at the end, or what IN lost when it shrank: zeros, as the
     size set below makes them.  */
  if (sink && c.done < end)
    {
      if (feed_zeros (&c, end - c.done) < 0)
        {
          esbx_make_error (err, errno, "copy");
          goto out;
        }
    }
  if (ftruncate (out, end) < 0)
    {
      esbx_make_error (err, errno, "truncate");
      goto out;
    }
  if (size)
    *size = end;
  ret = 0;
out:
  buf = c.buf;
  return ret;
}
