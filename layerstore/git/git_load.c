/* libgit2, loaded on first use: see git.h.  */
#include "git.h"

#include "dl.h"
#include "utils.h"

#include <dlfcn.h>
#include <git2.h>
#include <git2/sys/hashsig.h>
#include <git2/sys/mempack.h>
#include <git2/sys/odb_backend.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIBGIT2 "libgit2.so.1.5"

/* F (RETURN, NAME, PARAMS, ARGS) for a function with a value, V for a void
   one, with libgit2's own prototypes (its headers are included above, so
   a mismatch does not compile).  */
#define GIT_FUNCTIONS(F, V)                                                                        \
  F (int, git_libgit2_init, (void), ())                                                            \
  F (const git_error *, git_error_last, (void), ())                                                \
  F (int, git_hashsig_create,                                                                      \
     (git_hashsig * *out, const char *buf, size_t buflen, git_hashsig_option_t opts),              \
     (out, buf, buflen, opts))                                                                     \
  V (void, git_hashsig_free, (git_hashsig * sig), (sig))                                           \
  F (int, git_hashsig_compare, (const git_hashsig *a, const git_hashsig *b), (a, b))               \
  F (int, git_blob_lookup, (git_blob * *blob, git_repository * repo, const git_oid *id),           \
     (blob, repo, id))                                                                             \
  F (const void *, git_blob_rawcontent, (const git_blob *blob), (blob))                            \
  F (git_object_size_t, git_blob_rawsize, (const git_blob *blob), (blob))                          \
  V (void, git_blob_free, (git_blob * blob), (blob))                                               \
  F (size_t, git_tree_entrycount, (const git_tree *tree), (tree))                                  \
  F (const git_tree_entry *, git_tree_entry_byindex, (const git_tree *tree, size_t idx),           \
     (tree, idx))                                                                                  \
  F (const char *, git_tree_entry_name, (const git_tree_entry *entry), (entry))                    \
  F (git_filemode_t, git_tree_entry_filemode, (const git_tree_entry *entry), (entry))              \
  F (const git_oid *, git_tree_entry_id, (const git_tree_entry *entry), (entry))                   \
  F (int, git_tree_lookup, (git_tree * *out, git_repository * repo, const git_oid *id),            \
     (out, repo, id))                                                                              \
  V (void, git_tree_free, (git_tree * tree), (tree))                                               \
  F (int, git_clone_options_init, (git_clone_options * opts, unsigned int version),                \
     (opts, version))                                                                              \
  F (int, git_clone,                                                                               \
     (git_repository * *out, const char *url, const char *local_path,                              \
      const git_clone_options *options),                                                           \
     (out, url, local_path, options))                                                              \
  F (int, git_repository_open_ext,                                                                 \
     (git_repository * *out, const char *path, unsigned int flags, const char *ceiling_dirs),      \
     (out, path, flags, ceiling_dirs))                                                             \
  F (int, git_repository_is_shallow, (git_repository * repo), (repo))                              \
  F (int, git_revparse_single, (git_object * *out, git_repository * repo, const char *spec),       \
     (out, repo, spec))                                                                            \
  F (int, git_object_peel,                                                                         \
     (git_object * *peeled, const git_object *object, git_object_t target_type),                   \
     (peeled, object, target_type))                                                                \
  F (int, git_commit_tree, (git_tree * *tree_out, const git_commit *commit), (tree_out, commit))   \
  F (const git_oid *, git_commit_id, (const git_commit *commit), (commit))                         \
  V (void, git_commit_free, (git_commit * commit), (commit))                                       \
  V (void, git_object_free, (git_object * object), (object))                                       \
  V (void, git_repository_free, (git_repository * repo), (repo))                                   \
  F (char *, git_oid_tostr, (char *out, size_t n, const git_oid *id), (out, n, id))                \
  F (int, git_index_open, (git_index * *out, const char *index_path), (out, index_path))           \
  F (int, git_index_read_tree, (git_index * index, const git_tree *tree), (index, tree))           \
  F (size_t, git_index_entrycount, (const git_index *index), (index))                              \
  F (const git_index_entry *, git_index_get_byindex, (git_index * index, size_t n), (index, n))    \
  F (int, git_index_add, (git_index * index, const git_index_entry *source_entry),                 \
     (index, source_entry))                                                                        \
  F (int, git_index_write, (git_index * index), (index))                                           \
  V (void, git_index_free, (git_index * index), (index))                                           \
  F (int, git_packbuilder_new, (git_packbuilder * *out, git_repository * repo), (out, repo))       \
  F (int, git_revwalk_new, (git_revwalk * *out, git_repository * repo), (out, repo))               \
  F (int, git_revwalk_push, (git_revwalk * walk, const git_oid *id), (walk, id))                   \
  F (int, git_packbuilder_insert_walk, (git_packbuilder * pb, git_revwalk * walk), (pb, walk))     \
  F (int, git_packbuilder_write,                                                                   \
     (git_packbuilder * pb, const char *path, unsigned int mode,                                   \
      git_indexer_progress_cb progress_cb, void *progress_cb_payload),                             \
     (pb, path, mode, progress_cb, progress_cb_payload))                                           \
  V (void, git_revwalk_free, (git_revwalk * walk), (walk))                                         \
  V (void, git_packbuilder_free, (git_packbuilder * pb), (pb))                                     \
  F (int, git_odb_new, (git_odb * *out), (out))                                                    \
  F (int, git_odb_add_disk_alternate, (git_odb * odb, const char *path), (odb, path))              \
  V (void, git_odb_free, (git_odb * db), (db))                                                     \
  F (int, git_repository_wrap_odb, (git_repository * *out, git_odb * odb), (out, odb))             \
  F (int, git_oid_fromstr, (git_oid * out, const char *str), (out, str))                           \
  F (int, git_revwalk_sorting, (git_revwalk * walk, unsigned int sort_mode), (walk, sort_mode))    \
  F (int, git_revwalk_hide, (git_revwalk * walk, const git_oid *commit_id), (walk, commit_id))     \
  F (int, git_revwalk_next, (git_oid * out, git_revwalk * walk), (out, walk))                      \
  F (int, git_commit_lookup, (git_commit * *commit, git_repository * repo, const git_oid *id),     \
     (commit, repo, id))                                                                           \
  F (const git_signature *, git_commit_author, (const git_commit *commit), (commit))               \
  F (const char *, git_commit_message, (const git_commit *commit), (commit))                       \
  F (int, git_odb_write,                                                                           \
     (git_oid * out, git_odb * odb, const void *data, size_t len, git_object_t type),              \
     (out, odb, data, len, type))                                                                  \
  F (int, git_odb_open_wstream,                                                                    \
     (git_odb_stream * *out, git_odb * db, git_object_size_t size, git_object_t type),             \
     (out, db, size, type))                                                                        \
  F (int, git_odb_stream_write, (git_odb_stream * stream, const char *buffer, size_t len),         \
     (stream, buffer, len))                                                                        \
  F (int, git_odb_stream_finalize_write, (git_oid * out, git_odb_stream * stream), (out, stream))  \
  V (void, git_odb_stream_free, (git_odb_stream * stream), (stream))                               \
  F (int, git_tree_entry_bypath, (git_tree_entry * *out, const git_tree *root, const char *path),  \
     (out, root, path))                                                                            \
  F (git_object_t, git_tree_entry_type, (const git_tree_entry *entry), (entry))                    \
  V (void, git_tree_entry_free, (git_tree_entry * entry), (entry))                                 \
  F (int, git_index_remove_bypath, (git_index * index, const char *path), (index, path))           \
  F (int, git_index_remove_directory, (git_index * index, const char *dir, int stage),             \
     (index, dir, stage))                                                                          \
  F (int, git_mempack_new, (git_odb_backend * *out), (out))                                        \
  F (int, git_packbuilder_insert, (git_packbuilder * pb, const git_oid *id, const char *name),     \
     (pb, id, name))                                                                               \
  F (int, git_oid_is_zero, (const git_oid *id), (id))                                              \
  F (int, git_odb_add_backend, (git_odb * odb, git_odb_backend * backend, int priority),           \
     (odb, backend, priority))                                                                     \
  F (int, git_tree_create_updated,                                                                 \
     (git_oid * out, git_repository * repo, git_tree * baseline, size_t nupdates,                  \
      const git_tree_update *updates),                                                             \
     (out, repo, baseline, nupdates, updates))                                                     \
  F (int, git_signature_new,                                                                       \
     (git_signature * *out, const char *name, const char *email, git_time_t time, int offset),     \
     (out, name, email, time, offset))                                                             \
  V (void, git_signature_free, (git_signature * sig), (sig))                                       \
  F (int, git_commit_create,                                                                       \
     (git_oid * id, git_repository * repo, const char *update_ref, const git_signature *author,    \
      const git_signature *committer, const char *message_encoding, const char *message,           \
      const git_tree *tree, size_t parent_count, const git_commit *parents[]),                     \
     (id, repo, update_ref, author, committer, message_encoding, message, tree, parent_count,      \
      parents))                                                                                    \
  F (const git_oid *, git_tree_id, (const git_tree *tree), (tree))                                 \
  F (const git_oid *, git_commit_tree_id, (const git_commit *commit), (commit))                    \
  F (const git_index_entry *, git_index_get_bypath,                                                \
     (git_index * index, const char *path, int stage), (index, path, stage))                       \
  F (int, git_index_find_prefix, (size_t * at_pos, git_index * index, const char *prefix),         \
     (at_pos, index, prefix))                                                                      \
  F (int, git_repository_init, (git_repository * *out, const char *path, unsigned is_bare),        \
     (out, path, is_bare))                                                                         \
  F (int, git_remote_create_anonymous,                                                             \
     (git_remote * *out, git_repository * repo, const char *url), (out, repo, url))                \
  V (void, git_remote_free, (git_remote * remote), (remote))                                       \
  F (int, git_remote_init_callbacks, (git_remote_callbacks * opts, unsigned int version),          \
     (opts, version))                                                                              \
  F (int, git_credential_userpass_plaintext_new,                                                   \
     (git_credential * *out, const char *username, const char *password),                          \
     (out, username, password))                                                                    \
  F (int, git_remote_connect_options_init,                                                         \
     (git_remote_connect_options * opts, unsigned int version), (opts, version))                   \
  F (int, git_remote_connect_ext,                                                                  \
     (git_remote * remote, git_direction direction, const git_remote_connect_options *opts),       \
     (remote, direction, opts))                                                                    \
  F (int, git_remote_ls, (const git_remote_head ***out, size_t *size, git_remote *remote),         \
     (out, size, remote))                                                                          \
  F (int, git_oid_equal, (const git_oid *a, const git_oid *b), (a, b))                             \
  F (int, git_graph_descendant_of,                                                                 \
     (git_repository * repo, const git_oid *commit, const git_oid *ancestor),                      \
     (repo, commit, ancestor))                                                                     \
  F (int, git_reference_name_is_valid, (int *valid, const char *refname), (valid, refname))        \
  F (int, git_reference_create,                                                                    \
     (git_reference * *out, git_repository * repo, const char *name, const git_oid *id, int force, \
      const char *log_message),                                                                    \
     (out, repo, name, id, force, log_message))                                                    \
  V (void, git_reference_free, (git_reference * ref), (ref))                                       \
  F (int, git_push_options_init, (git_push_options * opts, unsigned int version), (opts, version)) \
  F (int, git_remote_push,                                                                         \
     (git_remote * remote, const git_strarray *refspecs, const git_push_options *opts),            \
     (remote, refspecs, opts))                                                                     \
  F (int, git_fetch_options_init, (git_fetch_options * opts, unsigned int version),                \
     (opts, version))                                                                              \
  F (int, git_remote_fetch,                                                                        \
     (git_remote * remote, const git_strarray *refspecs, const git_fetch_options *opts,            \
      const char *reflog_message),                                                                 \
     (remote, refspecs, opts, reflog_message))                                                     \
  F (const git_oid *, git_object_id, (const git_object *obj), (obj))                               \
  F (unsigned int, git_commit_parentcount, (const git_commit *commit), (commit))                   \
  F (const git_oid *, git_commit_parent_id, (const git_commit *commit, unsigned int n),            \
     (commit, n))                                                                                  \
  F (const git_tree_entry *, git_tree_entry_byname, (const git_tree *tree, const char *filename),  \
     (tree, filename))

