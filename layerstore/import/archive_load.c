/* libarchive, loaded on first use: see archive_load.h.  */
#include "archive_load.h"

#include "dl.h"
#include "utils.h"

#include <archive.h>
#include <archive_entry.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIBARCHIVE "libarchive.so.13"

/* F (RETURN, NAME, PARAMS, ARGS) for a function with a value, V for a void
   one: every archive_* function the store calls, with libarchive's own
   prototypes (archive.h is included above, so a mismatch does not compile).
   archive_set_error, the one variadic function, is written out below.  */
#define ARCHIVE_FUNCTIONS(F, V)                                                                    \
  V (void, archive_entry_acl_clear, (struct archive_entry * a), (a))                               \
  F (mode_t, archive_entry_filetype, (struct archive_entry * a), (a))                              \
  V (void, archive_entry_free, (struct archive_entry * a), (a))                                    \
  F (const char *, archive_entry_hardlink, (struct archive_entry * a), (a))                        \
  F (struct archive_entry *, archive_entry_new, (void), ())                                        \
  F (const char *, archive_entry_pathname, (struct archive_entry * a), (a))                        \
  F (mode_t, archive_entry_perm, (struct archive_entry * a), (a))                                  \
  V (void, archive_entry_set_fflags, (struct archive_entry * a, unsigned long b, unsigned long c), \
     (a, b, c))                                                                                    \
  V (void, archive_entry_set_filetype, (struct archive_entry * a, unsigned int b), (a, b))         \
  V (void, archive_entry_set_gid, (struct archive_entry * a, la_int64_t b), (a, b))                \
  V (void, archive_entry_set_hardlink, (struct archive_entry * a, const char *b), (a, b))          \
  V (void, archive_entry_set_mtime, (struct archive_entry * a, time_t b, long c), (a, b, c))       \
  V (void, archive_entry_set_pathname, (struct archive_entry * a, const char *b), (a, b))          \
  V (void, archive_entry_set_pathname_utf8, (struct archive_entry * a, const char *b), (a, b))     \
  V (void, archive_entry_set_perm, (struct archive_entry * a, mode_t b), (a, b))                   \
  V (void, archive_entry_set_rdev, (struct archive_entry * a, dev_t b), (a, b))                    \
  V (void, archive_entry_set_size, (struct archive_entry * a, la_int64_t b), (a, b))               \
  V (void, archive_entry_set_symlink, (struct archive_entry * a, const char *b), (a, b))           \
  V (void, archive_entry_set_symlink_utf8, (struct archive_entry * a, const char *b), (a, b))      \
  V (void, archive_entry_set_hardlink_utf8, (struct archive_entry * a, const char *b), (a, b))     \
  V (void, archive_entry_set_uid, (struct archive_entry * a, la_int64_t b), (a, b))                \
  F (la_int64_t, archive_entry_size, (struct archive_entry * a), (a))                              \
  F (int, archive_entry_size_is_set, (struct archive_entry * a), (a))                              \
  F (int, archive_entry_sparse_count, (struct archive_entry * a), (a))                             \
  V (void, archive_entry_sparse_add_entry, (struct archive_entry * a, la_int64_t b, la_int64_t c), \
     (a, b, c))                                                                                    \
  F (const char *, archive_entry_symlink, (struct archive_entry * a), (a))                         \
  V (void, archive_entry_xattr_clear, (struct archive_entry * a), (a))                             \
  F (int, archive_errno, (struct archive * a), (a))                                                \
  F (const char *, archive_error_string, (struct archive * a), (a))                                \
  F (la_ssize_t, archive_read_data, (struct archive * a, void *b, size_t c), (a, b, c))            \
  F (int, archive_read_data_block, (struct archive * a, const void **b, size_t *c, la_int64_t *d), \
     (a, b, c, d))                                                                                 \
  F (int, archive_read_free, (struct archive * a), (a))                                            \
  F (struct archive *, archive_read_new, (void), ())                                               \
  F (int, archive_read_next_header, (struct archive * a, struct archive_entry * *b), (a, b))       \
  F (int, archive_read_open,                                                                       \
     (struct archive * a, void *b, archive_open_callback *c, archive_read_callback *d,             \
      archive_close_callback *e),                                                                  \
     (a, b, c, d, e))                                                                              \
  F (int, archive_read_open1, (struct archive * a), (a))                                           \
  F (int, archive_read_set_callback_data, (struct archive * a, void *b), (a, b))                   \
  F (int, archive_read_set_read_callback, (struct archive * a, archive_read_callback * b), (a, b)) \
  F (int, archive_read_set_seek_callback, (struct archive * a, archive_seek_callback * b), (a, b)) \
  F (int, archive_read_set_skip_callback, (struct archive * a, archive_skip_callback * b), (a, b)) \
  F (int, archive_read_support_filter_bzip2, (struct archive * a), (a))                            \
  F (int, archive_read_support_filter_gzip, (struct archive * a), (a))                             \
  F (int, archive_read_support_filter_lz4, (struct archive * a), (a))                              \
  F (int, archive_read_support_filter_lzma, (struct archive * a), (a))                             \
  F (int, archive_read_support_filter_xz, (struct archive * a), (a))                               \
  F (int, archive_read_support_filter_zstd, (struct archive * a), (a))                             \
  F (int, archive_read_support_format_tar, (struct archive * a), (a))                              \
  F (int, archive_read_support_format_zip, (struct archive * a), (a))                              \
  F (int, archive_write_add_filter_gzip, (struct archive * a), (a))                                \
  F (int, archive_write_add_filter_zstd, (struct archive * a), (a))                                \
  F (int, archive_write_close, (struct archive * a), (a))                                          \
  F (la_ssize_t, archive_write_data, (struct archive * a, const void *b, size_t c), (a, b, c))     \
  F (la_ssize_t, archive_write_data_block,                                                         \
     (struct archive * a, const void *b, size_t c, la_int64_t d), (a, b, c, d))                    \
  F (struct archive *, archive_write_disk_new, (void), ())                                         \
  F (int, archive_write_disk_set_options, (struct archive * a, int b), (a, b))                     \
  F (int, archive_write_finish_entry, (struct archive * a), (a))                                   \
  F (int, archive_write_free, (struct archive * a), (a))                                           \
  F (int, archive_write_header, (struct archive * a, struct archive_entry * b), (a, b))            \
  F (struct archive *, archive_write_new, (void), ())                                              \
  F (int, archive_write_open_fd, (struct archive * a, int b), (a, b))                              \
  F (int, archive_write_open_filename, (struct archive * a, const char *b), (a, b))                \
  F (int, archive_write_open_memory, (struct archive * a, void *b, size_t c, size_t *d),           \
     (a, b, c, d))                                                                                 \
  F (int, archive_write_set_bytes_in_last_block, (struct archive * a, int b), (a, b))              \
  F (int, archive_write_set_filter_option,                                                         \
     (struct archive * a, const char *b, const char *c, const char *d), (a, b, c, d))              \
  F (int, archive_write_set_format_pax_restricted, (struct archive * a), (a))                      \
  F (int, archive_write_set_format_raw, (struct archive * a), (a))                                 \
  F (int, archive_write_set_format_ustar, (struct archive * a), (a))                               \
  F (int, archive_write_set_format_zip, (struct archive * a), (a))

