/* esbx: resolve paths that come from untrusted places (session content,
   archives, requests) beneath a root directory.  No symlink is followed, no
   component may be "..", and nothing escapes the root: openat2 with
   RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS where the kernel has it, an
   O_NOFOLLOW walk of openat calls otherwise.  */
#ifndef ESBX_PATH_H
#define ESBX_PATH_H

#include "error.h"

#include <stdbool.h>
#include <sys/types.h>

/* Open PATH (relative or with a leading '/', both meaning "under ROOTFD")
   beneath ROOTFD.  FLAGS are open(2) flags; O_CLOEXEC and O_NOFOLLOW are
   always added.  */
int esbx_open_beneath (int rootfd, const char *path, int flags, mode_t mode, esbx_error_t *err);

/* Open the parent directory of PATH beneath ROOTFD and return its fd; *base
   receives the last component (owned).  PATH must name something other than
   the root itself.  */
int esbx_open_parent_beneath (int rootfd, const char *path, char **base, esbx_error_t *err);

/* Open PATH beneath ROOTFD for reading, only if it is a regular file: the
   resolution of esbx_open_beneath, the type rule of esbx_open_regular_at
   (fs.h).  Never blocks on a FIFO swapped in for the file, never opens a
   device.  */
int esbx_open_regular_beneath (int rootfd, const char *path, esbx_error_t *err);

/* Normalise a path from a request or an archive: strips leading and
   repeated '/', refuses "..", empty results unless allow_root.  Returns a
   relative path ("" for the root).  */
int esbx_clean_relpath (const char *path, bool allow_root, char **out, esbx_error_t *err);

/* Tests only: make esbx_open_beneath use the openat walk.  */
void esbx_path_force_fallback (bool on);

#endif
