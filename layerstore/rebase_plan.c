/* What rebase does with each path that both the session and upstream
 * changed since the session's base.  Every path that can be merged is
 * merged; the rest stays the session's and becomes an unmerged entry
 * (unmerged.c) for a person or an agent to resolve, with the three versions
 * kept.  A path is merged when:
 *
 *  - files both changed: the content and the mode are merged apart, each
 *    three ways: a side that left it as the base had it takes the other
 *    side's; text both changed goes through diff3 (merge.c), where
 *    overlapping hunks leave markers and an entry; binary content both
 *    changed, or a mode both changed each its own way, is an entry;
 *  - a directory both sides made or changed, differing in its mode only:
 *    a directory both sides created takes the head's mode (its mode in the
 *    session is most likely the agent's umask; git records none), one the
 *    session changed and upstream did not keeps the session's, one both
 *    changed each its own way is an entry;
 *  - a file changed on one side and renamed on the other (deleted, and a
 *    new file of at least RENAME_MIN_SCORE % similar content added, by
 *    libgit2's similarity signatures as git's rename detection measures
 *    it): the change follows the rename, merged as above.
 *
 * Anything else (a deletion against a change with no rename, another type
 * on each side, a symlink both changed, a directory removed above a change)
 * is an entry.  The merged files are written beside the session's
 * directory entries (sessions/S/merge.N) while the session is mounted, and
 * moved into its upper directory once it is unmounted
 * (esbx_rebase_plan_apply).  */
#include "internal.h"
#include "git.h"
#include "fs.h"
#include "hash.h"
#include "path.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RENAME_MIN_SCORE 50
/* As git's diff.renameLimit: candidates compared for one path at most.  */
#define RENAME_MAX_CANDIDATES 1000

enum op_kind
{
  OP_WRITE,  /* move TMP over PATH in the upper directory */
  OP_UNLINK, /* remove PATH from the upper (the head has nothing there) */
  OP_CHMOD,  /* give PATH (of TYPE) MODE */
};

struct op
{
  enum op_kind kind;
  char *path;
  char *tmp;
  enum esbx_file_type type;
  mode_t mode;
};

struct esbx_rebase_plan
{
  esbx_store_t *store;
  const struct esbx_session *s;
  int sdfd; /* -1 when dry */
  int ufd;
  const struct esbx_changeset *cs;
  const struct esbx_upstream *up;
  struct esbx_publish_result *r;
  struct esbx_stack base, head;
  bool dry;
  json_t *entries; /* the entries after this rebase: the first N_OLD are
                      those left by earlier rebases and not resolved */
  size_t n_old;
  struct op *ops;
  size_t n_ops;
  struct strv merged;
  struct strv taken; /* rename targets already used */
  unsigned seq;
  char *labels[3];
};

/* One side of a three-way merge: what a path is in the base, the session
   or the head.  */
struct side
{
  bool exists;
  enum esbx_file_type type;
  mode_t mode;
  int64_t size;
  char sha[ESBX_SHA256_HEX_LEN + 1];
  char *target;
  int fd; /* regular files, once opened; -1 */
};

static void
side_clear (struct side *x)
{
  free (x->target);
  if (x->fd >= 0)
    close (x->fd);
  memset (x, 0, sizeof *x);
  x->fd = -1;
}

static const char *
side_type_name (const struct side *x)
{
  if (!x->exists)
    return NULL;
  switch (x->type)
    {
    case ESBX_TYPE_FILE:
      return "file";
    case ESBX_TYPE_DIR:
      return "directory";
    case ESBX_TYPE_SYMLINK:
      return "symlink";
    default:
      return "other";
    }
}

/* PATH ("/a/b") as the view ST has it.  */
static int
stack_side (struct esbx_stack *st, const char *path, struct side *out, esbx_error_t *err)
{
  struct stat sb;
  size_t layer;

  memset (out, 0, sizeof *out);
  out->fd = -1;
  if (esbx_stack_lookup (st, path + 1, &layer, &sb) != 1)
    return 0;
  out->exists = true;
  out->type = esbx_file_type_of (sb.st_mode);
  out->mode = sb.st_mode & 07777;
  out->size = sb.st_size;
  if (out->type == ESBX_TYPE_FILE)
    {
      if (esbx_stack_file_sha (st, layer, path + 1, out->sha, err) < 0)
        return -1;
      out->fd = esbx_open_regular_beneath (st->fds[layer], path + 1, err);
      if (out->fd < 0)
        return -1;
    }
  else if (out->type == ESBX_TYPE_SYMLINK)
    {
      _cleanup_free_ char *name = NULL;
      _cleanup_close_ int pfd = esbx_open_parent_beneath (st->fds[layer], path + 1, &name, err);
      char buf[4097];
      ssize_t n;

      if (pfd < 0)
        return -1;
      n = readlinkat (pfd, name, buf, sizeof buf - 1);
      if (n < 0)
        return esbx_make_error (err, errno, "readlink `%s`", path);
      buf[n] = '\0';
      out->target = xstrdup (buf);
    }
  return 0;
}

