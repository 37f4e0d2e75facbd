/* Writing a new layer: its diff from a change set, its record, and the
   crash-safe append to the stack.
 *
 * Durability order: the diff is written whole without fsyncs and flushed by
 * one syncfs of the store's filesystem (every file and directory of it at
 * once; one fsync per file cost a synchronous journal commit each,
 * docs/PERFORMANCE.md), then record.json (temp, fsync, rename), then the
 * layer directory is renamed into layers/ and layers/ is fsynced, then the
 * stack file is replaced (temp, fsync, rename) and the project directory
 * fsynced.  A crash before the last rename leaves the old head and a layer
 * that no stack names, which gc removes.  */
#include "internal.h"
#include "failpoint.h"
#include "fs.h"
#include "hash.h"
#include "inodes.h"
#include "path.h"
#include "text.h"
#include "utils.h"

#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>

/* Make the parents of REL in the layer, copying mode and owner from SRC (the
   session's upper, which holds every parent of a change).  */
static int
make_parents (int srcfd, int dstfd, const char *rel, esbx_error_t *err)
{
  _cleanup_free_ char *copy = xstrdup (rel);
  char *p = strrchr (copy, '/');

  /* Changes come parents first: the direct parent usually exists, and
     checking every prefix of every path would cost the cube of the depth
     of a deep tree.  */
  if (p == NULL)
    return 0;
  *p = '\0';
  if (esbx_exists_at (dstfd, copy))
    return 0;
  *p = '/';
  for (p = strchr (copy, '/'); p; p = strchr (p + 1, '/'))
    {
      struct stat st;
      _cleanup_close_ int fd = -1;

      *p = '\0';
      if (!esbx_exists_at (dstfd, copy))
        {
          fd = esbx_open_beneath (srcfd, copy, O_PATH | O_DIRECTORY, 0, err);
          if (fd < 0 || fstat (fd, &st) < 0)
            return -1;
          if (mkdirat (dstfd, copy, st.st_mode & 07777) < 0 && errno != EEXIST)
            return esbx_make_error (err, errno, "mkdir `/%s`", copy);
          fchownat (dstfd, copy, st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW);
          fchmodat (dstfd, copy, st.st_mode & 07777, 0);
        }
      *p = '/';
    }
  return 0;
}

/* A layer being filled from a session's upper.  */
struct stage
{
  int srcfd;
  int dstfd;
  struct timespec now;
  struct esbx_changeset *cs;
  struct esbx_inode_set linked; /* files of the upper with more than one name */
};

/* Entry I, a file whose source IN (ST) has other names: when one of them
   was written before, link to it instead of copying.  Returns 1 when
   linked, 0 when the caller copies (and this is the first name).  The
   record notes the link from what the upper holds now, whatever the scan
   saw.  */
static int
link_entry (struct stage *sg, size_t i, const struct stat *st, esbx_error_t *err)
{
  struct esbx_change *c = &sg->cs->v[i];
  const struct esbx_inode *first;
  const struct esbx_change *f;
  _cleanup_close_ int pfd = -1;
  _cleanup_free_ char *base = NULL;
  bool found;

  free (c->link);
  c->link = NULL;
  if (st->st_nlink < 2)
    return 0;
  first = esbx_inode_set_add (&sg->linked, st->st_dev, st->st_ino, c->path, i, &found);
  if (!found)
    return 0;
  f = &sg->cs->v[first->index];
  pfd = esbx_open_parent_beneath (sg->dstfd, f->path + 1, &base, err);
  if (pfd < 0)
    return -1;
  if (linkat (pfd, base, sg->dstfd, c->path + 1, 0) < 0)
    return esbx_make_error (err, errno, "link `%s` to `%s`", c->path, f->path);
  c->link = xstrdup (f->path);
  memcpy (c->sha256, f->sha256, 65);
  c->size = f->size;
  c->mode = f->mode;
  c->stripped = f->stripped;
  return 1;
}

