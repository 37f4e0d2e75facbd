/* esbx rebase: three-way merges of the text files a session and upstream
 * both changed since the session's base.  The line merge is `diff3 -m -E`
 * from diffutils (Essential on Debian), fed descriptors opened beneath the
 * session's upper directory and the layers, so it never resolves a path of
 * the session itself: the base is the path in the session's base, "theirs"
 * the path at the head, "ours" the session's file.  -E takes a change both
 * sides made alike once and brackets only overlapping hunks, with git's
 * markers (`<<<<<<< session S`, `=======`, `>>>>>>> head LAYER`).
 *
 * Binary files, deletions, symlinks and anything that is not a regular
 * text file of at most MERGE_MAX_BYTES on every side stay path-level
 * conflicts: rebase then changes nothing.
 *
 * The results are written beside the session's directory entries
 * (sessions/S/merge.N) while the session is mounted, and moved into its
 * upper directory by esbx_merges_apply once it is unmounted.  */
#include "internal.h"
#include "fs.h"
#include "path.h"
#include "utils.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define MERGE_MAX_BYTES (64 * 1024 * 1024)
#define CONFLICT_MARKER "<<<<<<< "

void
esbx_merges_free (struct esbx_merges *m, int sdfd)
{
  size_t i;

  for (i = 0; i < m->n; i++)
    {
      if (m->v[i].tmp && sdfd >= 0)
        unlinkat (sdfd, m->v[i].tmp, 0);
      free (m->v[i].tmp);
      free (m->v[i].path);
    }
  free (m->v);
  memset (m, 0, sizeof *m);
}

/* A regular file of at most MERGE_MAX_BYTES with no NUL byte in its first
   8 KiB (git's and diff's test for text).  */
static bool
mergeable_fd (int fd)
{
  char buf[8192];
  struct stat st;
  ssize_t r;

  if (fstat (fd, &st) < 0 || !S_ISREG (st.st_mode) || st.st_size > MERGE_MAX_BYTES)
    return false;
  r = pread (fd, buf, sizeof buf, 0);
  return r >= 0 && memchr (buf, '\0', (size_t)r) == NULL;
}

/* REL's file in STACK: 0 and *FD (-1 when the view has no REL), or -1
   when what is there cannot be merged.  */
static int
open_in_stack (struct esbx_stack *stack, const char *rel, int *fd)
{
  struct stat st;
  size_t layer;

  *fd = -1;
  if (esbx_stack_lookup (stack, rel, &layer, &st) != 1)
    return 0;
  if (!S_ISREG (st.st_mode))
    return -1;
  *fd = esbx_open_regular_beneath (stack->fds[layer], rel, NULL);
  return *fd >= 0 && mergeable_fd (*fd) ? 0 : -1;
}

static void
keep_across_exec (int fd)
{
  if (fd >= 0)
    fcntl (fd, F_SETFD, 0);
}

static char *
fd_path (int fd)
{
  return fd >= 0 ? xasprintf ("/dev/fd/%d", fd) : xstrdup ("/dev/null");
}

/* diff3 into OUTFD; *MARKERS when hunks overlapped.  */
static int
run_diff3 (int ours, int base, int theirs, int outfd, const char *const labels[3], bool *markers,
           esbx_error_t *err)
{
  _cleanup_free_ char *p_ours = fd_path (ours), *p_base = fd_path (base);
  _cleanup_free_ char *p_theirs = fd_path (theirs);
  int status;
  pid_t pid;

  pid = fork ();
  if (pid < 0)
    return esbx_make_error (err, errno, "fork");
  if (pid == 0)
    {
      keep_across_exec (ours);
      keep_across_exec (base);
      keep_across_exec (theirs);
      if (dup2 (outfd, STDOUT_FILENO) < 0)
        _exit (127);
      execlp ("diff3", "diff3", "-m", "-E", "-L", labels[0], "-L", labels[1], "-L", labels[2],
              p_ours, p_base, p_theirs, (char *)NULL);
      _exit (127);
    }
  if (TEMP_FAILURE_RETRY (waitpid (pid, &status, 0)) < 0)
    return esbx_make_error (err, errno, "waitpid");
  if (!WIFEXITED (status) || WEXITSTATUS (status) > 1)
    return esbx_make_error (err, 0, "diff3(1) failed (status %d)",
                            WIFEXITED (status) ? WEXITSTATUS (status) : -1);
  *markers = WEXITSTATUS (status) == 1;
  return 0;
}