/* PATH in the session's upper directory, as its change C says.  */
static int
upper_side (struct esbx_rebase_plan *p, const struct esbx_change *c, struct side *out,
            esbx_error_t *err)
{
  memset (out, 0, sizeof *out);
  out->fd = -1;
  if (c == NULL || c->kind == ESBX_DELETED)
    return 0;
  out->exists = true;
  out->type = c->type;
  out->mode = c->mode;
  out->size = c->size;
  memcpy (out->sha, c->sha256, sizeof out->sha);
  if (c->target)
    out->target = xstrdup (c->target);
  if (c->type == ESBX_TYPE_FILE)
    {
      out->fd = esbx_open_regular_beneath (p->ufd, c->path + 1, err);
      if (out->fd < 0)
        return esbx_error_wrap (err, "session `%s`", p->s->name);
    }
  return 0;
}

static bool
text (const struct side *x)
{
  return !x->exists || (x->type == ESBX_TYPE_FILE && esbx_mergeable_fd (x->fd));
}

static int
read_all (int fd, char **buf, size_t *len, esbx_error_t *err)
{
  size_t cap = 65536, n = 0;
  char *b = xmalloc (cap);
  ssize_t r;

  while ((r = TEMP_FAILURE_RETRY (pread (fd, b + n, cap - n, (off_t)n))) > 0)
    {
      n += (size_t)r;
      if (n == cap)
        {
          if (cap >= ESBX_MERGE_MAX_BYTES)
            break;
          cap *= 2;
          b = xrealloc (b, cap);
        }
    }
  if (r < 0)
    {
      free (b);
      return esbx_make_error (err, errno, "read");
    }
  *buf = b;
  *len = n;
  return 0;
}

static int
signature (int fd, struct esbx_similar **out, esbx_error_t *err)
{
  _cleanup_free_ char *buf = NULL;
  size_t len = 0;

  if (read_all (fd, &buf, &len, err) < 0)
    return -1;
  return esbx_similar_new (buf, len, out, err);
}

/* Could contents of sizes A and B be RENAME_MIN_SCORE % alike?  */
static bool
sizes_close (int64_t a, int64_t b)
{
  int64_t lo = a < b ? a : b, hi = a < b ? b : a;

  return hi == 0 || lo * 100 >= hi * RENAME_MIN_SCORE;
}

static bool
taken (const struct esbx_rebase_plan *p, const char *path)
{
  for (size_t i = 0; i < p->taken.n; i++)
    if (strcmp (p->taken.v[i], path) == 0)
      return true;
  return false;
}

static bool
is_conflict (const struct esbx_publish_result *r, const char *path)
{
  for (size_t i = 0; i < r->n_conflicts; i++)
    if (strcmp (r->conflicts[i].path, path) == 0)
      return true;
  return false;
}

/* The best of the files named by CANDIDATES (opened in DIRFD, or the head
   stack when DIRFD is -1) alike to BASE: its path, or NULL.  */
static int
best_rename (struct esbx_rebase_plan *p, struct side *base, char *const *candidates,
             const int64_t *sizes, char *const *shas, int dirfd, char **out, esbx_error_t *err)
{
  struct esbx_similar *sig = NULL;
  int best = 0, compared = 0, ret = -1;
  size_t i;

  *out = NULL;
  for (i = 0; candidates[i] && compared < RENAME_MAX_CANDIDATES; i++)
    {
      _cleanup_close_ int fd = -1;
      struct esbx_similar *other = NULL;
      int score;

      if (strcmp (shas[i], base->sha) == 0)
        score = 100;
      else
        {
          if (!sizes_close (sizes[i], base->size))
            continue;
          if (sig == NULL && signature (base->fd, &sig, err) < 0)
            goto out;
          if (dirfd >= 0)
            fd = esbx_open_regular_beneath (dirfd, candidates[i] + 1, err);
          else
            {
              struct side h;
              if (stack_side (&p->head, candidates[i], &h, err) < 0)
                goto out;
              fd = h.fd;
              h.fd = -1;
              side_clear (&h);
            }
          if (fd < 0 || signature (fd, &other, err) < 0)
            goto out;
          score = esbx_similar_score (sig, other);
          esbx_similar_free (other);
          compared++;
        }
      if (score > best)
        {
          best = score;
          free (*out);
          *out = xstrdup (candidates[i]);
        }
    }
  if (best < RENAME_MIN_SCORE)
    {
      free (*out);
      *out = NULL;
    }
  ret = 0;
out:
  esbx_similar_free (sig);
  if (ret < 0)
    {
      free (*out);
      *out = NULL;
    }
  return ret;
}

