/* The commit of a published layer of a git project: its tree is the new
 * head's tree, its parent the previous head's commit, so that the project's
 * layers and its commits are one to one (README, "Git projects").
 *
 * The objects are written into an in-memory object database (libgit2's
 * mempack) over the layers' own: blobs of the layer's files read from the
 * staged layer, the trees from the parent's with the layer's changes, the
 * commit; the new ones (the blobs, the trees on the way to a changed path,
 * the commit) are then one pack in the staged layer's `.git`, and
 * the index of the new tree (the parent's index with the layer's changes,
 * each with the stat of the staged file) beside it.  The commit depends on
 * the layers only (the time is the layer's, the author and the message are
 * what the publish said), so every host sharing the project makes the
 * same one.  */
#include "internal.h"
#include "git.h"
#include "git_repo.h"
#include "copy.h"
#include "fs.h"
#include "path.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <git2/sys/mempack.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct make
{
  git_repository *repo;
  git_odb *odb;
  git_odb_backend *mempack;
  int diffd; /* where the changes' files are: a staged layer's diff, an upper */
  git_tree_update *removals, *upserts;
  size_t n_removals, n_upserts;
  git_oid *blob_of; /* per change of the layer: its blob (files, symlinks) */
};

#define git_fail(err, fmt, arg) esbx_make_error (err, 0, fmt, arg, esbx_git_error ())

/* The blob of change C, from the staged layer.  */
static int
write_blob (struct make *m, const struct esbx_change *c, git_oid *out, esbx_error_t *err)
{
  if (c->type == ESBX_TYPE_SYMLINK)
    {
      if (git_odb_write (out, m->odb, c->target, strlen (c->target), GIT_OBJECT_BLOB) < 0)
        return git_fail (err, "blob of `%s`: %s", c->path);
      return 0;
    }
  {
    _cleanup_close_ int fd = esbx_open_regular_beneath (m->diffd, c->path + 1, err);
    git_odb_stream *w = NULL;
    char buf[65536];
    ssize_t n;
    struct stat st;
    int ret = -1;

    if (fd < 0)
      return esbx_error_wrap (err, "blob of `%s`", c->path);
    if (fstat (fd, &st) < 0)
      return esbx_make_error (err, errno, "blob of `%s`", c->path);
    if (git_odb_open_wstream (&w, m->odb, (git_object_size_t)st.st_size, GIT_OBJECT_BLOB) < 0)
      return git_fail (err, "blob of `%s`: %s", c->path);
    while ((n = TEMP_FAILURE_RETRY (read (fd, buf, sizeof buf))) > 0)
      if (git_odb_stream_write (w, buf, (size_t)n) < 0)
        break;
    if (n < 0)
      esbx_make_error (err, errno, "blob of `%s`: read", c->path);
    else if (n > 0 || git_odb_stream_finalize_write (out, w) < 0)
      git_fail (err, "blob of `%s`: %s", c->path);
    else
      ret = 0;
    git_odb_stream_free (w);
    return ret;
  }
}

git_filemode_t
esbx_git_filemode_of (const struct esbx_change *c)
{
  if (c->type == ESBX_TYPE_SYMLINK)
    return GIT_FILEMODE_LINK;
  return (c->mode & 0111) ? GIT_FILEMODE_BLOB_EXECUTABLE : GIT_FILEMODE_BLOB;
}

/* Does PATH name something in TREE (of another kind than KIND when KIND is
   not GIT_OBJECT_INVALID)?  */
static bool
in_tree (git_tree *tree, const char *path, git_object_t kind)
{
  git_tree_entry *e = NULL;
  bool yes;

  if (git_tree_entry_bypath (&e, tree, path) < 0)
    return false;
  yes = kind == GIT_OBJECT_INVALID || git_tree_entry_type (e) != kind;
  git_tree_entry_free (e);
  return yes;
}

/* The tree updates of CS over PARENT: removals first (deletions, and paths
   that change from a file to a directory or back, which one pass of
   git_tree_create_updated cannot do), then the files and symlinks.  */
