/* liblayerstore: export a session or a project layer as a tar of the whole
 * tree or as an OCI layer (the change set, with whiteouts).
 *
 * Sources:
 *   tar, session          the session's mounted merged view
 *   tar, PROJECT@LAYER    the layers up to LAYER read in userspace through
 *                         esbx_stack (lookup.c) rather than a temporary
 *                         overlay mount: nothing to unmount or leak when the
 *                         export fails or the process dies, and overlayfs's
 *                         "two lowers at least without an upper" rule does not
 *                         apply to one-layer projects
 *   oci-layer, session    the session's change set, content from its upper dir
 *                         (for a fork: the view of its snapshot and upper)
 *   oci-layer, LAYER      the layer's own diff directory, converted: char
 *                         device 0/0 -> `.wh.NAME`, opaque directory ->
 *                         `.wh..wh..opq`
 *
 * Session content is untrusted: every walk goes by directory fd with
 * O_NOFOLLOW (or esbx_open_beneath), symlinks are stored as symlinks, device
 * nodes are refused, sockets skipped with a warning, setuid/setgid bits
 * stripped with a warning.  Extended attributes are not exported: the
 * trusted.overlay.* ones are overlayfs bookkeeping, not content.  Names of
 * one regular file (hard links) are stored as GNU tar does: the first in
 * archive order with the data, the others as hard-link entries naming it.
 *
 * Output is deterministic: entries in sorted order with parents first,
 * numeric owners only, no atime/ctime, whiteouts with mtime 0.  A file that
 * changes size while a live session is exported keeps the size it had when
 * opened (truncated or padded with zeros), so the archive stays well formed.
 *
 * FILE is written as a temp file next to it and renamed into place; "-"
 * streams to stdout.  */
#include "archive_load.h"
#include "copy.h"
#include "fs.h"
#include "inodes.h"
#include "internal.h"
#include "layerstore.h"
#include "log.h"
#include "path.h"
#include "text.h"
#include "utils.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <libgen.h>
#include <locale.h>
#include <search.h>
#include <string.h>
#include <sys/stat.h>

#define COPY_BUF        (64 * 1024)
#define WHITEOUT_PREFIX ".wh."
#define OPAQUE_MARKER   ".wh..wh..opq"

struct exporter
{
  struct archive *a;
  void *emitted; /* tsearch tree of paths already written (oci-layer) */
  char *buf;
  /* Regular files with several names, by the first name written.  */
  struct esbx_inode_set linked;
  struct esbx_progress *progress;    /* entries and bytes written */
  locale_t utf8, old;                /* this thread's locale while it writes */
  bool no_git;                       /* a git project's tree: the root's .git stays out */
  uint32_t userns_uid, userns_count; /* a session's view in a user namespace (userns.c) */
};

/* Is NAME at REL the repository a git project's layers carry?  */
static bool
skipped (const struct exporter *ex, const char *rel, const char *name)
{
  return ex->no_git && rel[0] == '\0' && strcmp (name, ".git") == 0;
}

/* The archive writer on FD, its copy buffer and a UTF-8 locale for names:
   libarchive converts names through the locale's charset, and esbxd is
   multithreaded, so this thread's only.  */
