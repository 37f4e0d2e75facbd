/* Inside the git room: the `.git` a layer of a git project carries.  */
#ifndef ESBX_GIT_REPO_H
#define ESBX_GIT_REPO_H

#include "error.h"
#include "layerstore.h"

#include "utils.h"

#include <git2.h>
#include <stdbool.h>

/* Write DIFFD/.git for COMMIT of REPO, whose TREE the layer DIFFD holds: a
   pack of every object COMMIT reaches, the index of TREE with the stat of
   DIFFD's files, and, for the first layer (FIRST), the config, HEAD and
   directories every session shares.  */
int esbx_git_repo_write (git_repository *repo, const git_oid *commit, git_tree *tree, int diffd,
                         bool first, esbx_error_t *err);

/* Every object COMMIT reaches but HIDE (NULL: none) does, as one pack in
   the directory DIR (an absolute path, or /proc/self/fd/N).  */
int esbx_git_pack_write (git_repository *repo, const git_oid *commit, const git_oid *hide,
                         const char *dir, esbx_error_t *err);

/* A tree written beneath a directory fd as git checks it out
   (git_import.c): blobs as files of mode 0644 or 0755, symlinks,
   directories, gitlinks as empty directories (named in GITLINKS, "/PATH");
   a name git or esbx refuses stops it with one line naming the path.  */
struct esbx_git_checkout
{
  git_repository *repo;
  struct strv gitlinks;
};
/* Refuse NAME, an entry of the tree at REL, unless a checkout may write it.  */
int esbx_git_check_name (const char *rel, const char *name, esbx_error_t *err);
/* Write entry E of the tree at REL ("": the root) as DIRFD's entry.  */
int esbx_git_checkout_entry (struct esbx_git_checkout *co, const git_tree_entry *e, int dirfd,
                             const char *rel, esbx_error_t *err);

/* An object database of the layers of PROJECT up to ID, and the objects
   directory DIR (NULL: none); *REPO wraps it (the caller frees both).  */
int esbx_git_open_layers (esbx_store_t *store, const char *project, const char *id, const char *dir,
                          git_repository **repo, git_odb **odb, esbx_error_t *err);

/* GITFD/index: the index of HEAD (a layer of PROJECT) with the changes CS
   of the layer above it applied, each file's entry with BLOB_OF[I] (per
   change of CS) and the stat of its file beneath DIFFD (git_layer.c).  */
int esbx_git_index_update (esbx_store_t *store, const char *project, const char *head,
                           const struct esbx_changeset *cs, const git_oid *blob_of, int diffd,
                           int gitfd, esbx_error_t *err);
/* The git mode of change C: a symlink, or a blob executable or not.  */
git_filemode_t esbx_git_filemode_of (const struct esbx_change *c);

/* /proc/self/fd/FD/REL, for libgit2 calls that take a path.  */
char *esbx_git_fd_path (int fd, const char *rel);

/* The index entry of PATH (relative, as in the index) with the stat of
   the file FD..REL (a layer's file, lstat'd beneath DIRFD).  */
int esbx_git_index_stat (int dirfd, const char *rel, git_index_entry *e, esbx_error_t *err);

#endif
