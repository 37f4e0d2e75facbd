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
#include "layerstore.h"

#include <stddef.h>

/* Load and initialise libgit2 if it is not yet loaded; thread-safe.  A
   missing library is a one-line error naming the package.  */
int esbx_git_load (esbx_error_t *err);

/* The message of libgit2's last error in this thread, or "unknown".  */
const char *esbx_git_error (void);

/* Write the tree of REF (NULL: HEAD) of the repository SPEC (a local path,
   or a URL libgit2 fetches into the empty directory TMP) into the layer
   directory DIFFD, with the layer's `.git` (git_repo.c); *COMMIT gets the
   commit's id.  */
int esbx_git_import (const char *spec, const char *ref, const char *tmp, int diffd, char **commit,
                     esbx_error_t *err);

/* Write ROOT/projects/P/git again for the head (git_project.c); a failure
   is only warned about: the project stands without it.  */
void esbx_git_project_dir_update (esbx_store_t *store, const char *project);
/* Who a git project's layer is by and what it says (publish.c): the
   session's commits since its base or last publish decide; HEAD is the
   commit the session is at, NULL when it made none.  */
struct esbx_git_identity
{
  char *author;
  char *email;
  char *message;
  char *head;
};
struct esbx_publish;
int esbx_publish_git_identity (struct esbx_publish *p, struct esbx_git_identity *id,
                               esbx_error_t *err);
void esbx_git_identity_clear (struct esbx_git_identity *id);
/* A session's RECORD once its layer landed at its commit HEAD (NULL: the
   session made none): its next publish takes only later commits.  */
void esbx_git_session_landed (json_t *record, const char *head);

/* The git commit of layer ID of PROJECT.  */
int esbx_git_layer_commit (esbx_store_t *store, const char *project, const char *id, char **commit,
                           esbx_error_t *err);

/* The branch a session's repository starts on: the session's name, made
   a valid ref name where it is not (`..`, a trailing `.` or `.lock`).  */
char *esbx_git_branch_of (const char *session);
/* Give a new session's upper directory UPPERFD its own `.git/HEAD`, on its
   branch at COMMIT (git_session.c).  */
int esbx_git_session_init (int upperfd, const char *session, const char *commit, esbx_error_t *err);
/* The branch a session's HEAD is on (NULL: detached) and the commit it
   names (NULL: none), read as the session sees its `.git`: from its upper
   directory UPPERFD (-1: none) over the frozen layers LOWERS (paths,
   bottom up), regular files beneath each `.git` only; -1 when HEAD is not
   git's.  */
int esbx_git_session_head (int upperfd, char *const *lowers, size_t n_lowers, char **branch,
                           char **commit);
/* What a session's own commits since BASE_COMMIT say: the newest one's
   author, every message (oldest first, a blank line between).  */
struct esbx_git_log
{
  char *head;      /* the commit the session's HEAD names, or NULL */
  char *head_tree; /* and its tree, when the layers or the session hold it */
  size_t n_commits;
  char *author_name;
  char *author_email;
  char *messages;
};
int esbx_git_session_log (esbx_store_t *store, const struct esbx_session *s, int upperfd,
                          const char *base_commit, struct esbx_git_log *out, esbx_error_t *err);
void esbx_git_log_free (struct esbx_git_log *g);
/* After a rebase (the session unmounted): the branch HEAD names is at
   COMMIT; unless KEEP_INDEX, the session's index is the layers' (its work
   shows as changes against the new head, as after `git reset`).  */
int esbx_git_session_rebase (int upperfd, const char *commit, bool keep_index, esbx_error_t *err);

/* Make the commit of the staged layer L (named, on HEAD of PROJECT):
   blobs of its files, trees, the commit with AUTHOR/EMAIL and MESSAGE (the
   trailers Esbx-Layer and Esbx-Session added), a pack of what is new and
   the index of the new tree, in the staged layer's `.git` (git_layer.c);
   L->git_commit gets the commit's id.  */
int esbx_git_layer_make (esbx_store_t *store, const char *project, const char *staged_rel,
                         struct esbx_layer *l, const char *head, const char *author,
                         const char *email, const char *message, esbx_error_t *err);

/* The tree id of BASE's commit with the changes CS, their files read
   beneath SRCFD (nothing is kept).  */
int esbx_git_tree_of (esbx_store_t *store, const char *project, const char *base, int srcfd,
                      const struct esbx_changeset *cs, char tree_hex[41], esbx_error_t *err);
/* A commit of a session on top of HEAD's commit: HEAD's tree with the
   session's changes CS (from its upper UPPERFD), its objects and index in
   the session's own .git (the branch is the caller's to move).  */
int esbx_git_session_commit (esbx_store_t *store, const char *project, const char *head,
                             int upperfd, const struct esbx_changeset *cs, const char *author,
                             const char *email, const char *message, char commit_hex[41],
                             esbx_error_t *err);

/* The paths a git session's index tracks (git_tracked.c): BASE is its
   base's view, UPPERFD its upper directory.  */
struct esbx_stack;
struct esbx_git_tracked;
struct esbx_git_tracked *esbx_git_tracked_open (struct esbx_stack *base, int upperfd);
/* Is REL ("a/b") tracked, or (BELOW) anything beneath it?  */
bool esbx_git_tracked_has (struct esbx_git_tracked *t, const char *rel, bool below);
void esbx_git_tracked_free (struct esbx_git_tracked *t);

/* How similar two contents are, 0 to 100, with libgit2's similarity
   signatures (the measure git's rename detection uses, whitespace at line
   ends ignored): the signature of one content is made once and compared
   with many.  */
struct esbx_similar;
int esbx_similar_new (const char *buf, size_t len, struct esbx_similar **out, esbx_error_t *err);
int esbx_similar_score (const struct esbx_similar *a, const struct esbx_similar *b);
void esbx_similar_free (struct esbx_similar *s);

#endif
