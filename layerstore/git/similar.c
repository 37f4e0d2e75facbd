/* Similarity of two contents for rename detection: libgit2's hashsig.  */
#include "git.h"

#include <git2.h>
#include <git2/sys/hashsig.h>

int
esbx_similar_new (const char *buf, size_t len, struct esbx_similar **out, esbx_error_t *err)
{
  git_hashsig *sig = NULL;

  *out = NULL;
  if (esbx_git_load (err) < 0)
    return -1;
  if (git_hashsig_create (&sig, buf, len,
                          GIT_HASHSIG_SMART_WHITESPACE | GIT_HASHSIG_ALLOW_SMALL_FILES)
      < 0)
    return esbx_make_error (err, 0, "similarity signature: %s", esbx_git_error ());
  *out = (struct esbx_similar *)sig;
  return 0;
}

int
esbx_similar_score (const struct esbx_similar *a, const struct esbx_similar *b)
{
  int score = git_hashsig_compare ((const git_hashsig *)a, (const git_hashsig *)b);

  return score < 0 ? 0 : score;
}

void
esbx_similar_free (struct esbx_similar *s)
{
  if (s)
    git_hashsig_free ((git_hashsig *)s);
}
