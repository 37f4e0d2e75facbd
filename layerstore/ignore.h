/* Ignore rules of a tree (ignore.c): git's .gitignore semantics, plus the
   tree root's .esbxignore below every .gitignore in precedence (as git's
   info/exclude is).  A walk enters a directory with esbx_ignore_enter
   (which reads the merged view's .gitignore there) and leaves it with
   esbx_ignore_leave; a path is then matched against the rules of its
   directory and of every directory above it, deepest first, the last
   matching line of a file deciding.  A path below an ignored directory is
   ignored without asking (git never looks inside one): the walk handles
   that.  */
#ifndef ESBX_LAYERSTORE_IGNORE_H
#define ESBX_LAYERSTORE_IGNORE_H

#include "internal.h"

#include <stdbool.h>
#include <stddef.h>

#define ESBX_IGNORE_FILE         ".gitignore"
#define ESBX_IGNORE_PROJECT_FILE ".esbxignore"
/* Bigger ignore files are skipped with a warning.  */
#define ESBX_IGNORE_MAX_SIZE (4u << 20)

struct esbx_ignore;

struct esbx_ignore *esbx_ignore_new (void);
void esbx_ignore_free (struct esbx_ignore *ig);

/* Add the rules of TEXT (a .gitignore's content) for directory DIR ("" for
   the root, "a/b" below it) as the deepest level.  */
void esbx_ignore_push (struct esbx_ignore *ig, const char *dir, const char *text, size_t len);
/* The same for the lowest-precedence level (.esbxignore), relative to the
   root.  */
void esbx_ignore_push_project (struct esbx_ignore *ig, const char *text, size_t len);
/* Drop the deepest level.  */
void esbx_ignore_pop (struct esbx_ignore *ig);

/* REL ("a/b/c.o", relative to the root, inside the deepest level's
   directory) is ignored by the rules; IS_DIR says whether it is a
   directory (patterns ending in `/` match only those).  */
bool esbx_ignore_match (const struct esbx_ignore *ig, const char *rel, bool is_dir);

/* git's wildmatch semantics: PATHNAME makes `*`, `?` and brackets stop at
   `/` and gives `**` its meaning.  Exposed for the unit tests.  */
bool esbx_wildmatch (const char *pattern, const char *text, bool pathname);

/* Push the rules of directory REL of a session's merged view: its
   .gitignore in the upper directory DIRFD (a whiteout or a non-regular file
   there means none), else the base's when the upper directory is not
   OPAQUE.  At the root (REL "") the .esbxignore is read the same way
   first.  */
int esbx_ignore_enter (struct esbx_ignore *ig, struct esbx_stack *base, int dirfd, bool opaque,
                       const char *rel, const char *session, esbx_error_t *err);
void esbx_ignore_leave (struct esbx_ignore *ig);

#endif