/* Upstream deleted PATH (BASE as the session's base had it): a file it
   added that the base did not have, the session did not touch and that is
   alike enough, or NULL.  */
static int
renamed_upstream (struct esbx_rebase_plan *p, struct side *base, char **out, esbx_error_t *err)
{
  struct strv paths = { 0 }, shas = { 0 };
  _cleanup_free_ int64_t *sizes = xmalloc0 ((p->up->n + 1) * sizeof *sizes);
  size_t i, n = 0;
  int ret;

  for (i = 0; i < p->up->n; i++)
    {
      const struct esbx_change *c = p->up->v[i].change;
      struct stat sb;
      size_t layer;

      if (c->kind == ESBX_DELETED || c->type != ESBX_TYPE_FILE || taken (p, c->path)
          || esbx_changeset_find (p->cs, c->path)
          || esbx_stack_lookup (&p->base, c->path + 1, &layer, &sb) == 1)
        continue;
      strv_push (&paths, xstrdup (c->path));
      strv_push (&shas, xstrdup (c->sha256));
      sizes[n++] = c->size;
    }
  if (n == 0)
    {
      *out = NULL;
      return 0;
    }
  ret = best_rename (p, base, paths.v, sizes, shas.v, -1, out, err);
  strv_free (&paths);
  strv_free (&shas);
  return ret;
}

/* The session deleted PATH: a file it added, alike enough, that is no
   conflict itself, or NULL.  */
static int
renamed_here (struct esbx_rebase_plan *p, struct side *base, char **out, esbx_error_t *err)
{
  struct strv paths = { 0 }, shas = { 0 };
  _cleanup_free_ int64_t *sizes = xmalloc0 ((p->cs->n + 1) * sizeof *sizes);
  size_t i, n = 0;
  int ret;

  for (i = 0; i < p->cs->n; i++)
    {
      const struct esbx_change *c = &p->cs->v[i];

      if (c->kind != ESBX_ADDED || c->type != ESBX_TYPE_FILE || taken (p, c->path)
          || is_conflict (p->r, c->path))
        continue;
      strv_push (&paths, xstrdup (c->path));
      strv_push (&shas, xstrdup (c->sha256));
      sizes[n++] = c->size;
    }
  if (n == 0)
    {
      *out = NULL;
      return 0;
    }
  ret = best_rename (p, base, paths.v, sizes, shas.v, p->ufd, out, err);
  strv_free (&paths);
  strv_free (&shas);
  return ret;
}

static void
add_op (struct esbx_rebase_plan *p, enum op_kind kind, const char *path, char *tmp,
        enum esbx_file_type type, mode_t mode)
{
  p->ops = xrealloc (p->ops, (p->n_ops + 1) * sizeof *p->ops);
  p->ops[p->n_ops++]
      = (struct op){ .kind = kind, .path = xstrdup (path), .tmp = tmp, .type = type, .mode = mode };
}

/* The entry an earlier rebase left at PATH, or NULL.  */
static json_t *
old_entry (struct esbx_rebase_plan *p, const char *path)
{
  for (size_t i = 0; i < p->n_old; i++)
    {
      const char *q = json_get_string (json_at (p->entries, i), "path");
      if (q && strcmp (q, path) == 0)
        return json_at (p->entries, i);
    }
  return NULL;
}

static int
keep_side (struct esbx_rebase_plan *p, json_t *e, enum esbx_side which, const struct side *x,
           esbx_error_t *err)
{
  return esbx_unmerged_keep (p->sdfd, e, which, x->type == ESBX_TYPE_FILE ? x->fd : -1,
                             x->type == ESBX_TYPE_SYMLINK ? x->target : NULL, side_type_name (x),
                             err);
}