static int
exporter_begin (struct exporter *ex, int fd, esbx_error_t *err)
{
  ex->utf8 = newlocale (LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
  if (ex->utf8)
    ex->old = uselocale (ex->utf8);
  ex->buf = xmalloc (COPY_BUF);
  ex->a = archive_write_new ();
  archive_write_set_format_pax_restricted (ex->a);
  if (archive_write_open_fd (ex->a, fd) != ARCHIVE_OK)
    return esbx_make_error (err, archive_errno (ex->a), "write: %s", archive_error_string (ex->a));
  return 0;
}

static int
exporter_close (struct exporter *ex, esbx_error_t *err)
{
  if (archive_write_close (ex->a) != ARCHIVE_OK)
    return esbx_make_error (err, archive_errno (ex->a), "write: %s", archive_error_string (ex->a));
  return 0;
}

static void
exporter_end (struct exporter *ex)
{
  archive_write_free (ex->a);
  if (ex->utf8)
    {
      uselocale (ex->old);
      freelocale (ex->utf8);
    }
  free (ex->buf);
  tdestroy (ex->emitted, free);
  esbx_inode_set_free (&ex->linked);
}

static int
cmp_strp (const void *a, const void *b)
{
  return strcmp (*(char *const *)a, *(char *const *)b);
}

static int
cmp_str (const void *a, const void *b)
{
  return strcmp (a, b);
}

static bool
emitted (struct exporter *ex, const char *rel)
{
  return tfind (rel, &ex->emitted, cmp_str) != NULL;
}

static void
mark (struct exporter *ex, const char *rel)
{
  char *copy = xstrdup (rel);

  if (*(char **)tsearch (copy, &ex->emitted, cmp_str) != copy)
    free (copy);
}

static void
set_path (struct archive_entry *e, const char *rel, bool dir)
{
  _cleanup_free_ char *p = dir ? xasprintf ("%s/", rel) : xstrdup (rel);

  /* Through the UTF-8 setter so that pax records the name as is, whatever
     the process locale; other bytes go in raw (pax hdrcharset=BINARY).  */
  if (esbx_utf8_valid (p, strlen (p)))
    archive_entry_set_pathname_utf8 (e, p);
  else
    archive_entry_set_pathname (e, p);
}

static int
write_header (struct exporter *ex, struct archive_entry *e, const char *rel, esbx_error_t *err)
{
  _cleanup_free_ char *shown = NULL;

  if (archive_write_header (ex->a, e) >= ARCHIVE_WARN)
    {
      esbx_progress_add (ex->progress, 0);
      return 0;
    }
  shown = esbx_quote_path (rel);
  return esbx_make_error (err, archive_errno (ex->a), "write `/%s`: %s", shown,
                          archive_error_string (ex->a));
}

/* The data extents of a sparse file, for its archive entry.  */
struct extents
{
  off_t (*v)[2];
  size_t n, cap;
};

static int
add_extent (void *ctx, off_t offset, off_t length)
{
  struct extents *x = ctx;

  if (x->n == x->cap)
    {
      x->cap = x->cap ? 2 * x->cap : 16;
      x->v = xrealloc (x->v, x->cap * sizeof *x->v);
    }
  x->v[x->n][0] = offset;
  x->v[x->n][1] = length;
  x->n++;
  return 0;
}

/* Bytes at DONE .. TO of FD into the archive: read, or zeros in a hole
   (which the archive writer does not store) and past the end of a file that
   shrank since the header (padded to the size announced).  */
static int
write_span (struct exporter *ex, int fd, int64_t *done, int64_t to, bool hole, const char *rel,
            esbx_error_t *err)
{
  ssize_t n;

  while (*done < to)
    {
      size_t want = (size_t)(to - *done < COPY_BUF ? to - *done : COPY_BUF);

      n = 0;
      if (!hole)
        {
          n = TEMP_FAILURE_RETRY (pread (fd, ex->buf, want, (off_t)*done));
          if (n < 0)
            return esbx_make_error (err, errno, "read `/%s`", rel);
        }
      if (n == 0)
        {
          memset (ex->buf, 0, want);
          n = (ssize_t)want;
        }
      if (archive_write_data (ex->a, ex->buf, (size_t)n) < 0)
        return esbx_make_error (err, archive_errno (ex->a), "write `/%s`: %s", rel,
                                archive_error_string (ex->a));
      *done += n;
      if (ex->progress)
        ex->progress->bytes += (uint64_t)n;
    }
  return 0;
}

/* The data of FD, SIZE bytes; X: its data extents when the entry is sparse
   (NULL: all of it is data).  */
static int
write_file_data (struct exporter *ex, int fd, int64_t size, const struct extents *x,
                 const char *rel, esbx_error_t *err)
{
  int64_t done = 0;
  size_t i;

  for (i = 0; x && i < x->n; i++)
    if (write_span (ex, fd, &done, x->v[i][0], true, rel, err) < 0
        || write_span (ex, fd, &done, x->v[i][0] + x->v[i][1], false, rel, err) < 0)
      return -1;
  return write_span (ex, fd, &done, size, x != NULL, rel, err);
}

/* A regular file with holes (fewer blocks than its size) becomes a sparse
   entry: its data extents in the entry, holes not stored (pax GNU.sparse
   1.0, which GNU tar, bsdtar and Go's archive/tar read).  */
static int
sparse_map (struct archive_entry *e, int fd, const struct stat *st, struct extents *x,
            const char *rel, esbx_error_t *err)
{
  size_t i;

  if (st->st_size == 0 || (int64_t)st->st_blocks * 512 >= (int64_t)st->st_size)
    return 0;
  if (esbx_file_extents (fd, st->st_size, add_extent, x, err) < 0)
    return esbx_error_wrap (err, "`/%s`", rel);
  for (i = 0; i < x->n; i++)
    archive_entry_sparse_add_entry (e, x->v[i][0], x->v[i][1]);
  /* libarchive keeps no map of one extent covering the whole file.  */
  return archive_entry_sparse_count (e) > 0 ? 1 : 0;
}

/* The archive path of an earlier name of the regular file ST, or NULL
   when REL is its first name written (or its only one).  */
static const char *
first_name (struct exporter *ex, const struct stat *st, const char *rel)
{
  const struct esbx_inode *i;
  bool found;

  if (st->st_nlink < 2)
    return NULL;
  i = esbx_inode_set_add (&ex->linked, st->st_dev, st->st_ino, rel, 0, &found);
  return found ? i->path : NULL;
}

/* An id as the layers have it: a session's merged view in a user
   namespace shows its ids moved up by the range's first.  */
static uint32_t
shifted (const struct exporter *ex, uint32_t id)
{
  if (ex->userns_count && id >= ex->userns_uid && id - ex->userns_uid < ex->userns_count)
    return id - ex->userns_uid;
  return id;
}

/* Write the object NAME of directory DFD as archive path REL.  Returns 1 when
   written, 0 when skipped (a socket).  Not inlined: its buffer must not sit
   in every frame of the walks' recursion.  */
static __attribute__ ((noinline)) int
emit_object (struct exporter *ex, int dfd, const char *name, const char *rel, esbx_error_t *err)
{
  _cleanup_free_ char *shown = esbx_quote_path (rel);
  _cleanup_close_ int fd = -1;
  struct archive_entry *e = NULL;
  struct extents x = { 0 };
  const char *first = NULL;
  char target[4097];
  int sparse = 0;
  struct stat st;
  mode_t mode;
  ssize_t n;
  int ret = -1;

  if (fstatat (dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return esbx_make_error (err, errno, "stat `/%s`", shown);
  if (S_ISSOCK (st.st_mode))
    {
      esbx_warn ("export: `/%s` is a socket: skipped", shown);
      return 0;
    }
  if (S_ISREG (st.st_mode))
    {
      /* The size and mode come from the opened file, which is what is
         copied.  */
      fd = esbx_open_regular_at (dfd, name, err);
      if (fd < 0)
        return esbx_error_wrap (err, "`/%s` changed while exporting", shown);
      if (fstat (fd, &st) < 0)
        return esbx_make_error (err, errno, "stat `/%s`", shown);
    }
  else if (!S_ISDIR (st.st_mode) && !S_ISLNK (st.st_mode) && !S_ISFIFO (st.st_mode))
    return esbx_make_error (err, 0, "`/%s` is a device node: refused", shown);

  mode = st.st_mode & 07777;
  if (!S_ISLNK (st.st_mode) && (mode & (S_ISUID | S_ISGID)))
    {
      esbx_warn ("export: stripped setuid/setgid bits from `/%s`", shown);
      mode &= ~(mode_t)(S_ISUID | S_ISGID);
    }

  e = archive_entry_new ();
  set_path (e, rel, S_ISDIR (st.st_mode));
  archive_entry_set_filetype (e, st.st_mode & S_IFMT);
  archive_entry_set_perm (e, mode);
  archive_entry_set_uid (e, shifted (ex, st.st_uid));
  archive_entry_set_gid (e, shifted (ex, st.st_gid));
  archive_entry_set_mtime (e, st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
  if (S_ISREG (st.st_mode) && (first = first_name (ex, &st, rel)) != NULL)
    {
      if (esbx_utf8_valid (first, strlen (first)))
        archive_entry_set_hardlink_utf8 (e, first);
      else
        archive_entry_set_hardlink (e, first);
      archive_entry_set_size (e, 0);
      close (take_fd (&fd)); /* its data is the first name's */
    }
  else if (S_ISREG (st.st_mode))
    {
      archive_entry_set_size (e, st.st_size);
      sparse = sparse_map (e, fd, &st, &x, shown, err);
      if (sparse < 0)
        goto out;
    }
  if (S_ISLNK (st.st_mode))
    {
      n = readlinkat (dfd, name, target, sizeof target - 1);
      if (n < 0)
        {
          esbx_make_error (err, errno, "readlink `/%s`", shown);
          goto out;
        }
      target[n] = '\0';
      if (esbx_utf8_valid (target, (size_t)n))
        archive_entry_set_symlink_utf8 (e, target);
      else
        archive_entry_set_symlink (e, target);
    }
  if (write_header (ex, e, rel, err) < 0)
    goto out;
  if (fd >= 0 && write_file_data (ex, fd, st.st_size, sparse ? &x : NULL, shown, err) < 0)
    goto out;
  ret = 1;

out:
  free (x.v);
  archive_entry_free (e);
  return ret;
}

/* An empty regular file standing for a whiteout or an opaque marker.  */
static int
emit_marker (struct exporter *ex, const char *dir, const char *name, esbx_error_t *err)
{
  _cleanup_free_ char *rel = dir[0] ? xasprintf ("%s/%s", dir, name) : xstrdup (name);
  struct archive_entry *e = archive_entry_new ();
  int ret;

  set_path (e, rel, false);
  archive_entry_set_filetype (e, AE_IFREG);
  archive_entry_set_perm (e, 0644);
  archive_entry_set_size (e, 0);
  archive_entry_set_mtime (e, 0, 0);
  ret = write_header (ex, e, rel, err);
  archive_entry_free (e);
  if (ret == 0)
    mark (ex, rel);
  return ret;
}

static char *
child_path (const char *rel, const char *name)
{
  return rel[0] ? xasprintf ("%s/%s", rel, name) : xstrdup (name);
}

/* ---- tar of a mounted tree --------------------------------------------- */

/* Archive paths are at most 4,095 bytes, as change sets' (scan.c): a
   deeper tree fails with its cause, not with the limits of the process
   (open files, stack).  */
static int
check_path_length (const char *rel, size_t depth, esbx_error_t *err)
{
  _cleanup_free_ char *shown = NULL;

  if (strlen (rel) < 4095)
    return 0;
  shown = esbx_quote_path (rel);
  return esbx_make_error (
      err, 0, "`/%.64s...`: path too long (more than 4,095 bytes, %zu levels deep)", shown, depth);
}

typedef int (*walk_fn) (struct exporter *ex, int *dfd, const char *rel, size_t depth,
                        esbx_error_t *err);

/* WALK the directory NAME of *DFD, at CHILD one level below DEPTH.  Deep
   trees: *DFD may be given back meanwhile (esbx_dir_release).  */
static int
descend (struct exporter *ex, int *dfd, const char *name, const char *child, size_t depth,
         walk_fn walk, esbx_error_t *err)
{
  _cleanup_close_ int sub = -1;
  struct esbx_held_dir held;

  sub = TEMP_FAILURE_RETRY (openat (*dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (sub < 0)
    return esbx_make_error (err, errno, "open `/%s`", child);
  if (esbx_dir_release (dfd, depth, &held, err) < 0 || walk (ex, &sub, child, depth + 1, err) < 0
      || esbx_dir_retake (dfd, sub, &held, err) < 0)
    return -1;
  return 0;
}

static int
walk_tree (struct exporter *ex, int *dfd, const char *rel, size_t depth, esbx_error_t *err)
{
  _cleanup_strv_ char **names = esbx_list_dir_at (*dfd, ".", err);
  char **p;

  if (names == NULL)
    return -1;
  for (p = names; *p; p++)
    {
      _cleanup_free_ char *child = child_path (rel, *p);
      struct stat st;
      int r;

      if (skipped (ex, rel, *p))
        continue;
      if (check_path_length (child, depth + 1, err) < 0)
        return -1;
      r = emit_object (ex, *dfd, *p, child, err);
      if (r <= 0)
        {
          if (r < 0)
            return -1;
          continue;
        }
      if (fstatat (*dfd, *p, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR (st.st_mode))
        continue;
      if (descend (ex, dfd, *p, child, depth, walk_tree, err) < 0)
        return -1;
    }
  return 0;
}

static int
export_session_tar (struct exporter *ex, esbx_store_t *store, const char *name, esbx_error_t *err)
{
  _cleanup_free_ char *merged = NULL;
  _cleanup_close_ int rootfd = -1;

  if (esbx_session_mount (store, name, err) < 0)
    return -1;
  {
    struct esbx_userns u;

    if (esbx_userns_load (store, name, &u, err) < 0)
      return -1;
    if (u.on)
      {
        ex->userns_uid = u.uid;
        ex->userns_count = u.count;
      }
    esbx_userns_clear (&u);
  }
  merged = esbx_session_merged (store, name);
  rootfd = esbx_open_dir_at (AT_FDCWD, merged, err);
  if (rootfd < 0)
    return -1;
  if (walk_tree (ex, &rootfd, "", 0, err) < 0)
    return esbx_error_wrap (err, "session `%s`", name);
  return 0;
}

/* ---- tar of a project layer (userspace merge) ------------------------- */

static int
walk_stack (struct exporter *ex, struct esbx_stack *stk, const char *rel, esbx_error_t *err)
{
  _cleanup_strv_ char **names = esbx_stack_readdir (stk, rel, err);
  char **p;

  if (names == NULL)
    return -1;
  esbx_sort (names, strv_len (names), sizeof (char *), cmp_strp);
  for (p = names; *p; p++)
    {
      _cleanup_free_ char *child = child_path (rel, *p);
      _cleanup_free_ char *base = NULL;
      _cleanup_close_ int pfd = -1;
      struct stat st;
      size_t layer;
      int r;

      if (skipped (ex, rel, *p) || esbx_stack_lookup (stk, child, &layer, &st) != 1)
        continue;
      pfd = esbx_open_parent_beneath (stk->fds[layer], child, &base, err);
      if (pfd < 0)
        return -1;
      r = emit_object (ex, pfd, base, child, err);
      if (r < 0)
        return -1;
      /* Not held while below: one fd per level would not do for deep
         trees.  */
      close (take_fd (&pfd));
      if (r > 0 && S_ISDIR (st.st_mode) && walk_stack (ex, stk, child, err) < 0)
        return -1;
    }
  return 0;
}

static int
export_layer_tar (struct exporter *ex, esbx_store_t *store, const char *project, const char *id,
                  esbx_error_t *err)
{
  struct esbx_stack stk;
  int ret;

  if (esbx_stack_open (store, project, id, NULL, &stk, err) < 0)
    return -1;
  ret = walk_stack (ex, &stk, "", err);
  esbx_stack_close (&stk);
  return ret;
}

/* ---- OCI layer of a project layer ------------------------------------- */

static int
walk_diff (struct exporter *ex, int *dfd, const char *rel, size_t depth, esbx_error_t *err)
{
  _cleanup_strv_ char **names = esbx_list_dir_at (*dfd, ".", err);
  char **p;

  if (names == NULL)
    return -1;
  for (p = names; *p; p++)
    {
      _cleanup_free_ char *child = child_path (rel, *p);
      _cleanup_free_ char *wh = NULL;
      struct stat st;

      if (skipped (ex, rel, *p))
        continue;
      if (check_path_length (child, depth + 1, err) < 0)
        return -1;
      if (fstatat (*dfd, *p, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return esbx_make_error (err, errno, "stat `/%s`", child);
      if (esbx_is_whiteout (&st))
        {
          wh = xasprintf (WHITEOUT_PREFIX "%s", *p);
          if (emit_marker (ex, rel, wh, err) < 0)
            return -1;
          continue;
        }
      if (emit_object (ex, *dfd, *p, child, err) < 0)
        return -1;
      if (!S_ISDIR (st.st_mode))
        continue;
      if (esbx_is_opaque_at (*dfd, *p) && emit_marker (ex, child, OPAQUE_MARKER, err) < 0)
        return -1;
      if (descend (ex, dfd, *p, child, depth, walk_diff, err) < 0)
        return -1;
    }
  return 0;
}

static int
export_layer_oci (struct exporter *ex, esbx_store_t *store, const char *project, const char *id,
                  esbx_error_t *err)
{
  _cleanup_free_ char *diff = esbx_layer_diff_path (store, project, id);
  _cleanup_close_ int dfd = esbx_open_dir_at (AT_FDCWD, diff, err);

  if (dfd < 0)
    return -1;
  return walk_diff (ex, &dfd, "", 0, err);
}

/* ---- OCI layer of a session ------------------------------------------- */

/* Write REL from the upper directory once, parents first: the change set
   leaves out directories that were only copied up, but a layer tar lists
   them so that extractors create them with their modes.  */
static int
emit_upper (struct exporter *ex, int upperfd, const char *rel, esbx_error_t *err)
{
  _cleanup_free_ char *copy = xstrdup (rel);
  _cleanup_free_ char *base = NULL;
  _cleanup_close_ int pfd = -1;
  char *slash;

  for (slash = strchr (copy, '/'); slash; slash = strchr (slash + 1, '/'))
    {
      *slash = '\0';
      if (!emitted (ex, copy) && emit_upper (ex, upperfd, copy, err) < 0)
        return -1;
      *slash = '/';
    }
  if (emitted (ex, rel))
    return 0;
  pfd = esbx_open_parent_beneath (upperfd, rel, &base, err);
  if (pfd < 0 || emit_object (ex, pfd, base, rel, err) < 0)
    return -1;
  mark (ex, rel);
  return 0;
}

static int
export_session_oci (struct exporter *ex, esbx_store_t *store, const char *name, esbx_error_t *err)
{
  struct esbx_changeset cs = { 0 };
  struct esbx_session *s = NULL;
  _cleanup_close_ int upperfd = -1;
  int ret = -1;
  size_t i;

  /* The scan's directory: the upper, or for a fork the view of its
     snapshot and upper, which lives as long as S.  */
  if (esbx_session_load (store, name, &s, err) < 0)
    return -1;
  upperfd = esbx_session_scan (store, s, NULL, 0, &cs, NULL, NULL, err);
  if (upperfd < 0)
    goto out;
  for (i = 0; i < cs.n; i++)
    {
      const struct esbx_change *c = &cs.v[i];
      _cleanup_free_ char *rel = NULL;
      _cleanup_free_ char *dir = NULL;
      _cleanup_free_ char *wh = NULL;
      char *slash;

      if (esbx_clean_relpath (c->path, false, &rel, err) < 0)
        goto out;
      if (c->kind != ESBX_DELETED)
        {
          if (emit_upper (ex, upperfd, rel, err) < 0)
            goto out;
          if (c->opaque && emit_marker (ex, rel, OPAQUE_MARKER, err) < 0)
            goto out;
          continue;
        }
      slash = strrchr (rel, '/');
      dir = slash ? xstrndup (rel, (size_t)(slash - rel)) : xstrdup ("");
      wh = xasprintf (WHITEOUT_PREFIX "%s", slash ? slash + 1 : rel);
      if (dir[0] && emit_upper (ex, upperfd, dir, err) < 0)
        goto out;
      if (emit_marker (ex, dir, wh, err) < 0)
        goto out;
    }
  ret = 0;

out:
  esbx_changeset_free (&cs);
  esbx_session_free (s);
  return ret;
}

/* ---- output ------------------------------------------------------------- */

static int
open_output (const char *file, char **tmp, int *fd, esbx_error_t *err)
{
  _cleanup_free_ char *d = xstrdup (file);
  _cleanup_free_ char *b = xstrdup (file);
  _cleanup_free_ char *path = NULL;

  if (strcmp (file, "-") == 0)
    {
      *tmp = NULL;
      *fd = STDOUT_FILENO;
      return 0;
    }
  path = xasprintf ("%s/.%s.esbx-XXXXXX", dirname (d), basename (b));
  *fd = mkostemp (path, O_CLOEXEC);
  if (*fd < 0)
    return esbx_make_error (err, errno, "create a temp file next to `%s`", file);
  if (fchmod (*fd, 0644) < 0)
    {
      int saved = errno;
      close (*fd);
      unlink (path);
      return esbx_make_error (err, saved, "chmod `%s`", path);
    }
  *tmp = steal_pointer (&path);
  return 0;
}

static int
commit_output (const char *file, const char *tmp, int fd, esbx_error_t *err)
{
  _cleanup_free_ char *d = xstrdup (file);
  _cleanup_close_ int dfd = -1;

  if (fsync (fd) < 0)
    return esbx_make_error (err, errno, "fsync `%s`", tmp);
  if (rename (tmp, file) < 0)
    return esbx_make_error (err, errno, "rename `%s` to `%s`", tmp, file);
  dfd = TEMP_FAILURE_RETRY (open (dirname (d), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dfd >= 0)
    fsync (dfd);
  return 0;
}

/* What REF names: a session, or a project and a layer id.  */
static int
resolve_ref (esbx_store_t *store, const char *ref, char **session, char **project, char **id,
             esbx_error_t *err)
{
  _cleanup_free_ char *proj = NULL;
  const char *at = strchr (ref, '@');

  *session = *project = *id = NULL;
  if (at == NULL && esbx_session_exists (store, ref))
    {
      *session = xstrdup (ref);
      return 0;
    }
  proj = at ? xstrndup (ref, (size_t)(at - ref)) : xstrdup (ref);
  if (esbx_check_name ("project", proj, err) < 0)
    return -1;
  if (!esbx_project_exists (store, proj))
    return esbx_make_error (err, 0, "no session or project of that name");
  if (esbx_layer_resolve (store, proj, at && at[1] ? at + 1 : "head", id, err) < 0)
    return -1;
  *project = steal_pointer (&proj);
  return 0;
}

static int
export_to (esbx_store_t *store, struct exporter *ex, const char *session, const char *project,
           const char *id, enum esbx_export_format format, esbx_error_t *err)
{
  if (session && format == ESBX_EXPORT_TAR)
    return export_session_tar (ex, store, session, err);
  if (session)
    return export_session_oci (ex, store, session, err);
  if (format == ESBX_EXPORT_TAR)
    return export_layer_tar (ex, store, project, id, err);
  return export_layer_oci (ex, store, project, id, err);
}

int
esbx_export (esbx_store_t *store, const char *ref, const char *file, enum esbx_export_format format,
             esbx_error_t *err)
{
  _cleanup_free_ char *shown = esbx_quote_path (ref);
  _cleanup_free_ char *session = NULL;
  _cleanup_free_ char *project = NULL;
  _cleanup_free_ char *id = NULL;
  _cleanup_free_ char *tmp = NULL;
  struct exporter ex = { 0 };
  int fd = -1, ret = -1;

  if (esbx_archive_load (err) < 0 || resolve_ref (store, ref, &session, &project, &id, err) < 0)
    return esbx_error_wrap (err, "export `%s`", shown);
  if (open_output (file, &tmp, &fd, err) < 0)
    return esbx_error_wrap (err, "export `%s`", shown);
  if (exporter_begin (&ex, fd, err) < 0)
    goto out;
  /* An export is the tree: a git project's repository is git's to move
     (push-git, the project's git-dir).  */
  if (project)
    ex.no_git = esbx_project_is_git (store, project);
  else
    {
      struct esbx_session *s = NULL;
      if (esbx_session_load (store, session, &s, err) < 0)
        goto out;
      ex.no_git = esbx_project_is_git (store, s->project);
      esbx_session_free (s);
    }
  ex.progress = esbx_progress_begin ("export", "files", 0);
  if (export_to (store, &ex, session, project, id, format, err) < 0
      || exporter_close (&ex, err) < 0)
    goto out;
  if (tmp && commit_output (file, tmp, fd, err) < 0)
    goto out;
  esbx_progress_end (ex.progress);
  ret = 0;

out:
  exporter_end (&ex);
  if (tmp)
    {
      close (fd);
      if (ret < 0)
        unlink (tmp);
    }
  if (ret < 0)
    return esbx_error_wrap (err, "export `%s`", shown);
  return 0;
}

int
esbx_export_diff_oci (int diffd, int fd, esbx_error_t *err)
{
  struct exporter ex = { 0 };
  /* The walk may give the directory back while it is deep (descend).  */
  int dfd = fcntl (diffd, F_DUPFD_CLOEXEC, 3), ret = -1;

  if (dfd < 0)
    return esbx_make_error (err, errno, "export layer: dup");
  if (exporter_begin (&ex, fd, err) == 0 && walk_diff (&ex, &dfd, "", 0, err) == 0
      && exporter_close (&ex, err) == 0)
    ret = 0;
  exporter_end (&ex);
  if (dfd >= 0)
    close (dfd);
  return ret;
}
