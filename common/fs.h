/* esbx: file helpers for the store's own files (trusted paths under the
   store root).  Paths that come from session content, archives or requests go
   through path.h instead.  */
#ifndef ESBX_FS_H
#define ESBX_FS_H

#include "error.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

int esbx_read_file_at (int dirfd, const char *path, size_t limit, char **buf, size_t *len,
                       esbx_error_t *err);
/* Write NAME in DIRFD atomically: temp file, fsync, rename, fsync dir.  */
int esbx_write_file_atomic_at (int dirfd, const char *name, const void *data, size_t len,
                               mode_t mode, esbx_error_t *err);
/* The same without the fsyncs, for files a crash may lose but that readers
   must never see half-written (counters, a bundle's config.json).  */
int esbx_replace_file_at (int dirfd, const char *name, const void *data, size_t len, mode_t mode,
                          esbx_error_t *err);
int esbx_write_all (int fd, const void *data, size_t len);
int esbx_fsync_at (int dirfd, const char *path, esbx_error_t *err);
int esbx_mkdir_p (const char *path, mode_t mode, esbx_error_t *err);
/* Remove NAME in DIRFD recursively, never following a symlink.  Missing is
   not an error.  */
int esbx_rm_rf_at (int dirfd, const char *name, esbx_error_t *err);
/* flock a file (created if needed) in DIRFD; returns the fd that holds it.  */
int esbx_lock_at (int dirfd, const char *name, bool exclusive, bool wait, esbx_error_t *err);
/* Open a directory (O_DIRECTORY|O_CLOEXEC) relative to DIRFD.  */
int esbx_open_dir_at (int dirfd, const char *path, esbx_error_t *err);
bool esbx_exists_at (int dirfd, const char *path);
/* Sorted names of a directory (no . and ..), NULL-terminated.  */
char **esbx_list_dir_at (int dirfd, const char *path, esbx_error_t *err);
/* Disk usage in bytes of a tree (allocated blocks), not following symlinks.  */
int esbx_du_at (int dirfd, const char *path, unsigned long long *bytes, esbx_error_t *err);

#endif
