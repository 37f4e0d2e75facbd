/* The repository of a git project's session: what it adds to its layers'
 * `.git` (git_repo.c), and what esbx reads back from it.
 *
 * A session starts with two files of its own in its upper directory:
 * `.git/HEAD` (on a branch named after the session) and that branch at the
 * commit of its base layer.  Whatever git writes later (index, refs, new
 * objects, logs) lands in the upper directory as any write does, and the
 * scan leaves `/.git` out of the change set.
 *
 * Reading it back (the author and the messages of the session's own
 * commits, for its publish) never opens the session's `.git` by path: its
 * HEAD, refs and objects are copied, regular files only and beneath the
 * upper directory's fd, into a directory of the store's own, and libgit2
 * reads that copy with the layers' objects beside it.  A `.git` of the
 * session's making (symlinks, FIFOs, a hostile config or alternates file)
 * so reaches nothing of the host.  */
#include "internal.h"
#include "git.h"
#include "git_repo.h"
#include "copy.h"
#include "fs.h"
#include "path.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <git2/sys/odb_backend.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What the copy of a session's `.git` may take, at most.  */
#define COPY_MAX_BYTES (512ull << 20)
#define COPY_MAX_DEPTH 8
/* Commits of a session read for its publish, at most.  */
#define LOG_MAX_COMMITS 200

char *
esbx_git_branch_of (const char *session)
{
  char *out, *p;
  size_t len;

  out = xmalloc (strlen (session) * 2 + 8);
  for (p = out; *session; session++)
    {
      /* `..` is the one sequence a valid session name holds that a
         branch name may not.  */
      if (session[0] == '.' && p > out && p[-1] == '.')
        *p++ = '_';
      *p++ = *session;
    }
  *p = '\0';
  len = strlen (out);
  if (out[len - 1] == '.' || (len >= 5 && strcmp (out + len - 5, ".lock") == 0))
    strcat (out, "_");
  return out;
}

int
esbx_git_session_init (int upperfd, const char *session, const char *commit, esbx_error_t *err)
{
  _cleanup_free_ char *branch = esbx_git_branch_of (session);
  _cleanup_free_ char *head = xasprintf ("ref: refs/heads/%s\n", branch);
  _cleanup_free_ char *ref = xasprintf ("%s\n", commit);
  _cleanup_close_ int heads = -1, git = -1;
  static const char *const dirs[] = { ".git", ".git/refs", ".git/refs/heads" };

  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
    if (mkdirat (upperfd, dirs[i], 0755) < 0 && errno != EEXIST)
      return esbx_make_error (err, errno, "mkdir `%s`", dirs[i]);
  heads = esbx_open_dir_at (upperfd, ".git/refs/heads", err);
  git = heads < 0 ? -1 : esbx_open_dir_at (upperfd, ".git", err);
  if (git < 0)
    return -1;
  /* UPPERFD is still in the session's private temp directory, which
     session_create.c renames into sessions/ afterwards: no reader sees a
     file half written, so each is written in place and fsynced, as
     session.json is (a temp file and a rename would add an fsync of the
     directory each).  */
  if (esbx_write_new_file_at (heads, branch, ref, strlen (ref), 0644, err) < 0)
    return -1;
  return esbx_write_new_file_at (git, "HEAD", head, strlen (head), 0644, err);
}

/* ---- a private copy of a session's .git --------------------------------- */

struct copy
{
  uint64_t bytes;
};

