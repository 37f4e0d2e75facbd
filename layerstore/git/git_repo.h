/* Inside the git room: the `.git` a layer of a git project carries.  */
#ifndef ESBX_GIT_REPO_H
#define ESBX_GIT_REPO_H

#include "error.h"
#include "layerstore.h"

#include <git2.h>
#include <stdbool.h>

/* Write DIFFD/.git for COMMIT of REPO, whose TREE the layer DIFFD holds: a
   pack of every object COMMIT reaches, the index of TREE with the stat of
   DIFFD's files, and, for the first layer (FIRST), the config, HEAD and
   directories every session shares.  */
int esbx_git_repo_write (git_repository *repo, const git_oid *commit, git_tree *tree, int diffd,
                         bool first, esbx_error_t *err);

/* An object database of the layers of PROJECT up to ID, and the objects
   directory DIR (NULL: none); *REPO wraps it (the caller frees both).  */
int esbx_git_open_layers (esbx_store_t *store, const char *project, const char *id, const char *dir,
                          git_repository **repo, git_odb **odb, esbx_error_t *err);

/* /proc/self/fd/FD/REL, for libgit2 calls that take a path.  */
char *esbx_git_fd_path (int fd, const char *rel);

/* The index entry of PATH (relative, as in the index) with the stat of
   the file FD..REL (a layer's file, lstat'd beneath DIRFD).  */
int esbx_git_index_stat (int dirfd, const char *rel, git_index_entry *e, esbx_error_t *err);

#endif
