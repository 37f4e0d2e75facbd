/* One commit of another repository as a layer on the head (pull-git): the
 * layer is what turns the head's tree into the commit's, and its record
 * keeps the commit, so that the layers and the commits stay one to one.
 *
 * The staged layer is written as an upper directory over the head would
 * be: the entries the commit's tree adds or changes, written from the
 * object database as a checkout writes them (git_import.c: the same names
 * refused, nothing written outside the layer), whiteouts for the entries
 * it drops (a directory's whole), and the directories between them with
 * the modes the head gives them.  Subtrees whose ids did not change are
 * not entered, so the work follows the size of the change, not of the
 * tree.  The layer's change set is then the scan of that directory
 * against the head, as a session's would be, and everything after it is a
 * publish's: the conflict gate of later publishes sees its paths, rebase
 * merges with them.  Its `.git` holds what the commit brought (every
 * object it reaches that the previous layer's commit does not: a merge
 * brings the side it joins) and the head's index with its changes.  */
#include "internal.h"
#include "git.h"
#include "git_remote.h"
#include "git_repo.h"
#include "fs.h"
#include "log.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

struct land
{
  struct esbx_stack view; /* the head */
  struct esbx_git_checkout co;
  struct strv bumped; /* gitlinks whose commit changed: "PATH" */
};

static char *
join (const char *rel, const char *name)
{
  return rel[0] ? xasprintf ("%s/%s", rel, name) : xstrdup (name);
}

/* Does the head show anything at REL?  *ST its stat.  */
static bool
in_view (struct land *ld, const char *rel, struct stat *st)
{
  size_t layer;

  return esbx_stack_lookup (&ld->view, rel, &layer, st) == 1;
}