static int
copy_file (struct copy *c, int from, const char *name, int to, esbx_error_t *err)
{
  _cleanup_close_ int in = esbx_open_regular_at (from, name, NULL);
  _cleanup_close_ int out = -1;
  struct stat st;

  if (in < 0 || fstat (in, &st) < 0)
    return 0; /* not a regular file: not git's, not copied */
  if (c->bytes + (uint64_t)st.st_size > COPY_MAX_BYTES)
    return esbx_make_error (err, 0, "the session's .git holds more than %llu MiB",
                            COPY_MAX_BYTES >> 20);
  c->bytes += (uint64_t)st.st_size;
  out = TEMP_FAILURE_RETRY (
      openat (to, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (out < 0)
    return esbx_make_error (err, errno, "copy `%s`", name);
  return esbx_copy_file_data (in, out, NULL, NULL, NULL, err);
}

/* Regular files and directories of FROM into TO, DEPTH levels at most.  */
static int
copy_tree (struct copy *c, int from, int to, size_t depth, esbx_error_t *err)
{
  _cleanup_strv_ char **names = esbx_list_dir_fd (from, ".git", NULL);

  for (size_t i = 0; names && names[i]; i++)
    {
      struct stat st;

      if (fstatat (from, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0)
        continue;
      if (S_ISREG (st.st_mode))
        {
          if (copy_file (c, from, names[i], to, err) < 0)
            return -1;
        }
      else if (S_ISDIR (st.st_mode) && depth < COPY_MAX_DEPTH)
        {
          _cleanup_close_ int sub = -1, dst = -1;

          sub = TEMP_FAILURE_RETRY (
              openat (from, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
          if (sub < 0 || (mkdirat (to, names[i], 0700) < 0 && errno != EEXIST))
            continue;
          dst = esbx_open_dir_at (to, names[i], err);
          if (dst < 0 || copy_tree (c, sub, dst, depth + 1, err) < 0)
            return -1;
        }
    }
  return 0;
}

/* Copy what of UPPERFD/.git names and holds commits (HEAD, packed-refs,
   refs/, objects/) into DST.  */
static int
copy_git (int upperfd, int dst, esbx_error_t *err)
{
  static const char *const dirs[] = { "refs", "objects" };
  _cleanup_close_ int git = TEMP_FAILURE_RETRY (
      openat (upperfd, ".git", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  struct copy c = { 0 };

  if (git < 0)
    return 0;
  if (copy_file (&c, git, "HEAD", dst, err) < 0 || copy_file (&c, git, "packed-refs", dst, err) < 0)
    return -1;
  for (size_t i = 0; i < 2; i++)
    {
      _cleanup_close_ int sub = TEMP_FAILURE_RETRY (
          openat (git, dirs[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      _cleanup_close_ int to = -1;

      if (sub < 0)
        continue;
      if (mkdirat (dst, dirs[i], 0700) < 0 && errno != EEXIST)
        return esbx_make_error (err, errno, "mkdir `%s`", dirs[i]);
      to = esbx_open_dir_at (dst, dirs[i], err);
      if (to < 0 || copy_tree (&c, sub, to, 1, err) < 0)
        return -1;
    }
  return 0;
}

/* ---- reading the copy ------------------------------------------------------ */

/* The text of DFD/NAME, its first line, or NULL.  */
static char *
first_line (int dfd, const char *name)
{
  char *buf = NULL, *nl;
  size_t len;

  if (esbx_read_file_at (dfd, name, 4096, &buf, &len, NULL) < 0)
    return NULL;
  nl = memchr (buf, '\n', len);
  if (nl)
    *nl = '\0';
  return buf;
}

static bool
is_hex_id (const char *s)
{
  size_t n = 0;

  for (; s && s[n]; n++)
    if (!strchr ("0123456789abcdef", s[n]))
      return false;
  return n == GIT_OID_HEXSZ;
}

/* The commit the copy's HEAD names (a ref, a packed ref or a detached id),
   or NULL; *REF the ref it goes through (NULL when detached).  */
static char *
head_commit (int dfd, char **ref)
{
  _cleanup_free_ char *head = first_line (dfd, "HEAD");
  char *id;

  *ref = NULL;
  if (head == NULL)
    return NULL;
  if (is_hex_id (head))
    return steal_pointer (&head);
  if (!esbx_has_prefix (head, "ref: refs/") || strstr (head, ".."))
    return NULL;
  *ref = xstrdup (head + 5);
  {
    _cleanup_free_ char *clean = NULL;
    if (esbx_clean_relpath (*ref, false, &clean, NULL) < 0)
      return NULL;
    id = first_line (dfd, clean);
  }
  if (is_hex_id (id))
    return id;
  free (id);
  {
    /* packed-refs: "ID REF" lines.  */
    _cleanup_free_ char *packed = NULL;
    char *line, *save = NULL;
    size_t len;

    if (esbx_read_file_at (dfd, "packed-refs", 16u << 20, &packed, &len, NULL) < 0)
      return NULL;
    for (line = strtok_r (packed, "\n", &save); line; line = strtok_r (NULL, "\n", &save))
      {
        char *sp = strchr (line, ' ');
        if (sp && strcmp (sp + 1, *ref) == 0)
          {
            *sp = '\0';
            return is_hex_id (line) ? xstrdup (line) : NULL;
          }
      }
  }
  return NULL;
}

/* The text of the regular file REL beneath DFD (LIMIT bytes at most), or
   NULL.  */
static char *
read_beneath (int dfd, const char *rel, size_t limit)
{
  _cleanup_close_ int fd = esbx_open_regular_beneath (dfd, rel, NULL);
  _cleanup_free_ char *buf = NULL;
  size_t used = 0;
  ssize_t r;

  if (fd < 0)
    return NULL;
  buf = xmalloc (limit + 1);
  while (used < limit && (r = TEMP_FAILURE_RETRY (read (fd, buf + used, limit - used))) > 0)
    used += (size_t)r;
  buf[used] = '\0';
  return steal_pointer (&buf);
}

/* The `.git` directories of a session's layers, top down: its upper's
   (UPPERFD; -1: none), then those of LOWERS (bottom up) from the last.  A
   layer without one is left out.  */
struct git_dirs
{
  int *fd;
  size_t n;
};

static void
git_dirs_close (struct git_dirs *d)
{
  for (size_t i = 0; i < d->n; i++)
    close (d->fd[i]);
  free (d->fd);
}

/* Adds LAYER's `.git` to D; false when the layers below are hidden from
   it (a `.git` deleted or made anew there).  */
static bool
git_dirs_add (struct git_dirs *d, int layer)
{
  struct stat st;
  int fd;

  if (fstatat (layer, ".git", &st, AT_SYMLINK_NOFOLLOW) < 0)
    return errno == ENOENT;
  if (!S_ISDIR (st.st_mode))
    return false;
  fd = TEMP_FAILURE_RETRY (openat (layer, ".git", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (fd < 0)
    return false;
  d->fd[d->n++] = fd;
  return !esbx_is_opaque_at (fd, ".");
}

static void
git_dirs_open (struct git_dirs *d, int upperfd, char *const *lowers, size_t n_lowers)
{
  d->fd = xmalloc ((n_lowers + 1) * sizeof *d->fd);
  d->n = 0;
  if (upperfd >= 0 && !git_dirs_add (d, upperfd))
    return;
  for (size_t i = n_lowers; i-- > 0;)
    {
      _cleanup_close_ int layer
          = TEMP_FAILURE_RETRY (open (lowers[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));

      if (layer < 0 || !git_dirs_add (d, layer))
        return;
    }
}

/* REL as the session sees it: from the topmost layer that has it.  */
static char *
git_read (const struct git_dirs *d, const char *rel, size_t limit)
{
  char *buf;

  for (size_t i = 0; i < d->n; i++)
    if ((buf = read_beneath (d->fd[i], rel, limit)))
      return buf;
  return NULL;
}

static char *
git_line (const struct git_dirs *d, const char *rel)
{
  char *buf = git_read (d, rel, 4096);

  if (buf)
    buf[strcspn (buf, "\n")] = '\0';
  return buf;
}

int
esbx_git_session_head (int upperfd, char *const *lowers, size_t n_lowers, char **branch,
                       char **commit)
{
  _cleanup_free_ char *head = NULL, *ref = NULL;
  struct git_dirs d;
  int ret = -1;

  *branch = *commit = NULL;
  git_dirs_open (&d, upperfd, lowers, n_lowers);
  head = git_line (&d, "HEAD");
  if (head == NULL)
    goto out;
  if (is_hex_id (head))
    {
      *commit = steal_pointer (&head);
      ret = 0;
      goto out;
    }
  if (!esbx_has_prefix (head, "ref: refs/heads/")
      || esbx_clean_relpath (head + 5, false, &ref, NULL) < 0)
    goto out;
  *branch = xstrdup (ref + strlen ("refs/heads/"));
  *commit = git_line (&d, ref);
  if (*commit && !is_hex_id (*commit))
    {
      free (*commit);
      *commit = NULL;
    }
  if (*commit == NULL)
    {
      /* packed-refs: "ID REF" lines.  */
      _cleanup_free_ char *packed = git_read (&d, "packed-refs", 16u << 20);
      char *line, *save = NULL;

      for (line = packed ? strtok_r (packed, "\n", &save) : NULL; line;
           line = strtok_r (NULL, "\n", &save))
        {
          char *sp = strchr (line, ' ');
          if (sp && strcmp (sp + 1, ref) == 0)
            {
              *sp = '\0';
              *commit = is_hex_id (line) ? xstrdup (line) : NULL;
              break;
            }
        }
    }
  ret = 0;
out:
  git_dirs_close (&d);
  return ret;
}

/* An object database of every layer of PROJECT up to ID (in the stack, or
   a candidate of the merge queue on top of it), and DIR when not NULL;
   *REPO wraps it.  */
int
esbx_git_open_layers (esbx_store_t *store, const char *project, const char *id, const char *dir,
                      git_repository **repo, git_odb **odb, esbx_error_t *err)
{
  _cleanup_strv_ char **ids = NULL;
  size_t n, i;

  *repo = NULL;
  *odb = NULL;
  if (esbx_git_load (err) < 0 || esbx_layer_chain (store, project, id, &ids, &n, err) < 0)
    return -1;
  if (git_odb_new (odb) < 0)
    return esbx_make_error (err, 0, "object database: %s", esbx_git_error ());
  for (i = 0; i < n; i++)
    {
      _cleanup_free_ char *rel = esbx_layer_file (project, ids[i], "diff/.git/objects");
      _cleanup_free_ char *objects = esbx_store_abs (store, rel);

      if (access (objects, F_OK) == 0 && git_odb_add_disk_alternate (*odb, objects) < 0)
        return esbx_make_error (err, 0, "layer `%s`: objects: %s", ids[i], esbx_git_error ());
    }
  if (dir && git_odb_add_disk_alternate (*odb, dir) < 0)
    return esbx_make_error (err, 0, "the session's objects: %s", esbx_git_error ());
  if (git_repository_wrap_odb (repo, *odb) < 0)
    return esbx_make_error (err, 0, "repository: %s", esbx_git_error ());
  return 0;
}

void
esbx_git_log_free (struct esbx_git_log *g)
{
  free (g->head);
  free (g->head_tree);
  free (g->author_name);
  free (g->author_email);
  free (g->messages);
  memset (g, 0, sizeof *g);
}

int
esbx_git_session_log (esbx_store_t *store, const struct esbx_session *s, int upperfd,
                      const char *base_commit, struct esbx_git_log *out, esbx_error_t *err)
{
  _cleanup_free_ char *tmp = NULL, *objects = NULL, *ref = NULL, *head = NULL;
  _cleanup_close_ int tmpfd = -1;
  git_repository *repo = NULL;
  git_odb *odb = NULL;
  git_revwalk *walk = NULL;
  git_oid oid, base;
  struct strv msgs = { 0 };
  esbx_error_t ignored = NULL;
  int ret = -1, count = 0;

  memset (out, 0, sizeof *out);
  tmpfd = esbx_store_tmpdir (store, "git-log", &tmp, err);
  if (tmpfd < 0 || copy_git (upperfd, tmpfd, err) < 0)
    goto out;
  head = head_commit (tmpfd, &ref);
  out->head = head ? xstrdup (head) : NULL;
  if (head == NULL || strcmp (head, base_commit) == 0)
    {
      ret = 0;
      goto out;
    }
  objects = xasprintf ("%s/objects", tmp);
  if (esbx_git_open_layers (store, s->project, s->base, objects, &repo, &odb, err) < 0)
    goto out;
  if (git_oid_fromstr (&oid, head) < 0 || git_oid_fromstr (&base, base_commit) < 0
      || git_revwalk_new (&walk, repo) < 0)
    {
      esbx_make_error (err, 0, "the session's commits: %s", esbx_git_error ());
      goto out;
    }
  {
    git_commit *c = NULL;
    char hex[GIT_OID_HEXSZ + 1];

    if (git_commit_lookup (&c, repo, &oid) == 0)
      {
        git_oid_tostr (hex, sizeof hex, git_commit_tree_id (c));
        out->head_tree = xstrdup (hex);
        git_commit_free (c);
      }
  }
  git_revwalk_sorting (walk, GIT_SORT_TOPOLOGICAL | GIT_SORT_REVERSE);
  /* A HEAD the layers and the session's objects do not hold is no commit
     of the session's: nothing to take from it.  */
  if (git_revwalk_push (walk, &oid) < 0 || git_revwalk_hide (walk, &base) < 0)
    {
      ret = 0;
      goto out;
    }
  while (count < LOG_MAX_COMMITS && git_revwalk_next (&oid, walk) == 0)
    {
      git_commit *c = NULL;
      const git_signature *a;

      if (git_commit_lookup (&c, repo, &oid) < 0)
        break;
      a = git_commit_author (c);
      free (out->author_name);
      free (out->author_email);
      out->author_name = xstrdup (a->name);
      out->author_email = xstrdup (a->email);
      strv_push (&msgs, xstrdup (git_commit_message (c)));
      git_commit_free (c);
      count++;
    }
  out->n_commits = (size_t)count;
  if (msgs.n)
    {
      size_t len = 0, i;
      for (i = 0; i < msgs.n; i++)
        len += strlen (msgs.v[i]) + 1;
      out->messages = xmalloc0 (len + 1);
      for (i = 0; i < msgs.n; i++)
        {
          size_t l = strlen (out->messages);
          strcat (out->messages, msgs.v[i]);
          /* One blank line between messages.  */
          l = strlen (out->messages);
          while (l > 0 && out->messages[l - 1] == '\n')
            out->messages[--l] = '\0';
          if (i + 1 < msgs.n)
            strcat (out->messages, "\n\n");
        }
    }
  ret = 0;
out:
  strv_free (&msgs);
  git_revwalk_free (walk);
  git_repository_free (repo);
  git_odb_free (odb);
  if (tmp && esbx_rm_rf_at (AT_FDCWD, tmp, &ignored) < 0)
    esbx_error_free (&ignored);
  return ret;
}

int
esbx_git_session_rebase (int upperfd, const char *commit, bool keep_index, esbx_error_t *err)
{
  _cleanup_close_ int git = TEMP_FAILURE_RETRY (
      openat (upperfd, ".git", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  _cleanup_free_ char *head = NULL, *line = xasprintf ("%s\n", commit);

  if (git < 0)
    return esbx_make_error (err, errno, "the session's .git");
  /* The layers' index is the new head's tree: the session's work shows
     as changes against it.  */
  if (!keep_index && unlinkat (git, "index", 0) < 0 && errno != ENOENT)
    return esbx_make_error (err, errno, "remove the session's .git/index");
  head = first_line (git, "HEAD");
  if (head && esbx_has_prefix (head, "ref: refs/heads/") && !strstr (head, ".."))
    {
      _cleanup_free_ char *ref = NULL;
      _cleanup_close_ int dir = -1;
      char *slash;

      if (esbx_clean_relpath (head + 5, false, &ref, err) < 0)
        return -1;
      slash = strrchr (ref, '/');
      *slash = '\0';
      /* Beneath .git: a session's refs/ may hold symlinks.  */
      dir = esbx_open_beneath (git, ref, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0, err);
      if (dir < 0)
        return esbx_error_wrap (err, "the session's branch");
      return esbx_write_file_atomic_at (dir, slash + 1, line, strlen (line), 0644, err);
    }
  /* Detached (or not git's): HEAD itself.  */
  return esbx_write_file_atomic_at (git, "HEAD", line, strlen (line), 0644, err);
}
