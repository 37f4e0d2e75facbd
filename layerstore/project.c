/* Projects: create (layer 0 from an import, or from a git commit), list,
   rm, squash.  */
#include "internal.h"
#include "git.h"
#include "failpoint.h"
#include "fs.h"
#include "text.h"
#include "utils.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Where a project's first layer comes from.  */
struct source
{
  const char *from;    /* a directory, an archive, a mounted tree, or NULL */
  const char *git;     /* or a git repository (a path or a URL) */
  const char *git_ref; /* and its ref (NULL: HEAD) */
  bool keep_git;       /* FROM's .git directories too (a squash's tree) */
};

/* Stage a layer whose diff is filled from SRC, scan it into its record, and
   append it: to a new stack when IDS is NULL.  */
static int
import_layer (esbx_store_t *store, const char *project, const struct source *src,
              const char *message, char **ids, size_t n, char **new_id, esbx_error_t *err)
{
  const char *from = src->from;
  struct esbx_staged staged = { .lockfd = -1 };
  struct esbx_layer layer = { 0 };
  struct esbx_stack empty = { .store = store };
  _cleanup_close_ int diff = -1;
  _cleanup_free_ char *diffrel = NULL;
  struct esbx_changeset none = { 0 };
  int ret = -1;

  if (esbx_layer_stage (store, project, -1, &none, &staged, err) < 0)
    return -1;
  diffrel = xasprintf ("%s/diff", staged.rel);
  diff = esbx_open_dir_at (store->rootfd, diffrel, err);
  if (diff < 0)
    goto out;
  if (from
      && esbx_import_tree_flags (from, diff, src->keep_git ? 0 : ESBX_IMPORT_SKIP_GIT, err) < 0)
    goto out;
  if (src->git)
    {
      _cleanup_free_ char *tmp = NULL;
      _cleanup_close_ int tmpfd = esbx_store_tmpdir (store, "git-import", &tmp, err);
      esbx_error_t ignored = NULL;
      int r;

      if (tmpfd < 0)
        goto out;
      r = esbx_git_import (src->git, src->git_ref, tmp, diff, &layer.git_commit, err);
      if (esbx_rm_rf_at (AT_FDCWD, tmp, &ignored) < 0)
        esbx_error_free (&ignored);
      if (r < 0)
        goto out;
    }
  /* The extraction does not fsync: make the tree durable before the head
     can name it (the README's durability order).  */
  if (esbx_layer_sync (diff, err) < 0)
    goto out;
  esbx_failpoint ("import-extracted");
  /* The record lists everything of the base as added, with hashes: later
     scans take base hashes from it instead of reading the files again.
     An import is the tree as it is: ignore rules do not apply.  */
  if (esbx_scan_upper (&empty, diff, project,
                       ESBX_CHANGES_INCLUDE_IGNORED | (src->git ? ESBX_CHANGES_NO_GIT : 0),
                       &layer.changes, NULL, NULL, err)
      < 0)
    goto out;
  layer.message = xstrdup (message);
  layer.labels = json_new (JSON_OBJECT);
  if (esbx_layer_commit (store, project, &staged, &layer, ids, n, err) < 0)
    goto out;
  esbx_failpoint ("import-committed");
  if (new_id)
    *new_id = xstrdup (layer.id);
  ret = 0;

out:
  esbx_layer_unstage (store, &staged);
  esbx_layer_clear (&layer);
  return ret;
}

/* ROOT/projects/P/git.json: where a git project came from.  */
static int
write_git_record (int pfd, const struct source *src, esbx_error_t *err)
{
  _cleanup_json_ json_t *j = json_new (JSON_OBJECT);
  _cleanup_free_ char *text = NULL;
  char abs[PATH_MAX];
  size_t len;

  /* A path as an absolute one: pull-git reads it again from anywhere.  */
  json_set_string (j, "source",
                   strstr (src->git, "://") == NULL && realpath (src->git, abs) ? abs : src->git);
  json_set_string (j, "ref", src->git_ref ? src->git_ref : "HEAD");
  text = json_serialize (j, true, &len);
  return esbx_write_file_atomic_at (pfd, "git.json", text, len, 0644, err);
}

static int create (esbx_store_t *store, const char *name, const struct source *src,
                   esbx_error_t *err);

int
esbx_project_create (esbx_store_t *store, const char *name, const char *from, esbx_error_t *err)
{
  struct source src = { .from = from };

  return create (store, name, &src, err);
}

int
esbx_project_create_git (esbx_store_t *store, const char *name, const char *repo, const char *ref,
                         esbx_error_t *err)
{
  struct source src = { .git = repo, .git_ref = ref };

  return create (store, name, &src, err);
}