/* DIRFD/NAME, the directory REL of both trees, with the head's mode.  */
static int
open_both (struct land *ld, int dirfd, const char *name, const char *rel, esbx_error_t *err)
{
  struct stat st;
  int fd;

  if (mkdirat (dirfd, name, 0755) < 0 && errno != EEXIST)
    return esbx_make_error (err, errno, "mkdir `/%s`", rel);
  fd = TEMP_FAILURE_RETRY (openat (dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (fd < 0)
    return esbx_make_error (err, errno, "open `/%s`", rel);
  if (in_view (ld, rel, &st) && S_ISDIR (st.st_mode))
    {
      if (fchown (fd, st.st_uid, st.st_gid) < 0 || fchmod (fd, st.st_mode & 07777) < 0)
        {
          close (fd);
          return esbx_make_error (err, errno, "mode of `/%s`", rel);
        }
    }
  return fd;
}

/* Make DIRFD/NAME an opaque directory: nothing beneath it shows through.  */
static int
make_opaque (int dirfd, const char *name, const char *rel, esbx_error_t *err)
{
  _cleanup_close_ int fd
      = TEMP_FAILURE_RETRY (openat (dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));

  if (fd < 0 || fsetxattr (fd, "trusted.overlay.opaque", "y", 1, 0) < 0)
    return esbx_make_error (err, errno, "opaque `/%s`", rel);
  return 0;
}

static int diff_trees (struct land *ld, git_repository *repo, const git_tree *old,
                       const git_tree *new, int dirfd, const char *rel, esbx_error_t *err);

/* NEW's entry E against OLD's OE (or NULL) at REL/NAME.  */
static int
diff_entry (struct land *ld, git_repository *repo, const git_tree_entry *oe,
            const git_tree_entry *e, int dirfd, const char *rel, esbx_error_t *err)
{
  const char *name = git_tree_entry_name (e);
  _cleanup_free_ char *path = join (rel, name);
  git_filemode_t mode = git_tree_entry_filemode (e);
  git_filemode_t omode = oe ? git_tree_entry_filemode (oe) : 0;

  if (oe && omode == mode && git_oid_equal (git_tree_entry_id (oe), git_tree_entry_id (e)))
    return 0;
  if (esbx_git_check_name (rel, name, err) < 0)
    return -1;
  if (mode == GIT_FILEMODE_TREE && omode == GIT_FILEMODE_TREE)
    {
      git_tree *a = NULL, *b = NULL;
      _cleanup_close_ int fd = open_both (ld, dirfd, name, path, err);
      int r = -1;

      if (fd < 0)
        return -1;
      if (git_tree_lookup (&a, repo, git_tree_entry_id (oe)) < 0
          || git_tree_lookup (&b, repo, git_tree_entry_id (e)) < 0)
        esbx_make_error (err, 0, "tree `/%s`: %s", path, esbx_git_error ());
      else
        r = diff_trees (ld, repo, a, b, fd, path, err);
      git_tree_free (a);
      git_tree_free (b);
      return r;
    }
  if (mode == GIT_FILEMODE_COMMIT && omode == GIT_FILEMODE_COMMIT)
    {
      /* An empty directory either way: only the index learns.  */
      strv_push (&ld->bumped, xstrdup (path));
      return 0;
    }
  if (esbx_git_checkout_entry (&ld->co, e, dirfd, rel, err) < 0)
    return -1;
  /* A submodule where a directory was: empty, so the head's entries
     beneath it must not show through.  */
  if (mode == GIT_FILEMODE_COMMIT && omode == GIT_FILEMODE_TREE
      && make_opaque (dirfd, name, path, err) < 0)
    return -1;
  return 0;
}

static int
diff_trees (struct land *ld, git_repository *repo, const git_tree *old, const git_tree *new,
            int dirfd, const char *rel, esbx_error_t *err)
{
  size_t i, n;

  n = git_tree_entrycount (old);
  for (i = 0; i < n; i++)
    {
      const git_tree_entry *oe = git_tree_entry_byindex (old, i);
      const char *name = git_tree_entry_name (oe);
      _cleanup_free_ char *path = NULL;
      struct stat st;

      if (git_tree_entry_byname (new, name))
        continue;
      path = join (rel, name);
      if (!in_view (ld, path, &st))
        continue;
      if (strchr (name, '/') || strcmp (name, ".") == 0 || strcmp (name, "..") == 0)
        return esbx_make_error (err, 0, "tree entry `/%s`: not a name", path);
      if (mknodat (dirfd, name, S_IFCHR | 0, makedev (0, 0)) < 0)
        return esbx_make_error (err, errno, "whiteout `/%s`", path);
    }
  n = git_tree_entrycount (new);
  for (i = 0; i < n; i++)
    {
      const git_tree_entry *e = git_tree_entry_byindex (new, i);

      if (diff_entry (ld, repo, git_tree_entry_byname (old, git_tree_entry_name (e)), e, dirfd, rel,
                      err)
          < 0)
        return -1;
    }
  return 0;
}

/* The index entries of the submodules the layer adds or moves, from TREE
   (the index of the changes has none: a gitlink is a directory there).  */
static int
index_gitlinks (struct land *ld, git_tree *tree, int gitfd, esbx_error_t *err)
{
  _cleanup_free_ char *path = esbx_git_fd_path (gitfd, "index");
  git_index *idx = NULL;
  struct strv *lists[] = { &ld->co.gitlinks, &ld->bumped };
  int ret = -1;

  if (ld->co.gitlinks.n == 0 && ld->bumped.n == 0)
    return 0;
  if (git_index_open (&idx, path) < 0)
    return esbx_make_error (err, 0, "the layer's index: %s", esbx_git_error ());
  for (size_t k = 0; k < 2; k++)
    for (size_t i = 0; i < lists[k]->n; i++)
      {
        const char *rel = lists[k]->v[i] + (lists[k]->v[i][0] == '/');
        git_tree_entry *te = NULL;
        git_index_entry e = { 0 };

        if (git_tree_entry_bypath (&te, tree, rel) < 0)
          {
            esbx_make_error (err, 0, "submodule `/%s`: %s", rel, esbx_git_error ());
            goto out;
          }
        e.path = rel;
        e.mode = GIT_FILEMODE_COMMIT;
        e.id = *git_tree_entry_id (te);
        git_tree_entry_free (te);
        if (git_index_add (idx, &e) < 0)
          {
            esbx_make_error (err, 0, "index `/%s`: %s", rel, esbx_git_error ());
            goto out;
          }
      }
  if (git_index_write (idx) < 0)
    esbx_make_error (err, 0, "write the layer's index: %s", esbx_git_error ());
  else
    ret = 0;
out:
  git_index_free (idx);
  return ret;
}

/* DIFFD/.git: the pack of what COMMIT brings over PREV, and the index.  */
static int
write_git (struct land *ld, esbx_store_t *store, const char *project, const char *head,
           git_repository *repo, const git_oid *commit, const git_oid *prev, git_tree *tree,
           const struct esbx_changeset *cs, int diffd, esbx_error_t *err)
{
  static const char *const dirs[] = { ".git", ".git/objects", ".git/objects/pack" };
  _cleanup_free_ git_oid *blob_of = xmalloc0 ((cs->n + 1) * sizeof *blob_of);
  _cleanup_free_ char *pack = esbx_git_fd_path (diffd, ".git/objects/pack");
  _cleanup_close_ int gitfd = -1;
  size_t i;

  for (i = 0; i < ARRAY_SIZE (dirs); i++)
    if (mkdirat (diffd, dirs[i], 0755) < 0 && errno != EEXIST)
      return esbx_make_error (err, errno, "mkdir `%s`", dirs[i]);
  gitfd = esbx_open_dir_at (diffd, ".git", err);
  if (gitfd < 0 || esbx_git_pack_write (repo, commit, prev, pack, err) < 0)
    return -1;
  for (i = 0; i < cs->n; i++)
    {
      const struct esbx_change *c = &cs->v[i];
      git_tree_entry *te = NULL;

      if (c->kind == ESBX_DELETED || (c->type != ESBX_TYPE_FILE && c->type != ESBX_TYPE_SYMLINK))
        continue;
      if (git_tree_entry_bypath (&te, tree, c->path + 1) < 0)
        return esbx_make_error (err, 0, "`%s` is no entry of the commit: %s", c->path,
                                esbx_git_error ());
      blob_of[i] = *git_tree_entry_id (te);
      git_tree_entry_free (te);
    }
  if (esbx_git_index_update (store, project, head, cs, blob_of, diffd, gitfd, err) < 0)
    return -1;
  return index_gitlinks (ld, tree, gitfd, err);
}

/* The first line of MESSAGE.  */
static char *
summary_of (const char *message)
{
  size_t len = strcspn (message, "\n");

  while (len > 0 && (message[len - 1] == ' ' || message[len - 1] == '\r'))
    len--;
  return xstrndup (message, len);
}

int
esbx_git_land (esbx_store_t *store, const char *project, git_repository *repo,
               const git_oid *commit, const char *source, char ***ids, size_t *n, char **layer_id,
               esbx_error_t *err)
{
  const char *head = (*ids)[*n - 1];
  struct land ld = { .co = { .repo = repo } };
  struct esbx_staged staged = { .lockfd = -1 };
  struct esbx_layer layer = { 0 };
  struct esbx_changeset none = { 0 };
  _cleanup_free_ char *prev_hex = NULL, *diffrel = NULL;
  _cleanup_close_ int diffd = -1;
  git_commit *c = NULL, *pc = NULL;
  git_tree *tree = NULL, *ptree = NULL;
  git_oid prev;
  char hex[GIT_OID_HEXSZ + 1];
  int ret = -1;

  *layer_id = NULL;
  git_oid_tostr (hex, sizeof hex, commit);
  if (esbx_git_layer_commit (store, project, head, &prev_hex, err) < 0)
    return -1;
  if (git_oid_fromstr (&prev, prev_hex) < 0 || git_commit_lookup (&c, repo, commit) < 0
      || git_commit_tree (&tree, c) < 0 || git_commit_lookup (&pc, repo, &prev) < 0
      || git_commit_tree (&ptree, pc) < 0)
    {
      esbx_make_error (err, 0, "commit %s: %s", hex, esbx_git_error ());
      goto out;
    }
  if (esbx_layer_stage (store, project, -1, &none, &staged, err) < 0
      || esbx_stack_open (store, project, head, NULL, &ld.view, err) < 0)
    goto out;
  diffrel = xasprintf ("%s/diff", staged.rel);
  diffd = esbx_open_dir_at (store->rootfd, diffrel, err);
  if (diffd < 0 || diff_trees (&ld, repo, ptree, tree, diffd, "", err) < 0)
    goto out;
  for (size_t i = 0; i < ld.co.gitlinks.n; i++)
    esbx_warn ("pull-git `%s`: `%s` is a submodule: an empty directory in the project", project,
               ld.co.gitlinks.v[i]);
  if (esbx_scan_upper (&ld.view, diffd, project, ESBX_CHANGES_INCLUDE_IGNORED | ESBX_CHANGES_NO_GIT,
                       &layer.changes, NULL, NULL, err)
          < 0
      || write_git (&ld, store, project, head, repo, commit, &prev, tree, &layer.changes, diffd,
                    err)
             < 0
      || esbx_layer_sync (diffd, err) < 0
      || esbx_layer_adopt_parents (store, project, &staged, &layer.changes, head, NULL, err) < 0)
    goto out;
  {
    const git_signature *a = git_commit_author (c);
    layer.message = summary_of (git_commit_message (c));
    layer.labels = json_new (JSON_OBJECT);
    json_set_string (layer.labels, "source", source);
    if (a)
      {
        _cleanup_free_ char *who = xasprintf ("%s <%s>", a->name, a->email);
        json_set_string (layer.labels, "author", who);
      }
  }
  layer.git_commit = xstrdup (hex);
  if (esbx_layer_commit (store, project, &staged, &layer, *ids, *n, err) < 0)
    goto out;
  *ids = xrealloc (*ids, (*n + 2) * sizeof (char *));
  (*ids)[(*n)++] = xstrdup (layer.id);
  (*ids)[*n] = NULL;
  *layer_id = xstrdup (layer.id);
  ret = 0;
out:
  if (ret < 0)
    esbx_error_wrap (err, "commit %s", hex);
  esbx_layer_unstage (store, &staged);
  esbx_stack_close (&ld.view);
  strv_free (&ld.co.gitlinks);
  strv_free (&ld.bumped);
  git_tree_free (tree);
  git_tree_free (ptree);
  git_commit_free (c);
  git_commit_free (pc);
  esbx_layer_clear (&layer);
  return ret;
}
