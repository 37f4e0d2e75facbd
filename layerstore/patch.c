/* esbx diff --patch: unified diffs of a session's text files.  The line
   diff itself is diff(1) from diffutils (Essential on Debian), fed file
   descriptors that were opened beneath the session and base roots, so it
   never resolves a path of the session itself.  The patch is streamed: one
   file at a time, each written to OUT as soon as it is made, nothing of it
   kept in memory.  A reader that goes away early (`| head`) ends it with
   an EPIPE error, which the caller may take as the quiet end it is.  */
#include "internal.h"
#include "fs.h"
#include "path.h"
#include "run.h"
#include "utils.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

static bool
is_text (int fd)
{
  char buf[8192];
  ssize_t r = pread (fd, buf, sizeof buf, 0);

  return r >= 0 && memchr (buf, '\0', (size_t)r) == NULL;
}

static int
run_diff (int oldfd, int newfd, const char *path, FILE *out, esbx_error_t *err)
{
  _cleanup_free_ char *a = xasprintf ("a%s", path);
  _cleanup_free_ char *b = xasprintf ("b%s", path);
  _cleanup_free_ char *oldp = oldfd >= 0 ? xasprintf ("/dev/fd/%d", oldfd) : xstrdup ("/dev/null");
  _cleanup_free_ char *newp = newfd >= 0 ? xasprintf ("/dev/fd/%d", newfd) : xstrdup ("/dev/null");
  char *argv[] = {
    "diff", "-u", "--label", oldfd >= 0 ? a : "/dev/null", "--label", newfd >= 0 ? b : "/dev/null",
    oldp,   newp, NULL
  };
  int keep[2], status;
  size_t n = 0;
  /* A reader that closed the pipe ends diff(1) quietly, even when esbx
     was started with SIGPIPE ignored.  */
  struct esbx_run r
      = { .argv = argv, .in = -1, .out = fileno (out), .err = -1, .netns = -1, .sigpipe = true };

  if (fflush (out) != 0)
    return esbx_make_error (err, errno, "diff `%s`: write", path);
  if (oldfd >= 0)
    keep[n++] = oldfd;
  if (newfd >= 0)
    keep[n++] = newfd;
  r.keep = keep;
  r.n_keep = n;
  if (esbx_run (&r, &status, err) < 0)
    return -1;
  if (WIFSIGNALED (status) && WTERMSIG (status) == SIGPIPE)
    return esbx_make_error (err, EPIPE, "diff `%s`: write", path);
  if (!WIFEXITED (status) || WEXITSTATUS (status) > 1)
    return esbx_make_error (err, 0, "diff `%s`: diff(1) failed", path);
  return 0;
}

int
esbx_session_patch (esbx_store_t *store, const char *name, FILE *out, esbx_error_t *err)
{
  struct esbx_session *s = NULL;
  struct esbx_changeset cs = { 0 };
  struct esbx_stack base;
  _cleanup_close_ int ufd = -1;
  struct esbx_progress *progress;
  size_t i;
  int ret = -1;

  if (esbx_session_load (store, name, &s, err) < 0)
    return -1;
  ufd = esbx_session_scan (store, s, &base, 0, &cs, NULL, NULL, err);
  if (ufd < 0)
    {
      esbx_session_free (s);
      return -1;
    }
  progress = esbx_progress_begin ("patch", "changes", cs.n);
  for (i = 0; i < cs.n; i++)
    {
      const struct esbx_change *c = &cs.v[i];
      _cleanup_close_ int oldfd = -1;
      _cleanup_close_ int newfd = -1;
      struct stat st;
      size_t layer;

      esbx_progress_add (progress, 0);
      if (c->type != ESBX_TYPE_FILE)
        continue;
      if (c->kind != ESBX_ADDED && esbx_stack_lookup (&base, c->path + 1, &layer, &st) == 1
          && S_ISREG (st.st_mode))
        {
          oldfd = esbx_open_regular_beneath (base.fds[layer], c->path + 1, err);
          if (oldfd < 0)
            goto out;
        }
      if (c->kind != ESBX_DELETED)
        {
          newfd = esbx_open_regular_beneath (ufd, c->path + 1, err);
          if (newfd < 0)
            goto out;
        }
      if ((oldfd >= 0 && !is_text (oldfd)) || (newfd >= 0 && !is_text (newfd)))
        {
          _cleanup_free_ char *a = oldfd >= 0 ? xasprintf ("a%s", c->path) : NULL;
          _cleanup_free_ char *b = newfd >= 0 ? xasprintf ("b%s", c->path) : NULL;

          fprintf (out, "Binary files %s and %s differ\n", a ? a : "/dev/null",
                   b ? b : "/dev/null");
          continue;
        }
      if (run_diff (oldfd, newfd, c->path, out, err) < 0)
        goto out;
    }
  if (fflush (out) != 0)
    {
      esbx_make_error (err, errno, "write");
      goto out;
    }
  esbx_progress_end (progress);
  ret = 0;
out:
  if (ret < 0)
    esbx_error_wrap (err, "diff `%s`", name);
  esbx_changeset_free (&cs);
  esbx_stack_close (&base);
  esbx_session_free (s);
  return ret;
}
