/* esbx: SHA-256 of file contents and strings (nettle: libarchive needs it anyway,
   and it starts in a fraction of libcrypto's time).  */
#ifndef ESBX_HASH_H
#define ESBX_HASH_H

#include "error.h"

#include <stddef.h>
#include <sys/types.h>

#define ESBX_SHA256_HEX_LEN 64

/* Hash everything readable from FD; *size receives the byte count.  */
int esbx_sha256_fd (int fd, char out[ESBX_SHA256_HEX_LEN + 1], off_t *size, esbx_error_t *err);
/* Copy IN to OUT (esbx_copy_file_data: holes stay holes) while hashing
   what was copied.  */
int esbx_copy_hash_fd (int in, int out, char hex[ESBX_SHA256_HEX_LEN + 1], off_t *size,
                       esbx_error_t *err);
void esbx_sha256_buf (const void *data, size_t len, char out[ESBX_SHA256_HEX_LEN + 1]);
/* Constant-time comparison of two equal-length strings.  */
int esbx_ct_streq (const char *a, const char *b);

#endif
