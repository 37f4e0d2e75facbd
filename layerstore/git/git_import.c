/* The first layer of a git project: a commit's tree written from the
 * object database (no checkout), and beside it, in the layer's own
 * `.git`, what every session's repository shares (git_repo.c says how).
 *
 * The tree is written beneath the layer's directory fd, entry by entry, as
 * git would check it out: blobs as files of mode 0644 or 0755, symlinks,
 * directories (git has no empty ones), submodules (gitlinks) as empty
 * directories with a warning.  Names git itself refuses to check out (`.`,
 * `..`, `.git`), names esbx refuses in any tree (control characters, not
 * UTF-8, `.wh.` whiteouts) and paths over 4,095 bytes stop the import
 * with one line naming the path.  Nothing is written outside the layer:
 * every entry is made by this code beneath the fd of its parent, never
 * through a path that could cross a symlink.  */
#include "internal.h"
#include "git.h"
#include "git_repo.h"
#include "fs.h"
#include "log.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <git2.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_PATH_BYTES 4095

/* An error of libgit2's, its message after FMT's one argument.  */
#define git_fail(err, fmt, arg) esbx_make_error (err, 0, fmt, arg, esbx_git_error ())

/* Refuse NAME (an entry of the tree at REL) unless a checkout may write it.  */
int
esbx_git_check_name (const char *rel, const char *name, esbx_error_t *err)
{
  _cleanup_free_ char *path = rel[0] ? xasprintf ("%s/%s", rel, name) : xstrdup (name);
  _cleanup_free_ char *shown = esbx_quote_path (path);

  if (strcmp (name, ".") == 0 || strcmp (name, "..") == 0 || strcasecmp (name, ".git") == 0)
    return esbx_make_error (err, 0, "tree entry `/%s`: git does not check such a name out", shown);
  if (strlen (path) > MAX_PATH_BYTES)
    return esbx_make_error (err, 0, "tree entry `/%.64s...`: path longer than 4,095 bytes", shown);
  return esbx_check_entry_name ("import", path, name, err);
}

