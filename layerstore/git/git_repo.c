/* The repository of a git project, kept in its layers.
 *
 * Every layer of a git project carries, beside its files, a `.git`
 * directory that is never a change (scan.c leaves `/.git` out of a git
 * session's change set, export leaves it out of archives):
 *
 *   .git/objects/pack/pack-H.{pack,idx}  the objects the layer brought: all
 *                                        of the imported history for the
 *                                        first layer, its commit, trees and
 *                                        new blobs for a published one
 *   .git/index                           the index of the layer's tree, with
 *                                        the stat of the files as the stack
 *                                        shows them
 *   .git/config, HEAD, refs/             the first layer only
 *
 * So the merged view of a stack is a repository at that layer's commit: its
 * packs are the union of the layers', its index the top layer's.  A session
 * adds its HEAD and branch (git_session.c) and writes what git writes
 * (index, refs, objects, logs) into its own upper directory; its objects are
 * shared read-only through the overlay, whatever git does to them (a `git
 * gc` in a session copies into the session, never into a layer).  The
 * index matches the work tree because git compares only what the config
 * asks it to: core.checkStat = minimal (mtime in seconds and size; no
 * inode, device, owner) and core.trustctime = false, which the files of a
 * stack keep in every session.  gc.auto = 0: every layer adds a pack, and
 * git's automatic gc would copy all of them into each session after fifty.  */
#include "git_repo.h"
#include "git.h"
#include "fs.h"
#include "path.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char config_text[] = "[core]\n"
                                  "\trepositoryformatversion = 0\n"
                                  "\tfilemode = true\n"
                                  "\tbare = false\n"
                                  "\tlogallrefupdates = true\n"
                                  "\tcheckStat = minimal\n"
                                  "\ttrustctime = false\n"
                                  "[gc]\n"
                                  "\tauto = 0\n"
                                  "\tautoPackLimit = 0\n"
                                  "[maintenance]\n"
                                  "\tauto = false\n";

char *
esbx_git_fd_path (int fd, const char *rel)
{
  return rel && rel[0] ? xasprintf ("/proc/self/fd/%d/%s", fd, rel)
                       : xasprintf ("/proc/self/fd/%d", fd);
}

static int
mkdirs (int diffd, esbx_error_t *err)
{
  static const char *const dirs[]
      = { ".git",      ".git/objects",    ".git/objects/pack", ".git/objects/info",
          ".git/refs", ".git/refs/heads", ".git/refs/tags",    ".git/info" };

  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
    if (mkdirat (diffd, dirs[i], 0755) < 0 && errno != EEXIST)
      return esbx_make_error (err, errno, "mkdir `%s`", dirs[i]);
  return 0;
}

int
esbx_git_index_stat (int dirfd, const char *rel, git_index_entry *e, esbx_error_t *err)
{
  _cleanup_close_ int fd = esbx_open_beneath (dirfd, rel, O_PATH | O_NOFOLLOW, 0, err);
  struct stat st;

  if (fd < 0 || fstat (fd, &st) < 0)
    return fd < 0 ? -1 : esbx_make_error (err, errno, "stat `/%s`", rel);
  e->ctime.seconds = (int32_t)st.st_ctim.tv_sec;
  e->ctime.nanoseconds = (uint32_t)st.st_ctim.tv_nsec;
  e->mtime.seconds = (int32_t)st.st_mtim.tv_sec;
  e->mtime.nanoseconds = (uint32_t)st.st_mtim.tv_nsec;
  e->dev = 0;
  e->ino = (uint32_t)st.st_ino;
  e->uid = st.st_uid;
  e->gid = st.st_gid;
  e->file_size = (uint32_t)st.st_size;
  return 0;
}

/* The index of TREE with the stat of DIFFD's files, as DIFFD/.git/index.  */
static int
write_index (git_tree *tree, int diffd, esbx_error_t *err)
{
  _cleanup_free_ char *path = esbx_git_fd_path (diffd, ".git/index");
  git_index *idx = NULL;
  size_t i, n;
  int ret = -1;

  unlinkat (diffd, ".git/index", 0);
  if (git_index_open (&idx, path) < 0 || git_index_read_tree (idx, tree) < 0)
    {
      esbx_make_error (err, 0, "index: %s", esbx_git_error ());
      goto out;
    }
  n = git_index_entrycount (idx);
  for (i = 0; i < n; i++)
    {
      git_index_entry e = *git_index_get_byindex (idx, i);

      if (e.mode == GIT_FILEMODE_COMMIT)
        continue;
      if (esbx_git_index_stat (diffd, e.path, &e, err) < 0)
        goto out;
      if (git_index_add (idx, &e) < 0)
        {
          esbx_make_error (err, 0, "index `%s`: %s", e.path, esbx_git_error ());
          goto out;
        }
    }
  if (git_index_write (idx) < 0)
    {
      esbx_make_error (err, 0, "write the index: %s", esbx_git_error ());
      goto out;
    }
  ret = 0;
out:
  git_index_free (idx);
  return ret;
}

int
esbx_git_pack_write (git_repository *repo, const git_oid *commit, const git_oid *hide,
                     const char *dir, esbx_error_t *err)
{
  git_packbuilder *pb = NULL;
  git_revwalk *walk = NULL;
  int ret = -1;

  if (git_packbuilder_new (&pb, repo) < 0 || git_revwalk_new (&walk, repo) < 0
      || git_revwalk_push (walk, commit) < 0 || (hide && git_revwalk_hide (walk, hide) < 0)
      || git_packbuilder_insert_walk (pb, walk) < 0
      || git_packbuilder_write (pb, dir, 0444, NULL, NULL) < 0)
    esbx_make_error (err, 0, "pack the history: %s", esbx_git_error ());
  else
    ret = 0;
  git_revwalk_free (walk);
  git_packbuilder_free (pb);
  return ret;
}

int
esbx_git_repo_write (git_repository *repo, const git_oid *commit, git_tree *tree, int diffd,
                     bool first, esbx_error_t *err)
{
  if (mkdirs (diffd, err) < 0)
    return -1;
  if (first
      && (esbx_write_new_file_at (diffd, ".git/config", config_text, strlen (config_text), 0644,
                                  err)
              < 0
          || esbx_write_new_file_at (diffd, ".git/HEAD", "ref: refs/heads/main\n", 21, 0644, err)
                 < 0))
    return -1;
  {
    _cleanup_free_ char *dir = esbx_git_fd_path (diffd, ".git/objects/pack");
    if (esbx_git_pack_write (repo, commit, NULL, dir, err) < 0)
      return -1;
  }
  return write_index (tree, diffd, err);
}
