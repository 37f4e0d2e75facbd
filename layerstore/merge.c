/* Three-way merges of text files for rebase (rebase.c decides what is
 * merged).  The line merge is `diff3 -m -E` from diffutils (Essential on
 * Debian), fed descriptors opened beneath the session's upper directory and
 * the layers, so it never resolves a path of the session itself.  -E takes
 * a change both sides made alike once and brackets only overlapping hunks,
 * with git's markers (`<<<<<<< session S`, `=======`, `>>>>>>> head
 * LAYER`).  */
#include "internal.h"
#include "fs.h"
#include "path.h"
#include "run.h"
#include "utils.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

/* A regular file of at most ESBX_MERGE_MAX_BYTES with no NUL byte in its first
   8 KiB (git's and diff's test for text).  */
bool
esbx_mergeable_fd (int fd)
{
  char buf[8192];
  struct stat st;
  ssize_t r;

  if (fstat (fd, &st) < 0 || !S_ISREG (st.st_mode) || st.st_size > ESBX_MERGE_MAX_BYTES)
    return false;
  r = pread (fd, buf, sizeof buf, 0);
  return r >= 0 && memchr (buf, '\0', (size_t)r) == NULL;
}

static char *
fd_path (int fd)
{
  return fd >= 0 ? xasprintf ("/dev/fd/%d", fd) : xstrdup ("/dev/null");
}

int
esbx_merge_text (int ours, int base, int theirs, int outfd, const char *const labels[3],
                 bool *markers, esbx_error_t *err)
{
  _cleanup_free_ char *p_ours = fd_path (ours), *p_base = fd_path (base);
  _cleanup_free_ char *p_theirs = fd_path (theirs);
  char *argv[] = { "diff3",
                   "-m",
                   "-E",
                   "-L",
                   (char *)labels[0],
                   "-L",
                   (char *)labels[1],
                   "-L",
                   (char *)labels[2],
                   p_ours,
                   p_base,
                   p_theirs,
                   NULL };
  int keep[3], status;
  size_t n = 0;
  struct esbx_run r = { .argv = argv, .in = -1, .out = outfd, .err = -1, .netns = -1 };

  if (ours >= 0)
    keep[n++] = ours;
  if (base >= 0)
    keep[n++] = base;
  if (theirs >= 0)
    keep[n++] = theirs;
  r.keep = keep;
  r.n_keep = n;
  if (esbx_run (&r, &status, err) < 0)
    return -1;
  if (!WIFEXITED (status) || WEXITSTATUS (status) > 1)
    return esbx_make_error (err, 0, "diff3(1) failed (status %d)",
                            WIFEXITED (status) ? WEXITSTATUS (status) : -1);
  *markers = WEXITSTATUS (status) == 1;
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
    if (strncmp (line, "<<<<<<< ", 8) == 0 || strncmp (line, ">>>>>>> ", 8) == 0)
      return 1;
  return 0;
}