#define MEMBER(ret, name, params, args) ret (*name) params;
static struct
{
  ARCHIVE_FUNCTIONS (MEMBER, MEMBER)
  void (*archive_set_error) (struct archive *, int, const char *, ...);
} api;
#undef MEMBER

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static char load_error[512];

#define SYMBOL(ret, name, params, args) { #name, &api.name },
static const struct esbx_dl_symbol symbols[] = {
  ARCHIVE_FUNCTIONS (SYMBOL, SYMBOL){ "archive_set_error", &api.archive_set_error },
};
#undef SYMBOL

static void
load (void)
{
  esbx_dl_load (LIBARCHIVE, symbols, ARRAY_SIZE (symbols), load_error, sizeof load_error);
}

int
esbx_archive_load (esbx_error_t *err)
{
  pthread_once (&load_once, load);
  if (api.archive_set_error == NULL)
    return esbx_make_error (err, 0, "cannot load %s (apt-get install libarchive13): %s", LIBARCHIVE,
                            load_error);
  return 0;
}

static void
need_api (void)
{
  esbx_dl_need (esbx_archive_load);
}

ARCHIVE_FUNCTIONS (ESBX_DL_FORWARD, ESBX_DL_FORWARD_VOID)

void
archive_set_error (struct archive *a, int errnum, const char *fmt, ...)
{
  char msg[1024];
  va_list ap;

  need_api ();
  va_start (ap, fmt);
  vsnprintf (msg, sizeof msg, fmt, ap);
  va_end (ap);
  api.archive_set_error (a, errnum, "%s", msg);
}
