/* The change set of a session: its upper directory compared with the merged
   view of its base.  Upper content is untrusted: every walk is by dirfd with
   O_NOFOLLOW, and names outside the rule stop the scan with an error.  */
#include "internal.h"
#include "git.h"
#include "ignore.h"
#include "fs.h"
#include "path.h"
#include "hash.h"
#include "inodes.h"
#include "log.h"
#include "text.h"
#include "utils.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

struct scan
{
  struct esbx_stack *base;
  struct esbx_changeset *out;
  struct esbx_changeset *same;      /* copy-ups identical to the base, or NULL */
  struct esbx_changeset *ignored;   /* changes the ignore rules exclude, or NULL */
  struct esbx_ignore *ig;           /* NULL: every change counts */
  bool ignored_top;                 /* IGNORED gets names only (ESBX_CHANGES_IGNORED_TOP) */
  bool no_git;                      /* the root's .git is not looked at (ESBX_CHANGES_NO_GIT) */
  int upperfd;                      /* the root of the walk */
  struct esbx_git_tracked *tracked; /* a git session's index, read when first asked */
  bool tracked_read;
  const char *session;
  struct esbx_inode_set linked;   /* files of OUT with more than one name */
  struct esbx_progress *progress; /* files hashed */
};

int
esbx_check_entry_name (const char *session, const char *rel, const char *name, esbx_error_t *err)
{
  _cleanup_free_ char *shown = NULL;
  const char *p;

  if (!esbx_utf8_valid (name, strlen (name)))
    {
      shown = esbx_quote_path (rel);
      return esbx_make_error (err, 0, "session `%s`: `/%s`: file name is not UTF-8", session,
                              shown);
    }
  for (p = name; *p; p++)
    if ((unsigned char)*p < 0x20 || *p == 0x7f)
      {
        shown = esbx_quote_path (rel);
        return esbx_make_error (err, 0, "session `%s`: `/%s`: file name has a control character",
                                session, shown);
      }
  if (esbx_has_prefix (name, ".wh."))
    {
      shown = esbx_quote_path (rel);
      return esbx_make_error (err, 0,
                              "session `%s`: `/%s`: names starting with `.wh.` are reserved for "
                              "whiteouts",
                              session, shown);
    }
  return 0;
}

static void
push (struct esbx_changeset *cs, const char *rel, enum esbx_change_kind kind,
      enum esbx_file_type type, const struct stat *st)
{
  struct esbx_change c = { 0 };

  c.path = xasprintf ("/%s", rel);
  c.kind = kind;
  c.type = type;
  if (st)
    {
      c.mode = st->st_mode & 07777;
      if (type == ESBX_TYPE_FILE && (c.mode & (S_ISUID | S_ISGID)))
        {
          c.mode &= ~(mode_t)(S_ISUID | S_ISGID);
          c.stripped = true;
        }
      c.size = type == ESBX_TYPE_FILE ? st->st_size : 0;
    }
  esbx_changeset_push (cs, &c);
}

static mode_t
published_mode (const struct stat *st)
{
  mode_t m = st->st_mode & 07777;

  if (S_ISREG (st->st_mode))
    m &= ~(mode_t)(S_ISUID | S_ISGID);
  return m;
}

/* Context for a file that could not be read, e.g. one that stat showed as
   regular and that the session swapped for a FIFO before the open.  */
static int
read_failed (struct scan *sc, const char *rel, esbx_error_t *err)
{
  _cleanup_free_ char *shown = esbx_quote_path (rel);

  return esbx_error_wrap (err, "session `%s`: reading `/%s`", sc->session, shown);
}

static int scan_dir (struct scan *sc, int *dfd, const char *rel, size_t depth, bool ign,
                     esbx_error_t *err);

/* Does the git session's index track REL (or, BELOW, something beneath
   it)?  Read on the first question.  */
