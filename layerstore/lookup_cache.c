/* The directories a stack's lookups walked (lookup_cache.h).  Each layer
   keeps the chain of the last directory walked in it, every level with its
   fd and whether it or a directory above it is opaque; or, when that walk
   met a missing component or a non-directory, the failure, which every
   path below that component shares.  A walk starts from the deepest level
   its path shares with the chain and replaces the rest.  */
#include "lookup_cache.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

/* The stack's own fds and the cache's stay under this, a quarter of the
   usual soft limit: scans hold fds of their own (ESBX_WALK_HELD_FDS), and
   a walk past the budget is still right, only not remembered.  */
#define MAX_STACK_FDS 256

struct level
{
  int fd;
  size_t end;  /* its path is the chain's first END bytes */
  bool opaque; /* this directory or one above it */
};

struct chain
{
  char *path; /* the levels' components, then the failed one if any */
  size_t len, cap;
  struct level *v;
  size_t n, vcap;
  enum esbx_probe failed; /* FOUND: no failure */
  bool failed_stop;
};

struct esbx_stack_cache
{
  struct chain *chains; /* one per layer */
  size_t n;
  size_t held, budget;
  int spare; /* the end of a walk past the budget, until the next walk */
};

static struct esbx_stack_cache *
cache_of (struct esbx_stack *st)
{
  struct esbx_stack_cache *c = st->cache;
  size_t i;

  if (c)
    return c;
  c = xmalloc0 (sizeof *c);
  c->chains = xmalloc0 (st->n * sizeof *c->chains);
  c->n = st->n;
  for (i = 0; i < st->n; i++)
    c->chains[i].failed = ESBX_PROBE_FOUND;
  c->budget = st->n < MAX_STACK_FDS ? MAX_STACK_FDS - st->n : 0;
  c->spare = -1;
  st->cache = c;
  return c;
}

static void
truncate_chain (struct esbx_stack_cache *c, struct chain *ch, size_t m)
{
  while (ch->n > m)
    {
      close (ch->v[--ch->n].fd);
      c->held--;
    }
  ch->len = m ? ch->v[m - 1].end : 0;
  ch->failed = ESBX_PROBE_FOUND;
}

static void
set_path (struct chain *ch, const char *dir, size_t end)
{
  if (end + 1 > ch->cap)
    {
      ch->cap = end + 1 > 2 * ch->cap ? end + 1 : 2 * ch->cap;
      ch->path = xrealloc (ch->path, ch->cap);
    }
  memcpy (ch->path, dir, end);
  ch->path[end] = '\0';
  ch->len = end;
}

static void
push_level (struct esbx_stack_cache *c, struct chain *ch, const char *dir, int fd, size_t end,
            bool opaque)
{
  if (ch->n == ch->vcap)
    {
      ch->vcap = ch->vcap ? 2 * ch->vcap : 8;
      ch->v = xrealloc (ch->v, ch->vcap * sizeof *ch->v);
    }
  ch->v[ch->n++] = (struct level){ .fd = fd, .end = end, .opaque = opaque };
  c->held++;
  set_path (ch, dir, end);
}

/* Open directory NAME in DFD without following a symlink, and say whether
   it is opaque when ASK (the bottom layer has nothing below to hide); or -1
   and *FAIL: GONE when NAME is there and is not a directory (a whiteout, a
   file, a symlink), MISSING otherwise.  */
static int
open_component (int dfd, const char *name, bool ask, bool *opaque, enum esbx_probe *fail)
{
  struct stat st;
  char v[4];
  int fd;

  *opaque = false;
  fd = TEMP_FAILURE_RETRY (openat (dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (fd < 0 && errno == EACCES)
    /* Not readable (not root): walked through, its xattr unread as
       esbx_is_opaque_at leaves it.  */
    fd = TEMP_FAILURE_RETRY (openat (dfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (fd >= 0)
    {
      *opaque = ask && fgetxattr (fd, "trusted.overlay.opaque", v, sizeof v) == 1 && v[0] == 'y';
      return fd;
    }
  *fail = fstatat (dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR (st.st_mode)
              ? ESBX_PROBE_GONE
              : ESBX_PROBE_MISSING;
  return -1;
}

/* How many levels of CH are DIR or above it; *COMMON: the bytes DIR and
   the chain's path share.  */
static size_t
matching_levels (const struct chain *ch, const char *dir, size_t len, size_t *common)
{
  size_t max = len < ch->len ? len : ch->len;
  size_t cp = 0, j;

  while (cp < max && dir[cp] == ch->path[cp])
    cp++;
  *common = cp;
  for (j = ch->n; j > 0; j--)
    {
      size_t e = ch->v[j - 1].end;
      if (e <= cp && (e == len || dir[e] == '/'))
        return j;
    }
  return 0;
}

enum esbx_probe
esbx_stack_walk (struct esbx_stack *st, size_t layer, const char *dir, size_t len, int *fd,
                 bool *stop)
{
  struct esbx_stack_cache *c;
  struct chain *ch;
  _cleanup_free_ char *copy = NULL;
  _cleanup_close_ int temp = -1;
  size_t m, common, start;
  bool opaque, chained = true;
  int cur;

  *stop = false;
  if (len == 0)
    {
      *fd = st->fds[layer];
      return ESBX_PROBE_FOUND;
    }
  c = cache_of (st);
  if (c->spare >= 0)
    {
      close (c->spare);
      c->spare = -1;
    }
  ch = &c->chains[layer];
  m = matching_levels (ch, dir, len, &common);
  if (ch->failed != ESBX_PROBE_FOUND && m == ch->n && common == ch->len
      && (len == ch->len || dir[ch->len] == '/'))
    {
      *stop = ch->failed_stop;
      return ch->failed;
    }
  truncate_chain (c, ch, m);
  cur = m ? ch->v[m - 1].fd : st->fds[layer];
  opaque = m ? ch->v[m - 1].opaque : false;
  start = m ? ch->v[m - 1].end + 1 : 0;
  copy = xstrndup (dir, len);
  while (start <= len)
    {
      char *slash = strchr (copy + start, '/');
      size_t end = slash ? (size_t)(slash - copy) : len;
      enum esbx_probe fail = ESBX_PROBE_MISSING;
      bool op;
      int next;

      copy[end] = '\0';
      /* Below an opaque directory, or in the bottom layer, whether this
         one is opaque changes nothing.  */
      next = open_component (cur, copy + start, layer > 0 && !opaque, &op, &fail);
      if (next < 0)
        {
          /* Remembered only after every level above it: the failure is
             then what the chain's path says.  */
          if (chained && end > start)
            {
              set_path (ch, dir, end);
              ch->failed = fail;
              ch->failed_stop = opaque;
            }
          *stop = opaque;
          return fail;
        }
      opaque = opaque || op;
      if (chained && c->held < c->budget)
        push_level (c, ch, dir, next, end, opaque);
      else
        {
          chained = false;
          if (temp >= 0)
            close (temp);
          temp = next;
        }
      cur = next;
      start = end + 1;
    }
  if (temp >= 0)
    c->spare = take_fd (&temp);
  *fd = cur;
  *stop = opaque;
  return ESBX_PROBE_FOUND;
}

void
esbx_stack_cache_free (struct esbx_stack_cache *c)
{
  size_t i;

  if (c == NULL)
    return;
  for (i = 0; i < c->n; i++)
    {
      truncate_chain (c, &c->chains[i], 0);
      free (c->chains[i].path);
      free (c->chains[i].v);
    }
  if (c->spare >= 0)
    close (c->spare);
  free (c->chains);
  free (c);
}
