/* esbx fsck: every layer of a stack checked against its record.  */
#include "internal.h"
#include "fs.h"
#include "hash.h"
#include "path.h"
#include "text.h"
#include "utils.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

struct fsck
{
  FILE *report;
  const char *project;
  const char *layer;
  size_t problems;
};

static void
problem (struct fsck *f, const char *path, const char *what)
{
  fprintf (f->report, "%s: layer %s: %s: %s\n", f->project, f->layer, path, what);
  f->problems++;
}

/* A later name of a hard link (ST) is the same file as the first one.  */
static void
check_link (struct fsck *f, int diff, const struct esbx_change *c, const struct stat *st)
{
  _cleanup_free_ char *base = NULL;
  _cleanup_free_ char *what = NULL;
  _cleanup_close_ int pfd = -1;
  esbx_error_t e = NULL;
  struct stat lst;

  pfd = esbx_open_parent_beneath (diff, c->link + 1, &base, &e);
  if (pfd >= 0 && fstatat (pfd, base, &lst, AT_SYMLINK_NOFOLLOW) == 0 && lst.st_dev == st->st_dev
      && lst.st_ino == st->st_ino)
    return;
  esbx_error_free (&e);
  what = xasprintf ("not the same file as %s", c->link);
  problem (f, c->path, what);
}