static bool
tracked (struct scan *sc, const char *rel, bool below)
{
  if (!sc->no_git)
    return false;
  if (!sc->tracked_read)
    {
      sc->tracked = esbx_git_tracked_open (sc->base, sc->upperfd);
      sc->tracked_read = true;
    }
  return esbx_git_tracked_has (sc->tracked, rel, below);
}

/* Where a change of REL (a directory when IS_DIR) goes: the change set,
   the ignored ones (an ignored directory IGN above, or the rules say so),
   or nowhere when ignored changes are not asked for.  In a git session a
   path git tracks is never ignored (git ignores untracked files only),
   and an ignored directory that holds tracked files is entered: *IGN stays
   set for what is below it, which only tracked paths escape.  */
static struct esbx_changeset *
target (struct scan *sc, const char *rel, bool is_dir, bool *ign)
{
  bool inherited = *ign;

  if (!*ign && sc->ig)
    *ign = esbx_ignore_match (sc->ig, rel, is_dir);
  if (!*ign)
    return sc->out;
  if (sc->ig && tracked (sc, rel, false))
    {
      if (!inherited)
        *ign = false;
      return sc->out;
    }
  return sc->ignored;
}

/* An ignored directory REL entered all the same: it holds tracked files.  */
static bool
enter_ignored (struct scan *sc, const char *rel)
{
  return sc->ig && tracked (sc, rel, true);
}

/* Deletions implied by an opaque directory: what the base had there and the
   upper does not.  */
static int
opaque_deletions (struct scan *sc, int dfd, const char *rel, bool ign, esbx_error_t *err)
{
  _cleanup_strv_ char **names = esbx_stack_readdir (sc->base, rel, err);
  size_t i;

  if (names == NULL)
    return -1;
  for (i = 0; names[i]; i++)
    {
      _cleanup_free_ char *child = xasprintf ("%s/%s", rel, names[i]);
      struct stat bst;
      size_t layer;

      if (esbx_exists_at (dfd, names[i]))
        continue;
      if (esbx_stack_lookup (sc->base, child, &layer, &bst) == 1)
        {
          bool child_ign = ign;
          struct esbx_changeset *cs = target (sc, child, S_ISDIR (bst.st_mode), &child_ign);
          if (cs)
            push (cs, child, ESBX_DELETED, esbx_file_type_of (bst.st_mode), NULL);
        }
    }
  return 0;
}

/* A symlink whose target is the one of its base in LAYER.  */
static int
same_symlink (struct scan *sc, int dfd, const char *name, const char *rel, size_t layer,
              esbx_error_t *err)
{
  char a[4097], b[4097];
  ssize_t la = readlinkat (dfd, name, a, sizeof a - 1);
  ssize_t lb;
  _cleanup_close_ int bdir = -1;
  _cleanup_free_ char *bname = NULL;

  bdir = esbx_open_parent_beneath (sc->base->fds[layer], rel, &bname, err);
  if (bdir < 0)
    return -1;
  lb = readlinkat (bdir, bname, b, sizeof b - 1);
  return la >= 0 && la == lb && memcmp (a, b, (size_t)la) == 0;
}

/* A file whose content is the one of its base in LAYER; USHA receives the
   hash of the upper file.  */
static int
same_file (struct scan *sc, int dfd, const char *name, const char *rel, size_t layer, char usha[65],
           esbx_error_t *err)
{
  char bsha[65];
  _cleanup_close_ int fd = esbx_open_regular_at (dfd, name, err);

  if (fd < 0 || esbx_sha256_fd (fd, usha, NULL, err) < 0)
    return read_failed (sc, rel, err);
  if (esbx_stack_file_sha (sc->base, layer, rel, bsha, err) < 0)
    return -1;
  return strcmp (usha, bsha) == 0;
}

/* 1 when a leaf is its base BST in LAYER again (a copy-up and nothing
   else), 0 when it changed.  USHA receives the hash of the upper file when
   the comparison computed it.  */
