#include "hash.h"
#include "fs.h"
#include "utils.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
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
hash_stream (int in, int out, char hex[ESBX_SHA256_HEX_LEN + 1], off_t *size, esbx_error_t *err)
{
  EVP_MD_CTX *ctx = EVP_MD_CTX_new ();
  unsigned char md[EVP_MAX_MD_SIZE];
  _cleanup_free_ char *buf = xmalloc (128 * 1024);
  unsigned int mdlen;
  off_t total = 0;
  ssize_t r;
  int ret = 0;

  if (ctx == NULL || EVP_DigestInit_ex (ctx, EVP_sha256 (), NULL) != 1)
    abort ();
  for (;;)
    {
      r = TEMP_FAILURE_RETRY (read (in, buf, 128 * 1024));
      if (r < 0)
        {
          ret = esbx_make_error (err, errno, "read");
          break;
        }
      if (r == 0)
        break;
      EVP_DigestUpdate (ctx, buf, (size_t)r);
      if (out >= 0 && esbx_write_all (out, buf, (size_t)r) < 0)
        {
          ret = esbx_make_error (err, errno, "write");
          break;
        }
      total += r;
    }
  EVP_DigestFinal_ex (ctx, md, &mdlen);
  EVP_MD_CTX_free (ctx);
  if (ret == 0)
    {
      to_hex (md, hex);
      if (size)
        *size = total;
    }
  return ret;
}

int
esbx_sha256_fd (int fd, char out[ESBX_SHA256_HEX_LEN + 1], off_t *size, esbx_error_t *err)
{
  return hash_stream (fd, -1, out, size, err);
}

int
esbx_copy_hash_fd (int in, int out, char hex[ESBX_SHA256_HEX_LEN + 1], off_t *size,
                   esbx_error_t *err)
{
  return hash_stream (in, out, hex, size, err);
}

void
esbx_sha256_buf (const void *data, size_t len, char out[ESBX_SHA256_HEX_LEN + 1])
{
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int mdlen;

  if (EVP_Digest (data, len, md, &mdlen, EVP_sha256 (), NULL) != 1)
    abort ();
  to_hex (md, out);
}

int
esbx_ct_streq (const char *a, const char *b)
{
  size_t la = strlen (a), lb = strlen (b);

  if (la != lb)
    return 0;
  return CRYPTO_memcmp (a, b, la) == 0;
}