static void
check_change (struct fsck *f, int diff, const struct esbx_change *c)
{
  const char *rel = c->path + 1;
  struct stat st;
  _cleanup_close_ int pfd = -1;
  _cleanup_free_ char *base = NULL;
  esbx_error_t e = NULL;

  pfd = esbx_open_parent_beneath (diff, rel, &base, &e);
  if (pfd < 0 || fstatat (pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
    {
      esbx_error_free (&e);
      problem (f, c->path, "missing from the layer");
      return;
    }
  if (c->kind == ESBX_DELETED)
    {
      if (!esbx_is_whiteout (&st))
        problem (f, c->path, "recorded as deleted but not a whiteout");
      return;
    }
  switch (c->type)
    {
    case ESBX_TYPE_FILE:
      {
        char sha[65];
        off_t size;
        _cleanup_close_ int fd = -1;

        if (!S_ISREG (st.st_mode))
          {
            problem (f, c->path, "not a regular file");
            return;
          }
        fd = esbx_open_regular_at (pfd, base, &e);
        if (fd < 0 || esbx_sha256_fd (fd, sha, &size, &e) < 0)
          {
            esbx_error_free (&e);
            problem (f, c->path, "unreadable");
            return;
          }
        if (size != c->size || strcmp (sha, c->sha256) != 0)
          problem (f, c->path, "content differs from the record");
        if (c->link)
          check_link (f, diff, c, &st);
        break;
      }
    case ESBX_TYPE_DIR:
      if (!S_ISDIR (st.st_mode))
        problem (f, c->path, "not a directory");
      break;
    case ESBX_TYPE_SYMLINK:
      {
        char buf[4097];
        ssize_t l = readlinkat (pfd, base, buf, sizeof buf - 1);
        if (l < 0 || !c->target || (size_t)l != strlen (c->target)
            || memcmp (buf, c->target, (size_t)l) != 0)
          problem (f, c->path, "symlink target differs from the record");
        return;
      }
    case ESBX_TYPE_FIFO:
      if (!S_ISFIFO (st.st_mode))
        problem (f, c->path, "not a fifo");
      break;
    case ESBX_TYPE_NONE:
      problem (f, c->path, "unknown type in the record");
      return;
    }
  if ((st.st_mode & 07777) != c->mode)
    problem (f, c->path, "mode differs from the record");
}

/* Everything in the diff is a recorded change or a directory above one.
   Deep trees: *DFD may be given back while the walk is below it
   (esbx_dir_release); a walk that cannot go on is a problem, not an
   error.  */
static void
check_extra (struct fsck *f, int *dfd, const char *rel, size_t depth, const struct esbx_layer *l)
{
  esbx_error_t e = NULL;
  _cleanup_strv_ char **names = esbx_list_dir_at (*dfd, ".", &e);
  size_t i;

  if (names == NULL)
    {
      esbx_error_free (&e);
      problem (f, rel[0] ? rel : "/", "unreadable directory");
      return;
    }
  for (i = 0; names[i] && *dfd >= 0; i++)
    {
      _cleanup_free_ char *path = xasprintf ("%s/%s", rel, names[i]);
      _cleanup_free_ char *prefix = xasprintf ("%s/", path);
      struct stat st;
      bool recorded = esbx_changeset_find (&l->changes, path) != NULL;
      bool parent = false;
      size_t k;

      if (!recorded)
        for (k = 0; k < l->changes.n && !parent; k++)
          parent = esbx_has_prefix (l->changes.v[k].path, prefix);
      if (!recorded && !parent)
        problem (f, path, "not in the record");
      if (fstatat (*dfd, names[i], &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR (st.st_mode))
        {
          _cleanup_close_ int sub = esbx_open_dir_at (*dfd, names[i], &e);
          struct esbx_held_dir held;

          if (sub < 0 || esbx_dir_release (dfd, depth, &held, &e) < 0)
            {
              esbx_error_free (&e);
              problem (f, path, "unreadable directory");
              continue;
            }
          check_extra (f, &sub, path, depth + 1, l);
          if (sub < 0 || esbx_dir_retake (dfd, sub, &held, &e) < 0)
            {
              esbx_error_free (&e);
              problem (f, rel[0] ? rel : "/", "moved while being checked");
            }
        }
    }
}

static int
fsck_project (esbx_store_t *store, const char *project, FILE *report, size_t *problems,
              esbx_error_t *err)
{
  _cleanup_strv_ char **ids = NULL;
  size_t n, i, k;
  const char *parent = NULL;
  struct fsck f = { .report = report, .project = project };

  if (esbx_project_stack (store, project, &ids, &n, err) < 0)
    return -1;
  for (i = 0; i < n; i++)
    {
      struct esbx_layer *l = NULL;
      _cleanup_free_ char *diff = esbx_layer_diff_path (store, project, ids[i]);
      _cleanup_close_ int dfd = -1;
      esbx_error_t e = NULL;

      f.layer = ids[i];
      if (esbx_layer_load (store, project, ids[i], &l, &e) < 0)
        {
          problem (&f, "record.json", e->msg);
          esbx_error_free (&e);
          continue;
        }
      if ((parent == NULL) != (l->parent == NULL) || (parent && strcmp (parent, l->parent) != 0)
          || l->index != (int64_t)i)
        problem (&f, "record.json", "parent or index does not match the stack");
      parent = ids[i];
      dfd = esbx_open_dir_at (AT_FDCWD, diff, &e);
      if (dfd < 0)
        {
          problem (&f, "diff", e->msg);
          esbx_error_free (&e);
          esbx_layer_free (l);
          continue;
        }
      for (k = 0; k < l->changes.n; k++)
        check_change (&f, dfd, &l->changes.v[k]);
      check_extra (&f, &dfd, "", 0, l);
      esbx_layer_free (l);
    }
  *problems += f.problems;
  return 0;
}

int
esbx_fsck (esbx_store_t *store, const char *project, FILE *report, esbx_error_t *err)
{
  _cleanup_strv_ char **projects = NULL;
  size_t problems = 0, i;

  if (project)
    {
      if (fsck_project (store, project, report, &problems, err) < 0)
        return -1;
    }
  else
    {
      projects = esbx_project_list (store, err);
      if (projects == NULL)
        return -1;
      for (i = 0; projects[i]; i++)
        if (fsck_project (store, projects[i], report, &problems, err) < 0)
          return -1;
    }
  if (problems)
    return esbx_make_error (err, 0, "fsck: %zu problem%s found", problems,
                            problems == 1 ? "" : "s");
  return 0;
}
