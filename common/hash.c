#include "hash.h"
#include "copy.h"
#include "fs.h"
#include "utils.h"

#include <nettle/memops.h>
#include <nettle/sha2.h>
#include <string.h>

static void
to_hex (const unsigned char *md, char out[ESBX_SHA256_HEX_LEN + 1])
{
  static const char digits[] = "0123456789abcdef";
  int i;

  for (i = 0; i < 32; i++)
    {
      out[2 * i] = digits[md[i] >> 4];
      out[2 * i + 1] = digits[md[i] & 0xf];
    }
  out[ESBX_SHA256_HEX_LEN] = '\0';
}

static int
hash_stream (int in, char hex[ESBX_SHA256_HEX_LEN + 1], off_t *size, esbx_error_t *err)
{
  struct sha256_ctx ctx;
  unsigned char md[SHA256_DIGEST_SIZE];
  _cleanup_free_ char *buf = xmalloc (128 * 1024);
  off_t total = 0;
  ssize_t r;

  sha256_init (&ctx);
  for (;;)
    {
      r = TEMP_FAILURE_RETRY (read (in, buf, 128 * 1024));
      if (r < 0)
        return esbx_make_error (err, errno, "read");
      if (r == 0)
        break;
      sha256_update (&ctx, (size_t)r, (const uint8_t *)buf);
      total += r;
    }
  sha256_digest (&ctx, sizeof md, md);
  to_hex (md, hex);
  if (size)
    *size = total;
  return 0;
}

int
esbx_sha256_fd (int fd, char out[ESBX_SHA256_HEX_LEN + 1], off_t *size, esbx_error_t *err)
{
  return hash_stream (fd, out, size, err);
}

static int
hash_sink (void *ctx, const void *data, size_t len)
{
  sha256_update (ctx, len, data);
  return 0;
}

int
esbx_copy_hash_fd (int in, int out, char hex[ESBX_SHA256_HEX_LEN + 1], off_t *size,
                   esbx_error_t *err)
{
  struct sha256_ctx ctx;
  unsigned char md[SHA256_DIGEST_SIZE];

  sha256_init (&ctx);
  if (esbx_copy_file_data (in, out, hash_sink, &ctx, size, err) < 0)
    return -1;
  sha256_digest (&ctx, sizeof md, md);
  to_hex (md, hex);
  return 0;
}

void
esbx_sha256_buf (const void *data, size_t len, char out[ESBX_SHA256_HEX_LEN + 1])
{
  struct sha256_ctx ctx;
  unsigned char md[SHA256_DIGEST_SIZE];

  sha256_init (&ctx);
  sha256_update (&ctx, len, data);
  sha256_digest (&ctx, sizeof md, md);
  to_hex (md, out);
}

int
esbx_ct_streq (const char *a, const char *b)
{
  size_t la = strlen (a), lb = strlen (b);

  if (la != lb)
    return 0;
  return memeql_sec (a, b, la);
}