static int
create (esbx_store_t *store, const char *name, const struct source *src, esbx_error_t *err)
{
  const char *from = src->from;
  static const char *const subdirs[] = { "layers", "tmp" };
  _cleanup_free_ char *rel = NULL, *message = NULL;
  _cleanup_close_ int lock = -1;
  _cleanup_close_ int pfd = -1;
  struct stat st;
  size_t i;

  if (esbx_check_name ("project", name, err) < 0)
    return -1;
  if (from && !esbx_exists_at (AT_FDCWD, from))
    return esbx_make_error (err, ENOENT, "project `%s`: source `%s`", name, from);
  rel = esbx_project_rel (name);
  if (mkdirat (store->rootfd, rel, 0711) < 0)
    {
      if (errno == EEXIST)
        return esbx_make_error_kind (err, ESBX_ERR_EXISTS, 0, "project `%s` already exists", name);
      return esbx_make_error (err, errno, "project `%s`: mkdir", name);
    }
  pfd = esbx_open_dir_at (store->rootfd, rel, err);
  if (pfd < 0)
    goto fail;
  /* gc removes project directories without a stack unless they are locked
     by their creator.  */
  lock = esbx_project_lock (store, name, err);
  if (lock < 0)
    goto fail;
  /* gc may have taken this directory for a crashed create between our
     mkdir and our lock: then it is gone, and whatever is at REL now is not
     ours to remove.  */
  if (fstat (pfd, &st) < 0 || st.st_nlink == 0)
    return esbx_make_error (err, EAGAIN, "project create `%s`: removed by a concurrent gc", name);
  for (i = 0; i < ARRAY_SIZE (subdirs); i++)
    if (mkdirat (pfd, subdirs[i], 0711) < 0)
      {
        esbx_make_error (err, errno, "project `%s`: mkdir `%s`", name, subdirs[i]);
        goto fail;
      }
  message = from       ? xasprintf ("import %s", from)
            : src->git ? xasprintf ("import %s %s", src->git, src->git_ref ? src->git_ref : "HEAD")
                       : xstrdup ("empty project");
  if (src->git && write_git_record (pfd, src, err) < 0)
    goto fail;
  if (import_layer (store, name, src, message, NULL, 0, NULL, err) < 0)
    goto fail;
  if (src->git)
    esbx_git_project_dir_update (store, name);
  return 0;

fail:
  esbx_error_wrap (err, "project create `%s`", name);
  {
    esbx_error_t ignored = NULL;
    if (esbx_rm_rf_at (store->rootfd, rel, &ignored) < 0)
      esbx_error_free (&ignored);
  }
  return -1;
}

static int
refuse_if_sessions (esbx_store_t *store, const char *name, const char *verb, esbx_error_t *err)
{
  _cleanup_strv_ char **sessions = esbx_session_list (store, name, err);

  if (sessions == NULL)
    return -1;
  if (sessions[0])
    return esbx_make_error (err, 0, "%s `%s`: %zu session%s still use%s it (first: `%s`)", verb,
                            name, strv_len (sessions), sessions[1] ? "s" : "",
                            sessions[1] ? "" : "s", sessions[0]);
  return 0;
}

int
esbx_project_rm (esbx_store_t *store, const char *name, esbx_error_t *err)
{
  _cleanup_free_ char *rel = NULL, *grave = NULL, *hex = NULL;
  _cleanup_close_ int lock = -1;

  if (esbx_project_check (store, name, err) < 0)
    return -1;
  lock = esbx_project_lock (store, name, err);
  if (lock < 0)
    return -1;
  if (refuse_if_sessions (store, name, "project rm", err) < 0)
    return -1;
  rel = esbx_project_rel (name);
  hex = esbx_random_hex (6);
  grave = xasprintf ("tmp/project-rm-%s-%s", name, hex);
  if (renameat (store->rootfd, rel, store->rootfd, grave) < 0)
    return esbx_make_error (err, errno, "project rm `%s`", name);
  fsync (store->rootfd);
  return esbx_rm_rf_at (store->rootfd, grave, err);
}

int
esbx_project_squash (esbx_store_t *store, const char *name, char **new_id, esbx_error_t *err)
{
  _cleanup_close_ int lock = -1;
  _cleanup_close_ int tmpfd = -1;
  _cleanup_free_ char *tmp = NULL, *message = NULL, *merged = NULL, *folded = NULL;
  _cleanup_strv_ char **lowers = NULL;
  _cleanup_strv_ char **ids = NULL;
  esbx_error_t ignored = NULL;
  size_t n, count;
  int ret;

  if (!esbx_project_exists (store, name))
    return esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0, "project `%s` does not exist", name);
  lock = esbx_project_lock (store, name, err);
  if (lock < 0)
    return -1;
  /* Live sessions mount the layers being replaced and publish against
     them: squash only a project nobody works on.  */
  if (refuse_if_sessions (store, name, "squash", err) < 0)
    return -1;
  /* A git project's layers are its commits: one layer would be one commit
     without the history the others hold.  */
  if (esbx_project_is_git (store, name))
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "squash `%s`: a git project keeps one layer per commit", name);
  if (esbx_project_stack (store, name, &ids, &count, err) < 0
      || esbx_stack_lowers (store, name, NULL, NULL, &lowers, &n, err) < 0)
    return -1;
  if (count == 1)
    {
      *new_id = xstrdup (ids[0]);
      return 0;
    }
  tmpfd = esbx_store_tmpdir (store, "squash", &tmp, err);
  if (tmpfd < 0)
    return -1;
  merged = xasprintf ("%s/merged", tmp);
  folded = xasprintf ("%s/lower", tmp);
  ret = mkdir (merged, 0755) < 0 ? esbx_make_error (err, errno, "mkdir `%s`", merged) : 0;
  if (ret == 0)
    ret = esbx_mount_stack (lowers, n, NULL, NULL, merged, folded, NULL, err);
  if (ret == 0)
    {
      struct source src = { .from = merged, .keep_git = true };

      message = xasprintf ("squash of %zu layers (%s..%s)", count, ids[0], ids[count - 1]);
      ret = import_layer (store, name, &src, message, NULL, 0, new_id, err);
    }
  if (esbx_unmount (merged, true, &ignored) < 0 || esbx_unmount (folded, true, &ignored) < 0)
    esbx_error_free (&ignored);
  if (esbx_rm_rf_at (AT_FDCWD, tmp, &ignored) < 0)
    esbx_error_free (&ignored);
  if (ret < 0)
    return esbx_error_wrap (err, "squash `%s`", name);
  return 0;
}