static int
same_as_base (struct scan *sc, int dfd, const char *name, const char *rel, const struct stat *st,
              size_t layer, const struct stat *bst, char usha[65], esbx_error_t *err)
{
  enum esbx_file_type type = esbx_file_type_of (st->st_mode);

  /* Type, mode and owner are a file's state as much as its content.  */
  if (esbx_file_type_of (bst->st_mode) != type || published_mode (bst) != published_mode (st)
      || bst->st_uid != st->st_uid || bst->st_gid != st->st_gid)
    return 0;
  switch (type)
    {
    case ESBX_TYPE_FIFO:
      return 1;
    case ESBX_TYPE_SYMLINK:
      return same_symlink (sc, dfd, name, rel, layer, err);
    case ESBX_TYPE_FILE:
      return st->st_size == bst->st_size ? same_file (sc, dfd, name, rel, layer, usha, err) : 0;
    default:
      return 0;
    }
}

/* What change C carries besides its metadata: a symlink's target, a file's
   hash and size (unless same_file hashed it already).  */
static int
fill_content (struct scan *sc, struct esbx_change *c, int dfd, const char *name, const char *rel,
              esbx_error_t *err)
{
  if (c->type == ESBX_TYPE_SYMLINK)
    {
      char buf[4097];
      ssize_t l = readlinkat (dfd, name, buf, sizeof buf - 1);
      if (l < 0)
        return esbx_make_error (err, errno, "session `%s`: readlink `/%s`", sc->session, rel);
      buf[l] = '\0';
      c->target = xstrdup (buf);
      c->mode = 0777;
    }
  else if (c->type == ESBX_TYPE_FILE && c->sha256[0] == '\0')
    {
      _cleanup_close_ int fd = esbx_open_regular_at (dfd, name, err);
      off_t size;

      if (fd < 0 || esbx_sha256_fd (fd, c->sha256, &size, err) < 0)
        return read_failed (sc, rel, err);
      c->size = size;
      esbx_progress_add (sc->progress, (uint64_t)size);
    }
  return 0;
}

/* File C has other names (ST): the first one met in the change set, if
   any, carries its content, and C names it.  The walk goes in the order of
   esbx_changeset_sort (names sorted, a directory's contents right after
   it), so the first met is the first in path order.  Names of it that are
   not changes (a base file linked to in the session, copied up
   unchanged) are in another layer: C stays a copy of them.  True when C
   is a later name, its content taken from the first.  */
static bool
is_link (struct scan *sc, struct esbx_change *c, const struct stat *st)
{
  const struct esbx_inode *first;
  const struct esbx_change *f;
  bool found;

  first = esbx_inode_set_add (&sc->linked, st->st_dev, st->st_ino, c->path, sc->out->n - 1, &found);
  if (!found)
    return false;
  f = &sc->out->v[first->index];
  c->link = xstrdup (f->path);
  memcpy (c->sha256, f->sha256, 65);
  c->size = f->size;
  return true;
}

/* A file, symlink or FIFO whose base is BST in LAYER (FOUND).  Not inlined:
   its buffers must not sit in every frame of the recursion of deep
   trees.  */
static __attribute__ ((noinline)) int
scan_leaf (struct scan *sc, struct esbx_changeset *cs, int dfd, const char *name, const char *rel,
           const struct stat *st, bool found, size_t layer, const struct stat *bst,
           esbx_error_t *err)
{
  enum esbx_file_type type = esbx_file_type_of (st->st_mode);
  char usha[65] = "";
  struct esbx_change *c;
  int same = 0;

  if (found)
    same = same_as_base (sc, dfd, name, rel, st, layer, bst, usha, err);
  if (same < 0)
    return -1;
  if (same)
    {
      if (sc->same && cs == sc->out)
        push (sc->same, rel, ESBX_MODIFIED, type, st);
      return 0;
    }
  push (cs, rel, found ? ESBX_MODIFIED : ESBX_ADDED, type, st);
  c = &cs->v[cs->n - 1];
  if (usha[0])
    memcpy (c->sha256, usha, 65);
  if (type == ESBX_TYPE_FILE && st->st_nlink > 1 && cs == sc->out && is_link (sc, c, st))
    return 0;
  return fill_content (sc, c, dfd, name, rel, err);
}

