/* What a git session's index tracks: a path git tracks is never left out
   by an ignore rule (git ignores untracked files only), so the scan asks
   here before it drops a change the rules match.  The index is the
   session's own (`.git/index` in its upper directory) or, until git wrote
   one, its layers'; it is opened as a regular file beneath its directory,
   never by a path of the session's making, and read once a scan, on the
   first path a rule matches.  */
#include "internal.h"
#include "git.h"
#include "git_repo.h"
#include "path.h"
#include "utils.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

struct esbx_git_tracked
{
  git_index *index; /* NULL: none could be read (nothing is tracked) */
};

struct esbx_git_tracked *
esbx_git_tracked_open (struct esbx_stack *base, int upperfd)
{
  struct esbx_git_tracked *t = xmalloc0 (sizeof *t);
  _cleanup_close_ int fd = -1;
  _cleanup_free_ char *path = NULL;
  esbx_error_t ignored = NULL;
  struct stat st;
  size_t layer;

  fd = esbx_open_regular_beneath (upperfd, ".git/index", NULL);
  if (fd < 0 && esbx_stack_lookup (base, ".git/index", &layer, &st) == 1)
    fd = esbx_open_regular_beneath (base->fds[layer], ".git/index", NULL);
  if (fd < 0 || esbx_git_load (&ignored) < 0)
    {
      esbx_error_free (&ignored);
      return t;
    }
  path = esbx_git_fd_path (fd, NULL);
  if (git_index_open (&t->index, path) < 0)
    t->index = NULL;
  return t;
}

bool
esbx_git_tracked_has (struct esbx_git_tracked *t, const char *rel, bool below)
{
  _cleanup_free_ char *prefix = NULL;
  size_t at;

  if (t == NULL || t->index == NULL)
    return false;
  if (git_index_get_bypath (t->index, rel, 0))
    return true;
  if (!below)
    return false;
  prefix = xasprintf ("%s/", rel);
  return git_index_find_prefix (&at, t->index, prefix) == 0;
}

void
esbx_git_tracked_free (struct esbx_git_tracked *t)
{
  if (t == NULL)
    return;
  git_index_free (t->index);
  free (t);
}