static int
plan (struct make *m, git_tree *parent, const struct esbx_changeset *cs, esbx_error_t *err)
{
  size_t i;

  m->removals = xmalloc0 ((cs->n + 1) * sizeof *m->removals);
  m->upserts = xmalloc0 ((cs->n + 1) * sizeof *m->upserts);
  m->blob_of = xmalloc0 ((cs->n + 1) * sizeof *m->blob_of);
  for (i = 0; i < cs->n; i++)
    {
      const struct esbx_change *c = &cs->v[i];
      const char *path = c->path + 1;
      bool leaf = c->type == ESBX_TYPE_FILE || c->type == ESBX_TYPE_SYMLINK;

      if (c->kind == ESBX_DELETED
          || (c->kind == ESBX_MODIFIED
              && in_tree (parent, path, leaf ? GIT_OBJECT_BLOB : GIT_OBJECT_TREE)))
        {
          if (in_tree (parent, path, GIT_OBJECT_INVALID))
            m->removals[m->n_removals++]
                = (git_tree_update){ .action = GIT_TREE_UPDATE_REMOVE, .path = path };
          if (c->kind == ESBX_DELETED)
            continue;
        }
      if (!leaf)
        continue; /* git holds directories through their files; FIFOs not at all */
      if (write_blob (m, c, &m->blob_of[i], err) < 0)
        return -1;
      m->upserts[m->n_upserts++] = (git_tree_update){ .action = GIT_TREE_UPDATE_UPSERT,
                                                      .id = m->blob_of[i],
                                                      .filemode = esbx_git_filemode_of (c),
                                                      .path = path };
    }
  return 0;
}

/* The layer's time, from its record ("2026-12-03T09:44:16.29Z").  */
static git_time_t
layer_time (const struct esbx_layer *l)
{
  struct tm tm = { 0 };

  if (l->created == NULL || strptime (l->created, "%Y-%m-%dT%H:%M:%S", &tm) == NULL)
    return 0;
  return (git_time_t)timegm (&tm);
}