/* Conflict K becomes an unmerged entry of KIND at PATH with the three
   versions kept; the session's files stay as they are.  */
static int
leave (struct esbx_rebase_plan *p, struct esbx_conflict *k, enum esbx_conflict_kind kind,
       const char *path, struct side *base, struct side *ours, struct side *theirs,
       esbx_error_t *err)
{
  json_t *e;

  k->kind = kind;
  k->blocking = true;
  if (p->dry)
    return 0;
  e = esbx_unmerged_new (path, kind, k->layer, k->session, esbx_unmerged_next_id (p->entries));
  json_append (p->entries, e);
  if (keep_side (p, e, ESBX_SIDE_BASE, base, err) < 0
      || keep_side (p, e, ESBX_SIDE_OURS, ours, err) < 0
      || keep_side (p, e, ESBX_SIDE_THEIRS, theirs, err) < 0)
    return -1;
  if (k->renamed)
    json_set_string (e, "renamed", k->renamed);
  return 0;
}

/* Sides of PATH in the base, the session and the head.  */
static int
sides_of (struct esbx_rebase_plan *p, const char *path, struct side *base, struct side *ours,
          struct side *theirs, esbx_error_t *err)
{
  if (stack_side (&p->base, path, base, err) < 0 || stack_side (&p->head, path, theirs, err) < 0)
    return -1;
  return upper_side (p, esbx_changeset_find (p->cs, path), ours, err);
}

static int
leave_path (struct esbx_rebase_plan *p, struct esbx_conflict *k, enum esbx_conflict_kind kind,
            esbx_error_t *err)
{
  struct side base, ours, theirs;
  int ret;

  memset (&base, 0, sizeof base);
  memset (&ours, 0, sizeof ours);
  memset (&theirs, 0, sizeof theirs);
  base.fd = ours.fd = theirs.fd = -1;
  ret = p->dry ? 0 : sides_of (p, k->path, &base, &ours, &theirs, err);
  if (ret == 0)
    ret = leave (p, k, kind, k->path, &base, &ours, &theirs, err);
  side_clear (&base);
  side_clear (&ours);
  side_clear (&theirs);
  return ret;
}

