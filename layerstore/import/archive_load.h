/* libarchive, loaded on first use.  esbx, esbx-runtime, esbx-holder and
   esbxd do not link it: with what it pulls in (libxml2, ICU, libstdc++,
   nettle, lzma, zstd, lz4, bz2, acl) it cost every start of every binary
   several milliseconds, and only import and export use it.  archive_load.c
   defines each archive_* function the store calls as a small function that
   forwards to the library, so import*.c and export.c keep calling
   libarchive's API as documented.  A new call needs one line in the list
   of archive_load.c (the link fails until it is there).  */
#ifndef ESBX_ARCHIVE_LOAD_H
#define ESBX_ARCHIVE_LOAD_H

#include "error.h"

/* Load libarchive if it is not yet loaded; thread-safe.  Import and export
   call it before anything else (import before it forks its chrooted child,
   where the library is out of reach), so that a missing library is a
   one-line error rather than an abort in the first archive_* call.  */
int esbx_archive_load (esbx_error_t *err);

#endif
