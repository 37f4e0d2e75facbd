/* esbx: file helpers for the store's own files (trusted paths under the
   store root).  Paths that come from session content, archives or requests go
   through path.h instead.  */
#ifndef ESBX_FS_H
#define ESBX_FS_H

#include "error.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Read a regular file whole (esbx_open_regular_at): at most LIMIT bytes.  */
int esbx_read_file_at (int dirfd, const char *path, size_t limit, char **buf, size_t *len,
                       esbx_error_t *err);

/* The one rule for reading a file that a session, an archive or a request
   could have put there: open PATH in DIRFD for reading only if it is a
   regular file.  The last component is never followed; the type is checked
   with fstat on an O_PATH fd and that very inode is then opened through
   /proc/self/fd, so a FIFO or a device swapped in for the file is never
   opened, and a reader never blocks (a FIFO without writer, a lease).  The
   fd returned is blocking again.  A path that is not a regular file fails
   with "`PATH` is a fifo, not a regular file" (status 0).  */
int esbx_open_regular_at (int dirfd, const char *path, esbx_error_t *err);
/* The same for an O_PATH fd already resolved (path.h's beneath variants):
   DIRFD/NAME is where it was found, used only where /proc is missing (a
   chroot): then that name is opened again with O_NONBLOCK and must be the
   same inode.  SHOWN names the file in errors.  */
int esbx_reopen_regular (int pathfd, int dirfd, const char *name, const char *shown,
                         esbx_error_t *err);
/* "a fifo", "a directory", ... for messages.  */
const char *esbx_mode_type_name (mode_t mode);
/* Tests only: behave as if /proc were not mounted.  */
void esbx_fs_force_no_proc (bool on);
/* Write NAME in DIRFD atomically: temp file, fsync, rename, fsync dir.  */
int esbx_write_file_atomic_at (int dirfd, const char *name, const void *data, size_t len,
                               mode_t mode, esbx_error_t *err);
/* The same without the fsyncs, for files a crash may lose but that readers
   must never see half-written (counters, a bundle's config.json).  */
int esbx_replace_file_at (int dirfd, const char *name, const void *data, size_t len, mode_t mode,
                          esbx_error_t *err);
/* Create NAME in DIRFD, which must not exist, with DATA, and fsync it: for a
   file in a private directory that is renamed into place whole afterwards
   (no reader can see it half-written, so no temp file).  One fsync writes
   the data and, on Linux's journalling file systems, the new name.  */
int esbx_write_new_file_at (int dirfd, const char *name, const void *data, size_t len, mode_t mode,
                            esbx_error_t *err);
int esbx_write_all (int fd, const void *data, size_t len);
/* Close every descriptor above the standard streams but KEEP1 and KEEP2
   (-1: none): what a daemon or a child inherited must not stay open in it
   (a starter waiting for the EOF of a pipe, a client's connection).  */
void esbx_close_fds_except (int keep1, int keep2);
/* Close every descriptor from FIRST up.  */
void esbx_close_fds_from (int first);
int esbx_fsync_at (int dirfd, const char *path, esbx_error_t *err);
/* Make everything written so far on the filesystem of FD durable, with one
   syncfs: the data, inodes and directory entries of a whole tree written
   without fsyncs, in one journal commit instead of one synchronous commit
   per file (docs/PERFORMANCE.md).  Reports writeback errors since the last
   syncfs of that filesystem (Linux 5.8).  SHOWN names the tree in errors.  */
int esbx_syncfs (int fd, const char *shown, esbx_error_t *err);
int esbx_mkdir_p (const char *path, mode_t mode, esbx_error_t *err);
/* Remove NAME in DIRFD recursively, never following a symlink.  Missing is
   not an error.  Trees of any depth: no recursion, at most three fds.  */
int esbx_rm_rf_at (int dirfd, const char *name, esbx_error_t *err);
/* The one kind of lock of the store: flock, on a file or a directory,
   held as long as its fd is open.  esbx_lock_at locks a file (created if
   needed) in DIRFD and returns the fd that holds it; esbx_lock_fd locks
   what FD is (SHOWN names it); esbx_lock_is_held tells whether another
   holds FD's exclusively, taking nothing.  */
int esbx_lock_at (int dirfd, const char *name, bool exclusive, bool wait, esbx_error_t *err);
int esbx_lock_fd (int fd, bool exclusive, bool wait, const char *shown, esbx_error_t *err);
bool esbx_lock_is_held (int fd);
/* Open a directory (O_DIRECTORY|O_CLOEXEC) relative to DIRFD.  */
int esbx_open_dir_at (int dirfd, const char *path, esbx_error_t *err);
bool esbx_exists_at (int dirfd, const char *path);
/* Sorted names of a directory (no . and ..), NULL-terminated.  */
char **esbx_list_dir_at (int dirfd, const char *path, esbx_error_t *err);
/* The same for the open directory FD, read from its current offset (a
   directory just opened: from the start); SHOWN names it in errors.  */
char **esbx_list_dir_fd (int fd, const char *shown, esbx_error_t *err);
/* Disk usage in bytes of a tree (allocated blocks), not following symlinks,
   a file with several names (hard links) counted once; any depth, like
   esbx_rm_rf_at.  On error *bytes holds what was counted.  */
int esbx_du_at (int dirfd, const char *path, unsigned long long *bytes, esbx_error_t *err);

/* Deep recursive walks (scan, export, fsck, publish's copy, import).  A walk
   keeps the directory fd of each level it is in; from ESBX_WALK_HELD_FDS
   levels down it gives a parent's fd back while it is below it and takes it
   again through the child's "..", checked to be the same directory.  A
   session can nest directories thousands deep; a walk then still holds at
   most ESBX_WALK_HELD_FDS fds, not one per level (EMFILE at 1,024).

     struct esbx_held_dir held;
     sub = openat (*dfd, name, ...);
     if (esbx_dir_release (dfd, depth, &held, err) < 0) ...
     walk (&sub, depth + 1);
     if (esbx_dir_retake (dfd, sub, &held, err) < 0) ...

   A walk that releases fds takes its own fd by address: the callee may
   give it a new number.  A directory moved meanwhile is an error.  */
#define ESBX_WALK_HELD_FDS 32
struct esbx_held_dir
{
  dev_t dev;
  ino_t ino;
  bool released;
};
int esbx_dir_release (int *dirfd, size_t depth, struct esbx_held_dir *held, esbx_error_t *err);
int esbx_dir_retake (int *dirfd, int childfd, struct esbx_held_dir *held, esbx_error_t *err);

#endif