static int
new_tmp (struct esbx_rebase_plan *p, char **name, esbx_error_t *err)
{
  int fd;

  *name = xasprintf ("merge.%u", p->seq++);
  unlinkat (p->sdfd, *name, 0);
  fd = TEMP_FAILURE_RETRY (
      openat (p->sdfd, *name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (fd < 0)
    {
      esbx_make_error (err, errno, "create `%s`", *name);
      free (*name);
      *name = NULL;
    }
  return fd;
}

/* Is every directory above PATH in the upper a directory or absent (so
   that a merge can be moved there)?  */
static bool
parents_are_dirs (struct esbx_rebase_plan *p, const char *path)
{
  _cleanup_free_ char *dir = xstrdup (path + 1);
  char *slash;

  while ((slash = strrchr (dir, '/')) != NULL)
    {
      struct stat sb;
      _cleanup_free_ char *name = NULL;
      _cleanup_close_ int pfd = -1;

      *slash = '\0';
      pfd = esbx_open_parent_beneath (p->ufd, dir, &name, NULL);
      if (pfd < 0)
        return errno == ENOENT;
      if (fstatat (pfd, name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
        {
          if (errno != ENOENT)
            return false;
          continue;
        }
      if (!S_ISDIR (sb.st_mode))
        return false;
    }
  return true;
}

enum take
{
  TAKE_OURS,
  TAKE_THEIRS,
  TAKE_MERGE,
  TAKE_NONE, /* binary content both changed */
};

/* Files both changed: BASE, OURS (the session's file at its path) and
   THEIRS (the head's); the result goes to OUT, and the session's file at
   UNLINK (a rename followed upstream) goes.  */
static int
merge_files (struct esbx_rebase_plan *p, struct esbx_conflict *k, struct side *base,
             struct side *ours, struct side *theirs, const char *ours_path, const char *out,
             const char *unlink_path, esbx_error_t *err)
{
  enum take content;
  bool mode_conflict = false, markers = false;
  mode_t mode;
  _cleanup_close_ int tfd = -1;
  char *tmp = NULL;
  bool base_file = base->exists && base->type == ESBX_TYPE_FILE;

  if (strcmp (ours->sha, theirs->sha) == 0)
    content = TAKE_OURS;
  else if (base_file && strcmp (base->sha, ours->sha) == 0)
    content = TAKE_THEIRS;
  else if (base_file && strcmp (base->sha, theirs->sha) == 0)
    content = TAKE_OURS;
  else if ((!base->exists || base_file) && text (base) && text (ours) && text (theirs))
    content = TAKE_MERGE;
  else
    content = TAKE_NONE;
  if (ours->mode == theirs->mode)
    mode = ours->mode;
  else if (base_file && base->mode == ours->mode)
    mode = theirs->mode;
  else if (base_file && base->mode == theirs->mode)
    mode = ours->mode;
  else
    {
      mode = ours->mode;
      mode_conflict = true;
    }
  if (content == TAKE_NONE || (strcmp (ours_path, out) != 0 && !parents_are_dirs (p, out)))
    return leave (p, k, k->renamed ? ESBX_CONFLICT_RENAME : ESBX_CONFLICT_BINARY, out, base, ours,
                  theirs, err);
  k->kind = k->renamed      ? ESBX_CONFLICT_RENAME
            : mode_conflict ? ESBX_CONFLICT_MODE
                            : ESBX_CONFLICT_CONTENT;
  if (p->dry)
    {
      k->blocking = mode_conflict;
      return 0;
    }

  if (content == TAKE_OURS && strcmp (ours_path, out) == 0)
    {
      if (mode != ours->mode)
        add_op (p, OP_CHMOD, out, NULL, ESBX_TYPE_FILE, mode);
    }
  else
    {
      tfd = new_tmp (p, &tmp, err);
      if (tfd < 0)
        return -1;
      add_op (p, OP_WRITE, out, tmp, ESBX_TYPE_FILE, mode);
      if (content == TAKE_MERGE)
        {
          const char *const labels[3] = { p->labels[0], p->labels[1], p->labels[2] };
          if (esbx_merge_text (ours->fd, base->exists ? base->fd : -1, theirs->fd, tfd, labels,
                               &markers, err)
              < 0)
            return esbx_error_wrap (err, "merge `%s`", out);
        }
      else
        {
          char sha[ESBX_SHA256_HEX_LEN + 1];
          off_t size;
          int from = content == TAKE_OURS ? ours->fd : theirs->fd;

          if (lseek (from, 0, SEEK_SET) < 0 || esbx_copy_hash_fd (from, tfd, sha, &size, err) < 0)
            return esbx_error_wrap (err, "merge `%s`", out);
        }
      if (fchmod (tfd, mode) < 0)
        return esbx_make_error (err, errno, "merge `%s`: mode", out);
    }
  if (unlink_path)
    add_op (p, OP_UNLINK, unlink_path, NULL, ESBX_TYPE_FILE, 0);
  if (markers || mode_conflict)
    {
      k->markers = markers;
      if (leave (p, k, markers ? ESBX_CONFLICT_CONTENT : ESBX_CONFLICT_MODE, out, base, ours,
                 theirs, err)
          < 0)
        return -1;
      if (k->renamed)
        k->kind = ESBX_CONFLICT_RENAME;
      return 0;
    }
  strv_push (&p->merged, xstrdup (out));
  return 0;
}

/* A directory both sides have, differing in mode only.  */
static int
merge_dir (struct esbx_rebase_plan *p, struct esbx_conflict *k, const struct esbx_change *c,
           const struct esbx_change *e, esbx_error_t *err)
{
  struct side base;
  int ret = 0;

  if (stack_side (&p->base, k->path, &base, err) < 0)
    return -1;
  k->kind = ESBX_CONFLICT_MODE;
  if (base.exists && base.type == ESBX_TYPE_DIR && base.mode != c->mode && base.mode != e->mode)
    ret = leave_path (p, k, ESBX_CONFLICT_MODE, err);
  else if (!p->dry)
    {
      /* Made on both sides (the head's mode), or changed upstream only.  */
      if (!(base.exists && base.type == ESBX_TYPE_DIR && base.mode == e->mode))
        add_op (p, OP_CHMOD, k->path, NULL, ESBX_TYPE_DIR, e->mode);
      strv_push (&p->merged, xstrdup (k->path));
    }
  side_clear (&base);
  return ret;
}

static int
plan_one (struct esbx_rebase_plan *p, struct esbx_conflict *k, esbx_error_t *err)
{
  const struct esbx_change *c = esbx_changeset_find (p->cs, k->path);
  const struct esbx_upstream_entry *ue = esbx_upstream_find (p->up, k->path);
  const struct esbx_change *e = ue ? ue->change : NULL;
  struct side base, ours, theirs, other;
  _cleanup_free_ char *to = NULL;
  json_t *old = old_entry (p, k->path);
  bool cdel, edel;
  int ret = 0;

  /* A path already waiting for a person is not merged again: its entry
     gets the new head's version.  */
  if (old)
    {
      k->blocking = true;
      if (p->dry)
        return 0;
      memset (&theirs, 0, sizeof theirs);
      memset (&ours, 0, sizeof ours);
      if (sides_of (p, k->path, &base, &ours, &theirs, err) < 0
          || keep_side (p, old, ESBX_SIDE_THEIRS, &theirs, err) < 0)
        ret = -1;
      json_set_string (old, "layer", k->layer);
      side_clear (&base);
      side_clear (&ours);
      side_clear (&theirs);
      return ret;
    }
  if (c == NULL || e == NULL)
    return leave_path (p, k, ESBX_CONFLICT_TYPE, err);
  cdel = c->kind == ESBX_DELETED;
  edel = e->kind == ESBX_DELETED;
  if (!cdel && !edel)
    {
      if (c->type == ESBX_TYPE_DIR && e->type == ESBX_TYPE_DIR && !c->opaque && !e->opaque)
        return merge_dir (p, k, c, e, err);
      if (c->type == ESBX_TYPE_SYMLINK && e->type == ESBX_TYPE_SYMLINK)
        return leave_path (p, k, ESBX_CONFLICT_SYMLINK, err);
      if (c->type != ESBX_TYPE_FILE || e->type != ESBX_TYPE_FILE)
        return leave_path (p, k, ESBX_CONFLICT_TYPE, err);
      if (sides_of (p, k->path, &base, &ours, &theirs, err) < 0)
        ret = -1;
      else
        ret = merge_files (p, k, &base, &ours, &theirs, k->path, k->path, NULL, err);
      side_clear (&base);
      side_clear (&ours);
      side_clear (&theirs);
      return ret;
    }
  if (cdel == edel)
    return 0;
  if (sides_of (p, k->path, &base, &ours, &theirs, err) < 0)
    goto fail;
  if (base.exists && base.type == ESBX_TYPE_FILE
      && (cdel ? e->type == ESBX_TYPE_FILE : c->type == ESBX_TYPE_FILE))
    {
      if ((cdel ? renamed_here (p, &base, &to, err) : renamed_upstream (p, &base, &to, err)) < 0)
        goto fail;
    }
  if (to)
    {
      /* Upstream renamed the file the session changed: the change goes to
         the new name, and the old one leaves the session.  The session
         renamed the file upstream changed: upstream's change comes to the
         session's name, and the deletion of the old name stays.  */
      strv_push (&p->taken, xstrdup (to));
      k->renamed = xstrdup (to);
      memset (&other, 0, sizeof other);
      other.fd = -1;
      if (cdel)
        ret = upper_side (p, esbx_changeset_find (p->cs, to), &other, err) < 0
                  ? -1
                  : merge_files (p, k, &base, &other, &theirs, to, to, NULL, err);
      else
        ret = stack_side (&p->head, to, &other, err) < 0
                  ? -1
                  : merge_files (p, k, &base, &ours, &other, k->path, to, k->path, err);
      side_clear (&other);
    }
  else
    ret = leave (p, k, cdel ? ESBX_CONFLICT_DELETE_MODIFY : ESBX_CONFLICT_MODIFY_DELETE, k->path,
                 &base, &ours, &theirs, err);
  side_clear (&base);
  side_clear (&ours);
  side_clear (&theirs);
  return ret;
fail:
  side_clear (&base);
  side_clear (&ours);
  side_clear (&theirs);
  return -1;
}

void
esbx_rebase_plan_free (struct esbx_rebase_plan *p)
{
  size_t i;

  if (p == NULL)
    return;
  for (i = 0; i < p->n_ops; i++)
    {
      if (p->ops[i].tmp && p->sdfd >= 0)
        unlinkat (p->sdfd, p->ops[i].tmp, 0);
      free (p->ops[i].tmp);
      free (p->ops[i].path);
    }
  free (p->ops);
  esbx_stack_close (&p->base);
  esbx_stack_close (&p->head);
  json_free (p->entries);
  strv_free (&p->merged);
  strv_free (&p->taken);
  for (i = 0; i < 3; i++)
    free (p->labels[i]);
  free (p);
}

int
esbx_rebase_plan_make (esbx_store_t *store, const struct esbx_session *s, int sdfd, int ufd,
                       const struct esbx_changeset *cs, const struct esbx_upstream *up,
                       const char *head, struct esbx_publish_result *r,
                       struct esbx_rebase_plan **out, esbx_error_t *err)
{
  struct esbx_rebase_plan *p = xmalloc0 (sizeof *p);
  _cleanup_json_ json_t *all = esbx_unmerged_entries (s->record);
  size_t i;

  *out = NULL;
  p->store = store;
  p->s = s;
  p->sdfd = sdfd;
  p->ufd = ufd;
  p->cs = cs;
  p->up = up;
  p->r = r;
  p->dry = sdfd < 0;
  p->entries = json_new (JSON_ARRAY);
  p->labels[0] = xasprintf ("session %s", s->name);
  p->labels[1] = xasprintf ("base %.12s", s->base);
  p->labels[2] = xasprintf ("head %.12s", head);
  /* Entries resolved since the last rebase go; the others stay.  */
  for (i = 0; i < json_len (all); i++)
    if (!esbx_unmerged_resolved (ufd, json_at (all, i)))
      json_append (p->entries, json_copy (json_at (all, i)));
  p->n_old = json_len (p->entries);
  if (esbx_stack_open (store, s->project, s->base, s->published, &p->base, err) < 0
      || esbx_stack_open (store, s->project, head, NULL, &p->head, err) < 0)
    goto fail;
  for (i = 0; i < r->n_conflicts; i++)
    if (plan_one (p, &r->conflicts[i], err) < 0)
      goto fail;
  *out = p;
  return 0;
fail:
  esbx_rebase_plan_free (p);
  return -1;
}

/* Open the directory of PATH's parent in the upper, making the
   directories that are missing with the head's modes and owners.  */
static int
make_parents (struct esbx_rebase_plan *p, const char *path, char **base, esbx_error_t *err)
{
  _cleanup_free_ char *dir = xstrdup (path + 1);
  char *slash = strrchr (dir, '/'), *comp, *save = NULL;
  _cleanup_free_ char *walked = NULL;
  int fd = fcntl (p->ufd, F_DUPFD_CLOEXEC, 3);

  if (fd < 0)
    return esbx_make_error (err, errno, "dup");
  *base = xstrdup (slash ? slash + 1 : dir);
  if (slash == NULL)
    return fd;
  *slash = '\0';
  walked = xstrdup ("");
  for (comp = strtok_r (dir, "/", &save); comp; comp = strtok_r (NULL, "/", &save))
    {
      _cleanup_free_ char *rel = walked[0] ? xasprintf ("%s/%s", walked, comp) : xstrdup (comp);
      int sub
          = TEMP_FAILURE_RETRY (openat (fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));

      if (sub < 0 && errno == ENOENT)
        {
          struct stat sb;
          size_t layer;

          if (esbx_stack_lookup (&p->head, rel, &layer, &sb) != 1 || !S_ISDIR (sb.st_mode))
            sb.st_mode = S_IFDIR | 0755, sb.st_uid = 0, sb.st_gid = 0;
          if (mkdirat (fd, comp, 0700) < 0)
            {
              esbx_make_error (err, errno, "mkdir `/%s` in the session", rel);
              close (fd);
              return -1;
            }
          sub = TEMP_FAILURE_RETRY (
              openat (fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
          if (sub >= 0
              && (fchown (sub, sb.st_uid, sb.st_gid) < 0 || fchmod (sub, sb.st_mode & 07777) < 0))
            {
              esbx_make_error (err, errno, "mode of `/%s` in the session", rel);
              close (sub);
              close (fd);
              return -1;
            }
        }
      close (fd);
      if (sub < 0)
        return esbx_make_error (err, errno, "open `/%s` in the session", rel);
      fd = sub;
      free (walked);
      walked = steal_pointer (&rel);
    }
  return fd;
}

static int
chmod_in_upper (int ufd, const char *path, enum esbx_file_type type, mode_t mode, uid_t *uid,
                gid_t *gid, esbx_error_t *err)
{
  _cleanup_close_ int fd = -1;

  if (type == ESBX_TYPE_DIR)
    fd = esbx_open_beneath (ufd, path + 1, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0, err);
  else
    fd = esbx_open_regular_beneath (ufd, path + 1, err);
  if (fd < 0)
    return -1;
  if (fchmod (fd, mode) < 0)
    return esbx_make_error (err, errno, "chmod `%s` in the session", path);
  if (uid && fchown (fd, *uid, *gid) < 0)
    return esbx_make_error (err, errno, "chown `%s` in the session", path);
  return 0;
}

/* Copy-ups identical to the old base would hide what upstream did to
   their paths once the base moves: files go, directories take the head's
   mode and owner (or go when the head has none and they are empty).  */
static int
drop_same (struct esbx_rebase_plan *p, const struct esbx_changeset *same, esbx_error_t *err)
{
  size_t i;

  for (i = 0; i < same->n; i++)
    if (same->v[i].type != ESBX_TYPE_DIR)
      {
        _cleanup_free_ char *name = NULL;
        _cleanup_close_ int pfd
            = esbx_open_parent_beneath (p->ufd, same->v[i].path + 1, &name, err);
        if (pfd < 0 || unlinkat (pfd, name, 0) < 0)
          {
            if (pfd >= 0)
              esbx_make_error (err, errno, "remove stale copy-up `%s`", same->v[i].path);
            return -1;
          }
      }
  for (i = same->n; i > 0; i--)
    {
      const char *path = same->v[i - 1].path;
      struct stat sb;
      size_t layer;

      if (same->v[i - 1].type != ESBX_TYPE_DIR)
        continue;
      if (esbx_stack_lookup (&p->head, path + 1, &layer, &sb) == 1 && S_ISDIR (sb.st_mode))
        {
          uid_t uid = sb.st_uid;
          gid_t gid = sb.st_gid;
          if (chmod_in_upper (p->ufd, path, ESBX_TYPE_DIR, sb.st_mode & 07777, &uid, &gid, err) < 0)
            return -1;
        }
      else
        {
          _cleanup_free_ char *name = NULL;
          _cleanup_close_ int pfd = esbx_open_parent_beneath (p->ufd, path + 1, &name, err);
          if (pfd < 0)
            return -1;
          /* Not empty: what the session changed below is a conflict.  */
          unlinkat (pfd, name, AT_REMOVEDIR);
        }
    }
  return 0;
}

int
esbx_rebase_plan_apply (struct esbx_rebase_plan *p, const struct esbx_changeset *same,
                        esbx_error_t *err)
{
  size_t i;

  if (drop_same (p, same, err) < 0)
    return -1;
  for (i = 0; i < p->n_ops; i++)
    {
      struct op *o = &p->ops[i];
      _cleanup_free_ char *name = NULL;
      _cleanup_close_ int pfd = -1;

      switch (o->kind)
        {
        case OP_WRITE:
          pfd = make_parents (p, o->path, &name, err);
          if (pfd < 0)
            return -1;
          /* A copy where the upper is on a disk of its own.  */
          if (esbx_move_file_at (p->sdfd, o->tmp, pfd, name, err) < 0)
            return esbx_error_wrap (err, "merge `%s`: move the result into the session", o->path);
          free (o->tmp);
          o->tmp = NULL;
          break;
        case OP_UNLINK:
          pfd = esbx_open_parent_beneath (p->ufd, o->path + 1, &name, err);
          if (pfd < 0)
            return -1;
          if (unlinkat (pfd, name, 0) < 0 && errno != ENOENT)
            return esbx_make_error (err, errno, "remove `%s` from the session", o->path);
          break;
        case OP_CHMOD:
          if (chmod_in_upper (p->ufd, o->path, o->type, o->mode, NULL, NULL, err) < 0)
            return -1;
          break;
        }
    }
  return 0;
}

json_t *
esbx_rebase_plan_entries (struct esbx_rebase_plan *p)
{
  return json_copy (p->entries);
}

char **
esbx_rebase_plan_merged (struct esbx_rebase_plan *p)
{
  char **v = p->merged.v ? p->merged.v : xmalloc0 (sizeof (char *));

  memset (&p->merged, 0, sizeof p->merged);
  return v;
}

int
esbx_rebase_classify (esbx_store_t *store, const struct esbx_session *s, int ufd,
                      const struct esbx_changeset *cs, const struct esbx_upstream *up,
                      const char *head, struct esbx_publish_result *r, esbx_error_t *err)
{
  struct esbx_rebase_plan *p = NULL;

  if (esbx_rebase_plan_make (store, s, -1, ufd, cs, up, head, r, &p, err) < 0)
    return -1;
  esbx_rebase_plan_free (p);
  return 0;
}