/* Merge the conflict at PATH into sessions/S/merge.N.  1: not mergeable.  */
static int
merge_one (const char *path, int ufd, struct esbx_stack *base, struct esbx_stack *head, int sdfd,
           const char *const labels[3], struct esbx_merge *out, esbx_error_t *err)
{
  _cleanup_close_ int ours = -1, old = -1, theirs = -1, outfd = -1;
  struct stat st;

  ours = esbx_open_regular_beneath (ufd, path + 1, NULL);
  if (ours < 0 || !mergeable_fd (ours))
    return 1;
  if (open_in_stack (base, path + 1, &old) < 0 || open_in_stack (head, path + 1, &theirs) < 0
      || theirs < 0)
    return 1;
  unlinkat (sdfd, out->tmp, 0);
  outfd = TEMP_FAILURE_RETRY (
      openat (sdfd, out->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (outfd < 0)
    return esbx_make_error (err, errno, "merge `%s`: create `%s`", path, out->tmp);
  if (run_diff3 (ours, old, theirs, outfd, labels, &out->markers, err) < 0)
    return esbx_error_wrap (err, "merge `%s`", path);
  if (fstat (ours, &st) < 0 || fchmod (outfd, st.st_mode & 07777) < 0)
    return esbx_make_error (err, errno, "merge `%s`: mode", path);
  return 0;
}

int
esbx_merges_prepare (esbx_store_t *store, const struct esbx_session *s, int sdfd, int ufd,
                     const char *head_id, const struct esbx_publish_result *r,
                     struct esbx_merges *m, esbx_error_t *err)
{
  _cleanup_free_ char *l_ours = xasprintf ("session %s", s->name);
  _cleanup_free_ char *l_base = xasprintf ("base %.12s", s->base);
  _cleanup_free_ char *l_head = xasprintf ("head %.12s", head_id);
  const char *const labels[3] = { l_ours, l_base, l_head };
  struct esbx_stack base = { 0 }, head = { 0 };
  size_t i;
  int ret = -1, r1;

  memset (m, 0, sizeof *m);
  if (esbx_stack_open (store, s->project, s->base, NULL, &base, err) < 0)
    return -1;
  if (esbx_stack_open (store, s->project, head_id, NULL, &head, err) < 0)
    goto out;
  m->v = xmalloc0 (r->n_conflicts * sizeof *m->v);
  for (i = 0; i < r->n_conflicts; i++)
    {
      struct esbx_merge *one = &m->v[m->n++];

      one->path = xstrdup (r->conflicts[i].path);
      one->tmp = xasprintf ("merge.%zu", i);
      r1 = merge_one (one->path, ufd, &base, &head, sdfd, labels, one, err);
      if (r1 < 0)
        goto out;
      if (r1 > 0)
        {
          ret = 1;
          goto out;
        }
    }
  ret = 0;
out:
  if (ret != 0)
    esbx_merges_free (m, sdfd);
  esbx_stack_close (&base);
  esbx_stack_close (&head);
  return ret;
}

int
esbx_merges_apply (int sdfd, int ufd, struct esbx_merges *m, esbx_error_t *err)
{
  size_t i;

  for (i = 0; i < m->n; i++)
    {
      _cleanup_free_ char *base = NULL;
      _cleanup_close_ int pfd = esbx_open_parent_beneath (ufd, m->v[i].path + 1, &base, err);

      if (pfd < 0)
        return -1;
      if (renameat (sdfd, m->v[i].tmp, pfd, base) < 0)
        return esbx_make_error (err, errno, "merge `%s`: move the result into the session",
                                m->v[i].path);
      free (m->v[i].tmp);
      m->v[i].tmp = NULL;
    }
  return 0;
}

int
esbx_has_conflict_markers (int ufd, const char *path)
{
  _cleanup_close_ int fd = esbx_open_regular_beneath (ufd, path + 1, NULL);
  _cleanup_file_ FILE *f = NULL;
  _cleanup_free_ char *line = NULL;
  size_t cap = 0;

  if (fd < 0)
    return 0;
  f = fdopen (fd, "r");
  if (f == NULL)
    return 0;
  fd = -1;
  while (getline (&line, &cap, f) >= 0)
    if (strncmp (line, CONFLICT_MARKER, strlen (CONFLICT_MARKER)) == 0)
      return 1;
  return 0;
}