/* A directory: its own change, then what is beneath it.  *DFD may be given
   back while the walk is below (fs.h, esbx_dir_release).  */
static int
scan_subdir (struct scan *sc, int *dfd, const char *name, const char *rel, size_t depth,
             const struct stat *st, bool found, const struct stat *bst, bool ign, esbx_error_t *err)
{
  _cleanup_close_ int sub = -1;
  struct esbx_held_dir held;
  mode_t mode = published_mode (st);
  struct esbx_changeset *cs = target (sc, rel, true, &ign);
  bool opaque;
  int r;

  /* Nothing below an ignored directory counts: unless the ignored changes
     are asked for, the walk does not go there (nor does git), unless git
     tracks files below it.  */
  if ((cs == NULL || cs == sc->ignored) && ign && enter_ignored (sc, rel))
    cs = sc->out;
  if (cs == NULL)
    return 0;
  if (cs == sc->ignored && sc->ignored_top)
    {
      push (cs, rel, found ? ESBX_MODIFIED : ESBX_ADDED, ESBX_TYPE_DIR, st);
      return 0;
    }
  sub = TEMP_FAILURE_RETRY (openat (*dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (sub < 0)
    return esbx_make_error (err, errno, "session `%s`: open `/%s`", sc->session, rel);
  opaque = esbx_is_opaque_fd (sub);
  if (!found)
    push (cs, rel, ESBX_ADDED, ESBX_TYPE_DIR, st);
  else if (!S_ISDIR (bst->st_mode) || (bst->st_mode & 07777) != mode)
    push (cs, rel, ESBX_MODIFIED, ESBX_TYPE_DIR, st);
  else if (sc->same && cs == sc->out && !opaque)
    /* A directory copied up as it was: rebase gives it the head's mode,
       as it drops files copied up unchanged.  */
    push (sc->same, rel, ESBX_MODIFIED, ESBX_TYPE_DIR, st);
  if (found && S_ISDIR (bst->st_mode) && opaque && opaque_deletions (sc, sub, rel, ign, err) < 0)
    return -1;
  if (sc->ig && !ign
      && esbx_ignore_enter (sc->ig, sc->base, sub, opaque || !found || !S_ISDIR (bst->st_mode), rel,
                            sc->session, err)
             < 0)
    return -1;
  if (esbx_dir_release (dfd, depth, &held, err) < 0)
    return esbx_error_wrap (err, "session `%s`: `/%s`", sc->session, rel);
  r = scan_dir (sc, &sub, rel, depth + 1, ign, err);
  if (sc->ig && !ign)
    esbx_ignore_leave (sc->ig);
  if (r < 0)
    return -1;
  if (esbx_dir_retake (dfd, sub, &held, err) < 0)
    return esbx_error_wrap (err, "session `%s`: `/%s`", sc->session, rel);
  return 0;
}

static int
scan_entry (struct scan *sc, int *dfd, const char *name, const char *rel, size_t depth, bool ign,
            esbx_error_t *err)
{
  struct stat st, bst;
  struct esbx_changeset *cs;
  size_t layer = 0;
  int found;

  if (fstatat (*dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    {
      if (errno == ENOENT) /* removed while we read: not a change any more */
        return 0;
      return esbx_make_error (err, errno, "session `%s`: stat `/%s`", sc->session, rel);
    }
  if (esbx_check_entry_name (sc->session, rel, name, err) < 0)
    return -1;
  found = esbx_stack_lookup (sc->base, rel, &layer, &bst);

  if (esbx_is_whiteout (&st))
    {
      if (found && (cs = target (sc, rel, S_ISDIR (bst.st_mode), &ign)) != NULL)
        push (cs, rel, ESBX_DELETED, esbx_file_type_of (bst.st_mode), NULL);
      return 0;
    }
  if (S_ISDIR (st.st_mode))
    return scan_subdir (sc, dfd, name, rel, depth, &st, found, &bst, ign, err);
  cs = target (sc, rel, false, &ign);
  if (cs == NULL || (ign && esbx_file_type_of (st.st_mode) == ESBX_TYPE_NONE))
    return 0; /* stays in the session: not looked at */
  if (S_ISSOCK (st.st_mode))
    {
      esbx_warn ("session `%s`: `/%s` is a socket: not part of the change set", sc->session, rel);
      return 0;
    }
  if (esbx_file_type_of (st.st_mode) == ESBX_TYPE_NONE)
    return esbx_make_error (err, 0, "session `%s`: `/%s` is a device node: refused", sc->session,
                            rel);
  if (cs == sc->ignored && sc->ignored_top)
    {
      /* Named, not read: a copy-up of the same type, mode and size is
         taken for unchanged.  */
      if (!found || esbx_file_type_of (bst.st_mode) != esbx_file_type_of (st.st_mode)
          || published_mode (&bst) != published_mode (&st) || bst.st_size != st.st_size)
        push (cs, rel, found ? ESBX_MODIFIED : ESBX_ADDED, esbx_file_type_of (st.st_mode), &st);
      return 0;
    }
  return scan_leaf (sc, cs, *dfd, name, rel, &st, found, layer, &bst, err);
}

/* Paths are at most 4,095 bytes (a record, a tar header, openat2 take
   them): a deeper tree stops the scan here with its cause, long before any
   limit of the process (open files, stack).  */
static int
path_too_long (struct scan *sc, const char *child, size_t depth, esbx_error_t *err)
{
  _cleanup_free_ char *shown = esbx_quote_path (child);

  return esbx_make_error (err, 0,
                          "session `%s`: `/%.64s...`: path too long (more than 4,095 bytes, "
                          "%zu levels deep)",
                          sc->session, shown, depth);
}

static int
scan_dir (struct scan *sc, int *dfd, const char *rel, size_t depth, bool ign, esbx_error_t *err)
{
  /* A subdirectory's fd was just opened by scan_subdir: read it from
     there.  The root's is the caller's, perhaps read before.  */
  _cleanup_strv_ char **names
      = depth > 0 ? esbx_list_dir_fd (*dfd, rel, err) : esbx_list_dir_at (*dfd, ".", err);
  size_t i;

  if (names == NULL)
    return esbx_error_wrap (err, "session `%s`", sc->session);
  for (i = 0; names[i]; i++)
    {
      _cleanup_free_ char *child = rel[0] ? xasprintf ("%s/%s", rel, names[i]) : xstrdup (names[i]);
      if (strlen (child) >= 4095)
        return path_too_long (sc, child, depth + 1, err);
      if (depth == 0 && sc->no_git && strcmp (names[i], ".git") == 0)
        continue;
      if (scan_entry (sc, dfd, names[i], child, depth, ign, err) < 0)
        return -1;
    }
  return 0;
}

int
esbx_scan_upper (struct esbx_stack *base, int upperfd, const char *session, unsigned flags,
                 struct esbx_changeset *out, struct esbx_changeset *same,
                 struct esbx_changeset *ignored, esbx_error_t *err)
{
  struct scan sc = { .base = base,
                     .out = out,
                     .same = same,
                     .ignored = ignored,
                     .session = session,
                     .ignored_top = (flags & ESBX_CHANGES_IGNORED_TOP) != 0,
                     .no_git = (flags & ESBX_CHANGES_NO_GIT) != 0,
                     .upperfd = upperfd };
  int fd = upperfd; /* depth 0: never given back */
  int r = -1;

  memset (out, 0, sizeof *out);
  if (ignored)
    memset (ignored, 0, sizeof *ignored);
  if (!(flags & ESBX_CHANGES_INCLUDE_IGNORED))
    {
      sc.ig = esbx_ignore_new ();
      if (esbx_ignore_enter (sc.ig, base, upperfd, esbx_is_opaque_at (upperfd, "."), "", session,
                             err)
          < 0)
        goto out;
    }
  sc.progress = esbx_progress_begin ("scan", "files", 0);
  if (scan_dir (&sc, &fd, "", 0, false, err) < 0)
    goto out;
  esbx_progress_end (sc.progress);
  esbx_changeset_sort (out);
  if (same)
    esbx_changeset_sort (same);
  if (ignored)
    esbx_changeset_sort (ignored);
  r = 0;

out:
  esbx_ignore_free (sc.ig);
  esbx_git_tracked_free (sc.tracked);
  esbx_inode_set_free (&sc.linked);
  if (r < 0)
    {
      esbx_changeset_free (out);
      if (same)
        esbx_changeset_free (same);
      if (ignored)
        esbx_changeset_free (ignored);
    }
  return r;
}

int
esbx_session_scan (esbx_store_t *store, const struct esbx_session *s, struct esbx_stack *keep,
                   unsigned flags, struct esbx_changeset *out, struct esbx_changeset *same,
                   struct esbx_changeset *ignored, esbx_error_t *err)
{
  struct esbx_stack base;
  _cleanup_free_ char *upper = NULL;
  _cleanup_close_ int ufd = -1;

  memset (out, 0, sizeof *out);
  /* After a reboot a session's own disk is mounted by its first use.  */
  if (esbx_session_disk_mount (store, s, err) < 0)
    return -1;
  /* A git project's sessions keep their repository in `/.git`: never a
     change (layerstore/git/git_repo.c).  */
  if (esbx_project_is_git (store, s->project))
    flags |= ESBX_CHANGES_NO_GIT;
  /* The base of the diff: the session's base plus what it already
     published, so that a second publish carries only what is new.  */
  if (esbx_stack_open (store, s->project, s->base, s->published, &base, err) < 0)
    return esbx_error_wrap (err, "session `%s`", s->name);
  upper = esbx_session_upper (store, s->name);
  if (esbx_session_has_frozen (s) && s->view == NULL)
    {
      /* A fork publishes what it has over the base: the snapshot's
         changes and its own, scanned as one upper.  */
      struct esbx_session *m = (struct esbx_session *)s;
      ufd = esbx_snapshot_view (store, s, &m->view, &m->view_lock, err);
    }
  else
    ufd = esbx_open_dir_at (AT_FDCWD, upper, err);
  if (ufd < 0 || esbx_scan_upper (&base, ufd, s->name, flags, out, same, ignored, err) < 0)
    {
      esbx_stack_close (&base);
      return -1;
    }
  if (keep)
    *keep = base;
  else
    esbx_stack_close (&base);
  return take_fd (&ufd);
}

int
esbx_session_diff (esbx_store_t *store, const char *name, unsigned flags,
                   struct esbx_changeset *out, struct esbx_changeset *ignored, esbx_error_t *err)
{
  struct esbx_session *s = NULL;
  int ufd;

  memset (out, 0, sizeof *out);
  if (esbx_session_load (store, name, &s, err) < 0)
    return -1;
  ufd = esbx_session_scan (store, s, NULL, flags, out, NULL, ignored, err);
  esbx_session_free (s);
  if (ufd < 0)
    return -1;
  close (ufd);
  return 0;
}

int
esbx_session_changes (esbx_store_t *store, const char *name, struct esbx_changeset *out,
                      esbx_error_t *err)
{
  return esbx_session_diff (store, name, 0, out, NULL, err);
}

int
esbx_session_changes_of (esbx_store_t *store, const struct esbx_session *s,
                         struct esbx_changeset *out, esbx_error_t *err)
{
  int ufd = esbx_session_scan (store, s, NULL, 0, out, NULL, NULL, err);

  if (ufd < 0)
    return -1;
  close (ufd);
  return 0;
}