#define MEMBER(ret, name, params, args) ret (*name) params;
static struct
{
  GIT_FUNCTIONS (MEMBER, MEMBER)
} api;
#undef MEMBER

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static char load_error[512];
static int loaded;

#define SYMBOL(ret, name, params, args) { #name, &api.name },
static const struct esbx_dl_symbol symbols[] = { GIT_FUNCTIONS (SYMBOL, SYMBOL) };
#undef SYMBOL

static void
load (void)
{
  void *handle
      = esbx_dl_load (LIBGIT2, symbols, ARRAY_SIZE (symbols), load_error, sizeof load_error);

  if (handle == NULL)
    return;
  if (api.git_libgit2_init () < 0)
    {
      snprintf (load_error, sizeof load_error, "git_libgit2_init failed");
      memset (&api, 0, sizeof api);
      dlclose (handle);
      return;
    }
  loaded = 1;
}

int
esbx_git_load (esbx_error_t *err)
{
  pthread_once (&load_once, load);
  if (!loaded)
    return esbx_make_error (err, 0, "cannot load %s (apt-get install libgit2-1.5): %s", LIBGIT2,
                            load_error);
  return 0;
}

const char *
esbx_git_error (void)
{
  const git_error *e = loaded ? api.git_error_last () : NULL;

  return e && e->message ? e->message : "unknown";
}

static void
need_api (void)
{
  esbx_dl_need (esbx_git_load);
}

GIT_FUNCTIONS (ESBX_DL_FORWARD, ESBX_DL_FORWARD_VOID)
