/* The git room of liblayerstore: what the core may call of it.
 *
 * libgit2 is loaded on first use, as libarchive is (archive_load.h): with
   what it pulls in (libssh2, http-parser, pcre, the TLS stack) it would
   cost every start of every binary, and only rebase's rename detection
   and git projects use it.  git_load.c defines each git_* function the
   store calls as a small function that forwards to the library, so the
   callers use libgit2's API as documented; a new call needs one line in
   its list.  */
#ifndef ESBX_GIT_H
#define ESBX_GIT_H

#include "error.h"

#include <stddef.h>

/* Load and initialise libgit2 if it is not yet loaded; thread-safe.  A
   missing library is a one-line error naming the package.  */
int esbx_git_load (esbx_error_t *err);

/* The message of libgit2's last error in this thread, or "unknown".  */
const char *esbx_git_error (void);

/* How similar two contents are, 0 to 100, with libgit2's similarity
   signatures (the measure git's rename detection uses, whitespace at line
   ends ignored): the signature of one content is made once and compared
   with many.  */
struct esbx_similar;
int esbx_similar_new (const char *buf, size_t len, struct esbx_similar **out, esbx_error_t *err);
int esbx_similar_score (const struct esbx_similar *a, const struct esbx_similar *b);
void esbx_similar_free (struct esbx_similar *s);

#endif