int
esbx_git_index_update (esbx_store_t *store, const char *project, const char *head,
                       const struct esbx_changeset *cs, const git_oid *blob_of, int diffd,
                       int gitfd, esbx_error_t *err)
{
  _cleanup_free_ char *path = esbx_git_fd_path (gitfd, "index");
  struct esbx_stack view = { 0 };
  git_index *idx = NULL;
  struct stat st;
  size_t layer, i;
  int ret = -1;

  if (esbx_stack_open (store, project, head, NULL, &view, err) < 0)
    return -1;
  /* The head's index, copied: an index is written whole anyway.  */
  if (esbx_stack_lookup (&view, ".git/index", &layer, &st) == 1)
    {
      _cleanup_close_ int in = esbx_open_regular_beneath (view.fds[layer], ".git/index", err);
      _cleanup_close_ int out = -1;

      unlinkat (gitfd, "index", 0);
      out = in < 0 ? -1
                   : TEMP_FAILURE_RETRY (openat (
                       gitfd, "index", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
      if (in < 0 || out < 0 || esbx_copy_file_data (in, out, NULL, NULL, NULL, err) < 0)
        {
          if (in >= 0 && out < 0)
            esbx_make_error (err, errno, "copy the head's index");
          goto out;
        }
    }
  if (git_index_open (&idx, path) < 0)
    {
      git_fail (err, "index of `%s`: %s", head);
      goto out;
    }
  for (i = 0; i < cs->n; i++)
    {
      const struct esbx_change *c = &cs->v[i];
      const char *rel = c->path + 1;
      git_index_entry e = { 0 };

      if (c->kind == ESBX_DELETED || c->type == ESBX_TYPE_DIR)
        {
          /* A directory's entries go with it when it goes or was emptied
             (an opaque one's deletions are changes of their own).  */
          git_index_remove_bypath (idx, rel);
          if (c->kind == ESBX_DELETED)
            git_index_remove_directory (idx, rel, 0);
          continue;
        }
      if (c->type != ESBX_TYPE_FILE && c->type != ESBX_TYPE_SYMLINK)
        continue;
      git_index_remove_directory (idx, rel, 0);
      e.path = rel;
      e.mode = esbx_git_filemode_of (c);
      e.id = blob_of[i];
      if (esbx_git_index_stat (diffd, rel, &e, err) < 0)
        goto out;
      if (git_index_add (idx, &e) < 0)
        {
          git_fail (err, "index `%s`: %s", rel);
          goto out;
        }
    }
  if (git_index_write (idx) < 0)
    {
      git_fail (err, "write the index of `%s`: %s", head);
      goto out;
    }
  ret = 0;
out:
  git_index_free (idx);
  esbx_stack_close (&view);
  return ret;
}

/* Into PB: the trees of TREE that hold PATH (its parent directories, from
   the root down), those a change rewrote.  */
static int
insert_parents (git_packbuilder *pb, git_tree *tree, const char *path)
{
  _cleanup_free_ char *dir = xstrdup (path);
  char *slash;

  while ((slash = strrchr (dir, '/')) != NULL)
    {
      git_tree_entry *e = NULL;
      int r = 0;

      *slash = '\0';
      if (git_tree_entry_bypath (&e, tree, dir) == 0)
        {
          if (git_tree_entry_type (e) == GIT_OBJECT_TREE)
            r = git_packbuilder_insert (pb, git_tree_entry_id (e), NULL);
          git_tree_entry_free (e);
        }
      if (r < 0)
        return r;
    }
  return 0;
}

/* The objects the changes CS added, as one pack in the directory PACKFD:
   COMMIT, TREE and the trees on the way to each changed path (every other
   tree is the parent's), the blobs written.  Not git_mempack_dump, which
   packs all that the commit reaches: the whole tree, read back from the
   layers' packs, again in every layer.  */
static int
write_pack (struct make *m, const git_oid *commit, git_tree *tree, const struct esbx_changeset *cs,
            int packfd, esbx_error_t *err)
{
  _cleanup_free_ char *dir = esbx_git_fd_path (packfd, NULL);
  git_packbuilder *pb = NULL;
  size_t i;
  int ret = -1;

  if (git_packbuilder_new (&pb, m->repo) < 0 || git_packbuilder_insert (pb, commit, NULL) < 0
      || git_packbuilder_insert (pb, git_tree_id (tree), NULL) < 0)
    goto out;
  for (i = 0; i < cs->n; i++)
    if ((!git_oid_is_zero (&m->blob_of[i]) && git_packbuilder_insert (pb, &m->blob_of[i], NULL) < 0)
        || insert_parents (pb, tree, cs->v[i].path + 1) < 0)
      goto out;
  if (git_packbuilder_write (pb, dir, 0444, NULL, NULL) == 0)
    ret = 0;
out:
  if (ret < 0)
    git_fail (err, "pack of %s: %s", "the new objects");
  git_packbuilder_free (pb);
  return ret;
}

static void
make_close (struct make *m)
{
  git_repository_free (m->repo);
  git_odb_free (m->odb);
  free (m->removals);
  free (m->upserts);
  free (m->blob_of);
  memset (m, 0, sizeof *m);
}

/* M over the layers of PROJECT up to HEAD, new objects in memory, files
   read beneath SRCFD; *PARENT is HEAD's commit, *PTREE its tree.  */
static int
make_open (struct make *m, esbx_store_t *store, const char *project, const char *head, int srcfd,
           git_commit **parent, git_tree **ptree, esbx_error_t *err)
{
  _cleanup_free_ char *parent_id = NULL;
  git_oid poid;

  memset (m, 0, sizeof *m);
  m->diffd = srcfd;
  *parent = NULL;
  *ptree = NULL;
  if (esbx_git_layer_commit (store, project, head, &parent_id, err) < 0
      || esbx_git_open_layers (store, project, head, NULL, &m->repo, &m->odb, err) < 0)
    return -1;
  if (git_mempack_new (&m->mempack) < 0 || git_odb_add_backend (m->odb, m->mempack, 1000) < 0)
    return git_fail (err, "object database of `%s`: %s", project);
  if (git_oid_fromstr (&poid, parent_id) < 0 || git_commit_lookup (parent, m->repo, &poid) < 0
      || git_commit_tree (ptree, *parent) < 0)
    return esbx_make_error (err, 0, "the commit `%s`: %s", parent_id, esbx_git_error ());
  return 0;
}

/* The tree of PTREE with the changes CS (files read from M's directory).  */
static int
make_tree (struct make *m, git_tree *ptree, const struct esbx_changeset *cs, git_tree **out,
           esbx_error_t *err)
{
  git_tree *mid = NULL;
  git_oid toid;
  int ret = -1;

  *out = NULL;
  if (plan (m, ptree, cs, err) < 0)
    return -1;
  if (git_tree_create_updated (&toid, m->repo, ptree, m->n_removals, m->removals) < 0
      || git_tree_lookup (&mid, m->repo, &toid) < 0
      || git_tree_create_updated (&toid, m->repo, mid, m->n_upserts, m->upserts) < 0
      || git_tree_lookup (out, m->repo, &toid) < 0)
    git_fail (err, "tree of %s: %s", "the changes");
  else
    ret = 0;
  git_tree_free (mid);
  return ret;
}

static int
make_commit (struct make *m, git_tree *tree, git_commit *parent, const char *author,
             const char *email, git_time_t when, const char *message, git_oid *out,
             esbx_error_t *err)
{
  git_signature *sig = NULL;
  int ret = 0;

  if (git_signature_new (&sig, author, email, when, 0) < 0
      || git_commit_create (out, m->repo, NULL, sig, sig, NULL, message, tree, 1,
                            (const git_commit **)&parent)
             < 0)
    ret = git_fail (err, "commit of %s: %s", "the changes");
  git_signature_free (sig);
  return ret;
}

/* DIRFD/REL, each component a directory made if missing, none a symlink.  */
static int
open_dirs (int dirfd, const char *rel, esbx_error_t *err)
{
  _cleanup_free_ char *copy = xstrdup (rel);
  char *comp, *save = NULL;
  int fd = fcntl (dirfd, F_DUPFD_CLOEXEC, 3);

  for (comp = strtok_r (copy, "/", &save); fd >= 0 && comp; comp = strtok_r (NULL, "/", &save))
    {
      int sub;

      if (mkdirat (fd, comp, 0755) < 0 && errno != EEXIST)
        {
          esbx_make_error (err, errno, "mkdir `%s`", rel);
          close (fd);
          return -1;
        }
      sub = TEMP_FAILURE_RETRY (openat (fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      close (fd);
      if (sub < 0)
        return esbx_make_error (err, errno, "open `%s`", rel);
      fd = sub;
    }
  return fd;
}

int
esbx_git_layer_make (esbx_store_t *store, const char *project, const char *staged_rel,
                     struct esbx_layer *l, const char *head, const char *author, const char *email,
                     const char *message, esbx_error_t *err)
{
  struct make m = { 0 };
  _cleanup_free_ char *diffrel = xasprintf ("%s/diff", staged_rel), *text = NULL;
  _cleanup_close_ int diffd = -1, gitfd = -1, packfd = -1;
  git_commit *parent = NULL;
  git_tree *ptree = NULL, *tree = NULL;
  git_oid coid;
  char hex[GIT_OID_HEXSZ + 1];
  int ret = -1;

  diffd = esbx_open_dir_at (store->rootfd, diffrel, err);
  if (diffd < 0 || make_open (&m, store, project, head, diffd, &parent, &ptree, err) < 0
      || make_tree (&m, ptree, &l->changes, &tree, err) < 0)
    goto out;
  text = xasprintf ("%s\n\nEsbx-Layer: %s\nEsbx-Session: %s\n", message, l->id,
                    l->session ? l->session : "-");
  if (make_commit (&m, tree, parent, author, email, layer_time (l), text, &coid, err) < 0)
    goto out;
  gitfd = open_dirs (diffd, ".git", err);
  packfd = gitfd < 0 ? -1 : open_dirs (gitfd, "objects/pack", err);
  if (packfd < 0 || write_pack (&m, &coid, tree, &l->changes, packfd, err) < 0
      || esbx_git_index_update (store, project, head, &l->changes, m.blob_of, m.diffd, gitfd, err)
             < 0
      || esbx_syncfs (diffd, "the layer's commit", err) < 0)
    goto out;
  git_oid_tostr (hex, sizeof hex, &coid);
  free (l->git_commit);
  l->git_commit = xstrdup (hex);
  ret = 0;
out:
  git_tree_free (tree);
  git_tree_free (ptree);
  git_commit_free (parent);
  make_close (&m);
  return ret;
}

int
esbx_git_tree_of (esbx_store_t *store, const char *project, const char *base, int srcfd,
                  const struct esbx_changeset *cs, char tree_hex[41], esbx_error_t *err)
{
  struct make m = { 0 };
  git_commit *parent = NULL;
  git_tree *ptree = NULL, *tree = NULL;
  int ret = -1;

  if (make_open (&m, store, project, base, srcfd, &parent, &ptree, err) == 0
      && make_tree (&m, ptree, cs, &tree, err) == 0)
    {
      git_oid_tostr (tree_hex, 41, git_tree_id (tree));
      ret = 0;
    }
  git_tree_free (tree);
  git_tree_free (ptree);
  git_commit_free (parent);
  make_close (&m);
  return ret;
}

int
esbx_git_session_commit (esbx_store_t *store, const char *project, const char *head, int upperfd,
                         const struct esbx_changeset *cs, const char *author, const char *email,
                         const char *message, char commit_hex[41], esbx_error_t *err)
{
  struct make m = { 0 };
  _cleanup_close_ int gitfd = -1, packfd = -1;
  git_commit *parent = NULL;
  git_tree *ptree = NULL, *tree = NULL;
  git_oid coid;
  int ret = -1;

  if (make_open (&m, store, project, head, upperfd, &parent, &ptree, err) < 0
      || make_tree (&m, ptree, cs, &tree, err) < 0
      || make_commit (&m, tree, parent, author, email, (git_time_t)time (NULL), message, &coid, err)
             < 0)
    goto out;
  /* Into the session's own .git, every directory checked on the way: its
     objects stay the session's.  */
  gitfd = open_dirs (upperfd, ".git", err);
  packfd = gitfd < 0 ? -1 : open_dirs (gitfd, "objects/pack", err);
  if (packfd < 0 || write_pack (&m, &coid, tree, cs, packfd, err) < 0
      || esbx_git_index_update (store, project, head, cs, m.blob_of, m.diffd, gitfd, err) < 0)
    goto out;
  git_oid_tostr (commit_hex, 41, &coid);
  ret = 0;
out:
  git_tree_free (tree);
  git_tree_free (ptree);
  git_commit_free (parent);
  make_close (&m);
  return ret;
}
