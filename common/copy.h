/* esbx: the one way esbx copies a file's contents (snapshots, forks,
   publish staging, import, export's reads): sparse files stay sparse.  */
#ifndef ESBX_COPY_H
#define ESBX_COPY_H

#include "error.h"

#include <stddef.h>
#include <sys/types.h>

/* Sees every byte of the content in order, holes as zeros; returns < 0 to
   stop the copy (with errno set).  */
typedef int (*esbx_copy_sink_fn) (void *ctx, const void *data, size_t len);

/* Copy the regular file IN, from its start, into OUT, a new empty regular
   file, the cheapest way the filesystems allow: a reflink of the whole file
   (FICLONE: btrfs, xfs) when no SINK is given; else only the data extents
   (SEEK_DATA/SEEK_HOLE), each with copy_file_range, or read and write where
   that fails.  Holes stay holes and OUT gets IN's size.  What is copied is
   IN as it was at the start: bytes appended meanwhile are not, a file that
   shrank is padded with zeros to its first size.  SINK (may be NULL) gets
   the content, holes as zeros, which then goes through this process.
   *SIZE (may be NULL): the size copied.  Errors name no file; the caller
   wraps them.  */
int esbx_copy_file_data (int in, int out, esbx_copy_sink_fn sink, void *ctx, off_t *size,
                         esbx_error_t *err);

/* Where each data extent of FD starts and ends, up to SIZE: calls EXTENT
   for each (holes between them not at all); the whole file is one extent
   where the filesystem cannot tell.  For writers of sparse archives.  */
typedef int (*esbx_extent_fn) (void *ctx, off_t offset, off_t length);
int esbx_file_extents (int fd, off_t size, esbx_extent_fn extent, void *ctx, esbx_error_t *err);

#endif