static int
write_blob (struct esbx_git_checkout *im, const git_tree_entry *e, int dirfd, const char *name,
            mode_t mode, const char *rel, esbx_error_t *err)
{
  git_blob *blob = NULL;
  _cleanup_close_ int fd = -1;
  int ret = -1;

  if (git_blob_lookup (&blob, im->repo, git_tree_entry_id (e)) < 0)
    return git_fail (err, "blob of `/%s`: %s", rel);
  fd = TEMP_FAILURE_RETRY (
      openat (dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
  if (fd < 0)
    esbx_make_error (err, errno, "create `/%s`", rel);
  else if (esbx_write_all (fd, git_blob_rawcontent (blob), (size_t)git_blob_rawsize (blob)) < 0)
    esbx_make_error (err, errno, "write `/%s`", rel);
  else if (fchmod (fd, mode) < 0)
    esbx_make_error (err, errno, "chmod `/%s`", rel);
  else
    ret = 0;
  git_blob_free (blob);
  return ret;
}

static int
write_link (struct esbx_git_checkout *im, const git_tree_entry *e, int dirfd, const char *name,
            const char *rel, esbx_error_t *err)
{
  git_blob *blob = NULL;
  _cleanup_free_ char *target = NULL;
  size_t len;
  int ret = -1;

  if (git_blob_lookup (&blob, im->repo, git_tree_entry_id (e)) < 0)
    return git_fail (err, "symlink `/%s`: %s", rel);
  len = (size_t)git_blob_rawsize (blob);
  if (len == 0 || len > MAX_PATH_BYTES || memchr (git_blob_rawcontent (blob), '\0', len))
    esbx_make_error (err, 0, "symlink `/%s`: its target is empty, too long or holds a NUL byte",
                     rel);
  else
    {
      target = xstrndup (git_blob_rawcontent (blob), len);
      if (symlinkat (target, dirfd, name) < 0)
        esbx_make_error (err, errno, "symlink `/%s`", rel);
      else
        ret = 0;
    }
  git_blob_free (blob);
  return ret;
}

static int write_tree (struct esbx_git_checkout *im, const git_tree *tree, int dirfd,
                       const char *rel, esbx_error_t *err);

int
esbx_git_checkout_entry (struct esbx_git_checkout *im, const git_tree_entry *e, int dirfd,
                         const char *rel, esbx_error_t *err)
{
  const char *name = git_tree_entry_name (e);
  _cleanup_free_ char *path = rel[0] ? xasprintf ("%s/%s", rel, name) : xstrdup (name);
  git_filemode_t mode = git_tree_entry_filemode (e);

  if (esbx_git_check_name (rel, name, err) < 0)
    return -1;
  switch (mode)
    {
    case GIT_FILEMODE_BLOB:
    case GIT_FILEMODE_BLOB_EXECUTABLE:
      return write_blob (im, e, dirfd, name, mode == GIT_FILEMODE_BLOB ? 0644 : 0755, path, err);
    case GIT_FILEMODE_LINK:
      return write_link (im, e, dirfd, name, path, err);
    case GIT_FILEMODE_COMMIT:
      if (mkdirat (dirfd, name, 0755) < 0)
        return esbx_make_error (err, errno, "mkdir `/%s`", path);
      strv_push (&im->gitlinks, xasprintf ("/%s", path));
      return 0;
    case GIT_FILEMODE_TREE:
      {
        git_tree *sub = NULL;
        _cleanup_close_ int subfd = -1;
        int r;

        if (mkdirat (dirfd, name, 0755) < 0)
          return esbx_make_error (err, errno, "mkdir `/%s`", path);
        subfd = TEMP_FAILURE_RETRY (
            openat (dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (subfd < 0)
          return esbx_make_error (err, errno, "open `/%s`", path);
        if (git_tree_lookup (&sub, im->repo, git_tree_entry_id (e)) < 0)
          return git_fail (err, "tree `/%s`: %s", path);
        r = write_tree (im, sub, subfd, path, err);
        git_tree_free (sub);
        return r;
      }
    default:
      return esbx_make_error (err, 0, "tree entry `/%s`: unknown mode %o", path, (unsigned)mode);
    }
}

static int
write_tree (struct esbx_git_checkout *im, const git_tree *tree, int dirfd, const char *rel,
            esbx_error_t *err)
{
  size_t i, n = git_tree_entrycount (tree);

  for (i = 0; i < n; i++)
    if (esbx_git_checkout_entry (im, git_tree_entry_byindex (tree, i), dirfd, rel, err) < 0)
      return -1;
  return 0;
}

/* A URL for libgit2's transports, or a local path?  */
static bool
is_url (const char *spec)
{
  return strstr (spec, "://") != NULL;
}

/* Open SPEC: a local repository (a work tree or a bare one), or a URL
   cloned bare into TMP.  */
static int
open_source (const char *spec, const char *tmp, git_repository **out, esbx_error_t *err)
{
  *out = NULL;
  if (is_url (spec))
    {
      git_clone_options o;

      git_clone_options_init (&o, GIT_CLONE_OPTIONS_VERSION);
      o.bare = 1;
      o.checkout_opts.checkout_strategy = GIT_CHECKOUT_NONE;
      if (git_clone (out, spec, tmp, &o) < 0)
        return git_fail (err, "fetch `%s`: %s", spec);
      return 0;
    }
  if (git_repository_open_ext (out, spec, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) < 0)
    return git_fail (err, "`%s` is not a git repository: %s", spec);
  return 0;
}

int
esbx_git_import (const char *spec, const char *ref, const char *tmp, int diffd, char **commit,
                 esbx_error_t *err)
{
  struct esbx_git_checkout im = { 0 };
  git_object *obj = NULL;
  git_commit *c = NULL;
  git_tree *tree = NULL;
  char hex[GIT_OID_HEXSZ + 1];
  int ret = -1;

  *commit = NULL;
  if (ref == NULL)
    ref = "HEAD";
  if (esbx_git_load (err) < 0 || open_source (spec, tmp, &im.repo, err) < 0)
    return -1;
  if (git_repository_is_shallow (im.repo) == 1)
    {
      esbx_make_error (err, 0,
                       "`%s` is a shallow repository: a project needs the whole history of its "
                       "commit (git fetch --unshallow)",
                       spec);
      goto out;
    }
  if (git_revparse_single (&obj, im.repo, ref) < 0)
    {
      esbx_make_error (err, 0, "`%s` has no ref or commit `%s`: %s", spec, ref, esbx_git_error ());
      goto out;
    }
  if (git_object_peel ((git_object **)&c, obj, GIT_OBJECT_COMMIT) < 0)
    {
      esbx_make_error (err, 0, "`%s` in `%s` is not a commit: %s", ref, spec, esbx_git_error ());
      goto out;
    }
  if (git_commit_tree (&tree, c) < 0)
    {
      git_fail (err, "the tree of `%s`: %s", ref);
      goto out;
    }
  if (write_tree (&im, tree, diffd, "", err) < 0)
    goto out;
  for (size_t i = 0; i < im.gitlinks.n; i++)
    esbx_warn ("import `%s`: `%s` is a submodule: an empty directory in the project", spec,
               im.gitlinks.v[i]);
  if (esbx_git_repo_write (im.repo, git_commit_id (c), tree, diffd, true, err) < 0)
    goto out;
  git_oid_tostr (hex, sizeof hex, git_commit_id (c));
  *commit = xstrdup (hex);
  ret = 0;
out:
  strv_free (&im.gitlinks);
  git_tree_free (tree);
  git_commit_free (c);
  git_object_free (obj);
  git_repository_free (im.repo);
  return ret;
}