/* Every entry of a published layer gets the time of the publish as its
   mtime (README, "Ignore rules and file times"): a source edited in a
   session before another session built and published its object file
   must still look newer than that object file to make.  */
static int
write_entry (struct stage *sg, size_t i, esbx_error_t *err)
{
  int srcfd = sg->srcfd, dstfd = sg->dstfd;
  struct esbx_change *c = &sg->cs->v[i];
  const struct timespec *now = &sg->now;
  const char *rel = c->path + 1;
  int linked;
  _cleanup_close_ int in = -1;
  _cleanup_close_ int out = -1;
  _cleanup_close_ int pfd = -1;
  _cleanup_free_ char *base = NULL;
  struct stat st;
  off_t size;

  if (make_parents (srcfd, dstfd, rel, err) < 0)
    return -1;
  if (c->kind == ESBX_DELETED)
    {
      if (mknodat (dstfd, rel, S_IFCHR | 0, makedev (0, 0)) < 0)
        return esbx_make_error (err, errno, "whiteout `%s`", c->path);
      return 0;
    }
  pfd = esbx_open_parent_beneath (srcfd, rel, &base, err);
  if (pfd < 0)
    return -1;
  if (fstatat (pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return esbx_make_error (err, errno, "`%s` changed while publishing", c->path);
  switch (c->type)
    {
    case ESBX_TYPE_DIR:
      if (!S_ISDIR (st.st_mode))
        return esbx_make_error (err, 0, "`%s` changed type while publishing", c->path);
      if (mkdirat (dstfd, rel, c->mode) < 0 && errno != EEXIST)
        return esbx_make_error (err, errno, "mkdir `%s`", c->path);
      fchmodat (dstfd, rel, c->mode, 0);
      break;
    case ESBX_TYPE_SYMLINK:
      if (symlinkat (c->target, dstfd, rel) < 0)
        return esbx_make_error (err, errno, "symlink `%s`", c->path);
      break;
    case ESBX_TYPE_FIFO:
      if (mkfifoat (dstfd, rel, c->mode) < 0)
        return esbx_make_error (err, errno, "mkfifo `%s`", c->path);
      break;
    case ESBX_TYPE_FILE:
      in = esbx_open_regular_at (pfd, base, err);
      if (in < 0)
        return esbx_error_wrap (err, "`%s` changed while publishing", c->path);
      if (fstat (in, &st) < 0)
        return esbx_make_error (err, errno, "stat `%s`", c->path);
      linked = link_entry (sg, i, &st, err);
      if (linked < 0)
        return -1;
      if (linked)
        return 0;
      out = TEMP_FAILURE_RETRY (
          openat (dstfd, rel, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
      if (out < 0)
        return esbx_make_error (err, errno, "create `%s`", c->path);
      /* The record describes what was copied, even if the session wrote the
         file again after the scan.  */
      if (esbx_copy_hash_fd (in, out, c->sha256, &size, err) < 0)
        return esbx_error_wrap (err, "copy `%s`", c->path);
      c->size = size;
      if (fchmod (out, c->mode) < 0)
        return esbx_make_error (err, errno, "write `%s`", c->path);
      break;
    case ESBX_TYPE_NONE:
      return esbx_make_error (err, 0, "`%s`: unknown type", c->path);
    }
  fchownat (dstfd, rel, st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW);
  {
    struct timespec ts[2] = { *now, *now };
    utimensat (dstfd, rel, ts, AT_SYMLINK_NOFOLLOW);
  }
  return 0;
}

int
esbx_layer_stage (esbx_store_t *store, const char *project, int srcfd, struct esbx_changeset *cs,
                  struct esbx_staged *out, esbx_error_t *err)
{
  _cleanup_free_ char *hex = esbx_random_hex (8);
  _cleanup_free_ char *rel = esbx_project_file (project, "tmp/%s", hex);
  _cleanup_free_ char *tmpdir = esbx_project_file (project, "tmp");
  _cleanup_close_ int fd = -1;
  _cleanup_close_ int diff = -1;
  struct stage sg = { .srcfd = srcfd, .cs = cs };
  size_t i;

  memset (out, 0, sizeof *out);
  out->lockfd = -1;
  if (mkdirat (store->rootfd, tmpdir, 0700) < 0 && errno != EEXIST)
    return esbx_make_error (err, errno, "mkdir `%s`", tmpdir);
  /* gc leaves staged layers alone while this lock is held.  */
  fd = esbx_mkdir_locked (store, rel, err);
  if (fd < 0)
    return -1;
  out->rel = xstrdup (rel);
  if (mkdirat (fd, "diff", 0755) < 0)
    {
      esbx_make_error (err, errno, "mkdir `%s/diff`", rel);
      goto fail;
    }
  diff = esbx_open_dir_at (fd, "diff", err);
  if (diff < 0)
    goto fail;
  clock_gettime (CLOCK_REALTIME, &sg.now);
  sg.dstfd = diff;
  for (i = 0; srcfd >= 0 && i < cs->n; i++)
    if (write_entry (&sg, i, err) < 0)
      goto fail;
  /* An import fills the diff afterwards and flushes it then
     (esbx_layer_sync).  */
  if (srcfd >= 0 && esbx_syncfs (diff, rel, err) < 0)
    goto fail;
  esbx_inode_set_free (&sg.linked);
  out->lockfd = take_fd (&fd);
  return 0;

fail:
  esbx_inode_set_free (&sg.linked);
  esbx_layer_unstage (store, out);
  return -1;
}

int
esbx_layer_sync (int diffd, esbx_error_t *err)
{
  return esbx_syncfs (diffd, "staged layer", err);
}

void
esbx_layer_unstage (esbx_store_t *store, struct esbx_staged *st)
{
  esbx_error_t ignored = NULL;

  if (st->rel && esbx_rm_rf_at (store->rootfd, st->rel, &ignored) < 0)
    esbx_error_free (&ignored);
  if (st->lockfd >= 0)
    close (st->lockfd);
  free (st->rel);
  memset (st, 0, sizeof *st);
  st->lockfd = -1;
}

int
esbx_project_lock (esbx_store_t *store, const char *project, esbx_error_t *err)
{
  _cleanup_free_ char *path = esbx_project_file (project, "lock");
  int fd = esbx_lock_at (store->rootfd, path, true, true, err);

  if (fd < 0)
    return esbx_error_wrap (err, "project `%s`", project);
  return fd;
}

char *
esbx_layer_name (struct esbx_layer *l, char *const *ids, size_t n, size_t *len)
{
  char sha[ESBX_SHA256_HEX_LEN + 1];
  char *git_commit = l->git_commit, *text;
  json_t *j;

  free (l->parent);
  l->parent = n ? xstrdup (ids[n - 1]) : NULL;
  l->index = (int64_t)n;
  if (l->created == NULL)
    l->created = esbx_rfc3339_now ();
  /* The id names the content: parent, time, provenance and changes; a git
     commit is made after it (its trailer names the layer).  */
  free (l->id);
  l->id = xstrdup ("");
  l->git_commit = NULL;
  j = esbx_layer_to_json (l);
  text = json_serialize (j, false, len);
  json_free (j);
  esbx_sha256_buf (text, *len, sha);
  free (text);
  free (l->id);
  l->id = xstrndup (sha, 16);
  l->git_commit = git_commit;
  j = esbx_layer_to_json (l);
  text = json_serialize (j, true, len);
  json_free (j);
  return text;
}

int
esbx_layer_commit (esbx_store_t *store, const char *project, struct esbx_staged *st,
                   struct esbx_layer *l, char **ids, size_t n, esbx_error_t *err)
{
  if (esbx_layer_install (store, project, st, l, ids, n, err) < 0)
    return -1;
  {
    char **next = xmalloc ((n + 2) * sizeof (char *));
    int r;

    if (n > 0)
      memcpy (next, ids, n * sizeof (char *));
    next[n] = l->id;
    next[n + 1] = NULL;
    r = esbx_project_write_stack (store, project, next, n + 1, err);
    free (next);
    return r;
  }
}

int
esbx_layer_install (esbx_store_t *store, const char *project, struct esbx_staged *st,
                    struct esbx_layer *l, char **ids, size_t n, esbx_error_t *err)
{
  _cleanup_free_ char *text = NULL, *dest = NULL, *layers = NULL;
  _cleanup_close_ int fd = -1;
  _cleanup_close_ int lfd = -1;
  size_t len;

  text = esbx_layer_name (l, ids, n, &len);
  fd = esbx_open_dir_at (store->rootfd, st->rel, err);
  if (fd < 0)
    return -1;
  if (esbx_write_file_atomic_at (fd, "record.json", text, len, 0644, err) < 0)
    return -1;
  esbx_failpoint ("layer-record-written");
  layers = esbx_project_file (project, "layers");
  dest = xasprintf ("%s/%s", layers, l->id);
  if (renameat2 (store->rootfd, st->rel, store->rootfd, dest, RENAME_NOREPLACE) < 0)
    return esbx_make_error (err, errno, "project `%s`: install layer `%s`", project, l->id);
  free (st->rel);
  st->rel = NULL;
  lfd = esbx_open_dir_at (store->rootfd, layers, err);
  if (lfd < 0 || fsync (lfd) < 0)
    return lfd < 0 ? -1 : esbx_make_error (err, errno, "fsync `%s`", layers);
  esbx_failpoint ("layer-installed");
  return 0;
}

/* Is PATH (a directory above a change of CS) in the layer only to hold
   what is below it?  */
static bool
implicit_dir (const struct esbx_changeset *cs, const char *path)
{
  return esbx_changeset_find (cs, path) == NULL;
}

int
esbx_layer_adopt_parents (esbx_store_t *store, const char *project, struct esbx_staged *st,
                          const struct esbx_changeset *cs, const char *head, bool *changed,
                          esbx_error_t *err)
{
  _cleanup_free_ char *diffrel = xasprintf ("%s/diff", st->rel);
  _cleanup_free_ char *last = xstrdup ("");
  _cleanup_close_ int diffd = -1;
  struct esbx_stack view = { 0 };
  size_t i;
  int ret = -1;

  if (changed)
    *changed = false;
  diffd = esbx_open_dir_at (store->rootfd, diffrel, err);
  if (diffd < 0 || esbx_stack_open (store, project, head, NULL, &view, err) < 0)
    return -1;
  for (i = 0; i < cs->n; i++)
    {
      _cleanup_free_ char *dir = xstrdup (cs->v[i].path);
      char *slash = strrchr (dir, '/');

      if (slash == dir)
        continue;
      *slash = '\0';
      /* Changes come in path order: a directory's changes follow it, so
         the parents of the last one were done.  */
      if (strcmp (dir, last) == 0)
        continue;
      free (last);
      last = xstrdup (dir);
      for (char *p = strchr (dir + 1, '/');; p = strchr (p + 1, '/'))
        {
          struct stat have, want;
          _cleanup_close_ int fd = -1;
          size_t layer;

          if (p)
            *p = '\0';
          if (implicit_dir (cs, dir) && esbx_stack_lookup (&view, dir + 1, &layer, &want) == 1
              && S_ISDIR (want.st_mode))
            {
              fd = esbx_open_beneath (diffd, dir + 1, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0, err);
              if (fd < 0 || fstat (fd, &have) < 0)
                goto out;
              if ((have.st_mode & 07777) != (want.st_mode & 07777) || have.st_uid != want.st_uid
                  || have.st_gid != want.st_gid)
                {
                  if (fchown (fd, want.st_uid, want.st_gid) < 0
                      || fchmod (fd, want.st_mode & 07777) < 0)
                    {
                      esbx_make_error (err, errno, "staged layer: mode of `%s`", dir);
                      goto out;
                    }
                  if (changed)
                    *changed = true;
                }
            }
          if (p == NULL)
            break;
          *p = '/';
        }
    }
  ret = 0;
out:
  esbx_stack_close (&view);
  return ret;
}
