/* Ignore rules: the syntax and matching of gitignore(5), written against
   git's documentation and checked against `git check-ignore` itself
   (tests/unit/test_ignore.c).  The rules are read from the merged view of a
   session: its own .gitignore files where it has them, its base's
   otherwise.  */
#include "ignore.h"
#include "fs.h"
#include "log.h"
#include "path.h"
#include "utils.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

struct rule
{
  char *pat;
  bool negated;  /* `!pattern`: un-ignores */
  bool dir_only; /* `pattern/`: directories only */
  bool basename; /* no `/` inside: matches the last component at any depth */
};

struct level
{
  char *dir; /* "" for the root, "a/b" below it */
  size_t dirlen;
  struct rule *v;
  size_t n;
};

struct esbx_ignore
{
  struct level *v; /* root first */
  size_t n, cap;
  struct level project; /* .esbxignore */
};

/* ---- wildmatch ---------------------------------------------------------- */

enum wm
{
  WM_MATCH,
  WM_NOMATCH,
  WM_ABORT_ALL,         /* the text ran out: no later start can match */
  WM_ABORT_TO_STARSTAR, /* a `*` would have to cross a `/` */
};

static bool
class_has (const char *name, size_t len, unsigned char c)
{
  static const struct
  {
    const char *name;
    int (*is) (int);
  } classes[] = {
    { "alnum", isalnum }, { "alpha", isalpha }, { "blank", isblank }, { "cntrl", iscntrl },
    { "digit", isdigit }, { "graph", isgraph }, { "lower", islower }, { "print", isprint },
    { "punct", ispunct }, { "space", isspace }, { "upper", isupper }, { "xdigit", isxdigit },
  };
  size_t i;

  for (i = 0; i < ARRAY_SIZE (classes); i++)
    if (strlen (classes[i].name) == len && memcmp (classes[i].name, name, len) == 0)
      return classes[i].is (c) != 0;
  return false;
}

static bool
class_known (const char *name, size_t len)
{
  static const char *const names[] = { "alnum", "alpha", "blank", "cntrl", "digit", "graph",
                                       "lower", "print", "punct", "space", "upper", "xdigit" };
  size_t i;

  for (i = 0; i < ARRAY_SIZE (names); i++)
    if (strlen (names[i]) == len && memcmp (names[i], name, len) == 0)
      return true;
  return false;
}

/* A bracket expression starting after its `[`: 1 when C is in it, 0 when
   not, -1 when it is malformed (no closing `]`, unknown class).  *END
   receives the position of its `]`.  The first character (after `!` or
   `^`) is taken literally, even a `]`.  */
static int
bracket (const char *p, unsigned char c, const char **end)
{
  bool negated = false, hit = false;
  unsigned char prev = 0, pc;

  if (*p == '!' || *p == '^')
    {
      negated = true;
      p++;
    }
  for (pc = (unsigned char)*p;; pc = (unsigned char)*++p)
    {
      if (pc == '\0')
        return -1;
      if (pc == '\\')
        {
          pc = (unsigned char)*++p;
          if (pc == '\0')
            return -1;
          hit |= c == pc;
        }
      else if (pc == '-' && prev && p[1] && p[1] != ']')
        {
          pc = (unsigned char)*++p;
          if (pc == '\\' && (pc = (unsigned char)*++p) == '\0')
            return -1;
          hit |= c >= prev && c <= pc;
          pc = 0; /* a range does not start another one */
        }
      else if (pc == '[' && p[1] == ':')
        {
          const char *name = p + 2, *close = strchr (name, ']');

          if (close == NULL)
            return -1;
          if (close > name && close[-1] == ':')
            {
              size_t len = (size_t)(close - name) - 1;
              if (!class_known (name, len))
                return -1;
              hit |= class_has (name, len, c);
              p = close;
              pc = 0;
            }
          else
            hit |= c == '['; /* not a class: a plain `[` */
        }
      else
        hit |= c == pc;
      prev = pc;
      if (p[1] == ']')
        break;
    }
  *end = p + 1;
  return hit != negated;
}

static enum wm wild (const char *pat, const char *p, const char *t, bool pathname);

/* The `*` (or run of them) at P against T.  */
static enum wm
star (const char *pat, const char *p, const char *t, bool pathname)
{
  const char *first = p;
  bool cross = !pathname; /* may this star match a `/` */

  while (*p == '*')
    p++;
  /* A double star is special only as a whole path component (alone,
     first, last or between slashes): it then matches across directories,
     and one between slashes also matches none.  */
  if (pathname && p - first >= 2 && (first == pat || first[-1] == '/')
      && (*p == '\0' || *p == '/' || (p[0] == '\\' && p[1] == '/')))
    {
      if (*p == '/' && wild (pat, p + 1, t, pathname) == WM_MATCH)
        return WM_MATCH;
      cross = true;
    }
  if (*p == '\0')
    return !cross && strchr (t, '/') ? WM_NOMATCH : WM_MATCH;
  if (!cross && *p == '/')
    {
      const char *slash = strchr (t, '/');
      return slash ? wild (pat, p + 1, slash + 1, pathname) : WM_NOMATCH;
    }
  for (; *t; t++)
    {
      enum wm r = wild (pat, p, t, pathname);

      if (r == WM_NOMATCH)
        {
          if (!cross && *t == '/')
            return WM_ABORT_TO_STARSTAR;
          continue;
        }
      if (!cross || r != WM_ABORT_TO_STARSTAR)
        return r;
    }
  return WM_ABORT_ALL;
}

static enum wm
wild (const char *pat, const char *p, const char *t, bool pathname)
{
  for (; *p; p++, t++)
    {
      unsigned char c = (unsigned char)*t;
      int r;

      if (c == '\0' && *p != '*')
        return WM_ABORT_ALL;
      switch (*p)
        {
        case '*':
          return star (pat, p, t, pathname);
        case '?':
          if (pathname && c == '/')
            return WM_NOMATCH;
          break;
        case '[':
          r = bracket (p + 1, c, &p);
          if (r < 0)
            return WM_ABORT_ALL;
          if (r == 0 || (pathname && c == '/'))
            return WM_NOMATCH;
          break;
        case '\\':
          /* A trailing backslash matches nothing.  */
          if (p[1] == '\0' || (unsigned char)*++p != c)
            return WM_NOMATCH;
          break;
        default:
          if ((unsigned char)*p != c)
            return WM_NOMATCH;
        }
    }
  return *t ? WM_NOMATCH : WM_MATCH;
}

bool
esbx_wildmatch (const char *pattern, const char *text, bool pathname)
{
  return wild (pattern, pattern, text, pathname) == WM_MATCH;
}

/* ---- rule files --------------------------------------------------------- */

/* Trailing spaces go unless escaped with a backslash.  */
static void
trim_trailing_spaces (char *s)
{
  char *cut = NULL;

  for (; *s; s++)
    {
      if (*s == ' ')
        {
          if (cut == NULL)
            cut = s;
          continue;
        }
      cut = NULL;
      if (*s == '\\' && *++s == '\0')
        return;
    }
  if (cut)
    *cut = '\0';
}

static void
add_rule (struct level *l, char *line)
{
  struct rule r = { 0 };
  char *p = line;
  size_t len;

  trim_trailing_spaces (p);
  if (*p == '!')
    {
      r.negated = true;
      p++;
    }
  len = strlen (p);
  if (len && p[len - 1] == '/')
    {
      r.dir_only = true;
      p[--len] = '\0';
    }
  r.basename = strchr (p, '/') == NULL;
  if (*p == '/')
    p++;
  if (*p == '\0')
    return;
  r.pat = xstrdup (p);
  l->v = xrealloc (l->v, (l->n + 1) * sizeof *l->v);
  l->v[l->n++] = r;
}

static void
parse (struct level *l, const char *dir, const char *text, size_t len)
{
  _cleanup_free_ char *buf = xstrndup (text, len);
  char *line = buf, *nl;

  l->dir = xstrdup (dir);
  l->dirlen = strlen (dir);
  if (len >= 3 && memcmp (buf, "\xef\xbb\xbf", 3) == 0)
    line += 3;
  for (; line; line = nl)
    {
      size_t n;

      nl = strchr (line, '\n');
      if (nl)
        *nl++ = '\0';
      n = strlen (line);
      if (n && line[n - 1] == '\r')
        line[n - 1] = '\0';
      if (line[0] != '\0' && line[0] != '#')
        add_rule (l, line);
    }
}

static void
level_clear (struct level *l)
{
  size_t i;

  for (i = 0; i < l->n; i++)
    free (l->v[i].pat);
  free (l->v);
  free (l->dir);
  memset (l, 0, sizeof *l);
}

struct esbx_ignore *
esbx_ignore_new (void)
{
  return xmalloc0 (sizeof (struct esbx_ignore));
}

void
esbx_ignore_free (struct esbx_ignore *ig)
{
  if (ig == NULL)
    return;
  while (ig->n)
    esbx_ignore_pop (ig);
  level_clear (&ig->project);
  free (ig->v);
  free (ig);
}

void
esbx_ignore_push (struct esbx_ignore *ig, const char *dir, const char *text, size_t len)
{
  if (ig->n == ig->cap)
    {
      ig->cap = ig->cap ? ig->cap * 2 : 8;
      ig->v = xrealloc (ig->v, ig->cap * sizeof *ig->v);
    }
  memset (&ig->v[ig->n], 0, sizeof *ig->v);
  parse (&ig->v[ig->n++], dir, text, len);
}

void
esbx_ignore_push_project (struct esbx_ignore *ig, const char *text, size_t len)
{
  level_clear (&ig->project);
  parse (&ig->project, "", text, len);
}

void
esbx_ignore_pop (struct esbx_ignore *ig)
{
  if (ig->n)
    level_clear (&ig->v[--ig->n]);
}

/* 1 ignored, 0 un-ignored by a negation, -1 no line of L says.  */
static int
level_match (const struct level *l, const char *rel, const char *base, bool is_dir)
{
  const char *sub = rel;
  size_t i;

  if (l->dirlen)
    {
      if (strncmp (rel, l->dir, l->dirlen) != 0 || rel[l->dirlen] != '/')
        return -1;
      sub = rel + l->dirlen + 1;
    }
  for (i = l->n; i > 0; i--)
    {
      const struct rule *r = &l->v[i - 1];

      if (r->dir_only && !is_dir)
        continue;
      if (r->basename ? esbx_wildmatch (r->pat, base, false) : esbx_wildmatch (r->pat, sub, true))
        return r->negated ? 0 : 1;
    }
  return -1;
}

bool
esbx_ignore_match (const struct esbx_ignore *ig, const char *rel, bool is_dir)
{
  const char *slash = strrchr (rel, '/');
  const char *base = slash ? slash + 1 : rel;
  size_t i;
  int r;

  for (i = ig->n; i > 0; i--)
    if ((r = level_match (&ig->v[i - 1], rel, base, is_dir)) >= 0)
      return r == 1;
  return level_match (&ig->project, rel, base, is_dir) == 1;
}

/* ---- the merged view's rule files --------------------------------------- */

/* The text of NAME in DIRFD when it is a regular file; *TEXT NULL when
   there is none (missing, a whiteout, a symlink: git does not follow one
   either).  */
static int
read_rules (int dirfd, const char *name, const char *shown, char **text, size_t *len, bool *present,
            esbx_error_t *err)
{
  struct stat st;

  *text = NULL;
  *present = false;
  if (fstatat (dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    {
      if (errno == ENOENT || errno == ENOTDIR)
        return 0;
      return esbx_make_error (err, errno, "stat `%s`", shown);
    }
  *present = true;
  if (!S_ISREG (st.st_mode))
    return 0;
  if ((size_t)st.st_size > ESBX_IGNORE_MAX_SIZE)
    {
      esbx_warn ("`%s`: larger than %u bytes: its ignore rules are not used", shown,
                 ESBX_IGNORE_MAX_SIZE);
      return 0;
    }
  if (esbx_read_file_at (dirfd, name, ESBX_IGNORE_MAX_SIZE, text, len, err) < 0)
    {
      if (err && *err && (*err)->status == EFBIG)
        {
          esbx_warn ("`%s`: larger than %u bytes: its ignore rules are not used", shown,
                     ESBX_IGNORE_MAX_SIZE);
          esbx_error_free (err);
          return 0;
        }
      return esbx_error_wrap (err, "ignore rules");
    }
  return 0;
}

/* The merged view's NAME in directory REL: the upper's, else the base's.  */
static int
merged_rules (struct esbx_stack *base, int dirfd, bool opaque, const char *rel, const char *name,
              char **text, size_t *len, esbx_error_t *err)
{
  _cleanup_free_ char *path = rel[0] ? xasprintf ("%s/%s", rel, name) : xstrdup (name);
  _cleanup_free_ char *bname = NULL;
  _cleanup_close_ int pfd = -1;
  struct stat bst;
  size_t layer;
  bool present;

  if (read_rules (dirfd, name, path, text, len, &present, err) < 0)
    return -1;
  if (present || opaque || base == NULL)
    return 0;
  if (esbx_stack_lookup (base, path, &layer, &bst) != 1 || !S_ISREG (bst.st_mode))
    return 0;
  pfd = esbx_open_parent_beneath (base->fds[layer], path, &bname, err);
  if (pfd < 0)
    return -1;
  return read_rules (pfd, bname, path, text, len, &present, err);
}

int
esbx_ignore_enter (struct esbx_ignore *ig, struct esbx_stack *base, int dirfd, bool opaque,
                   const char *rel, const char *session, esbx_error_t *err)
{
  _cleanup_free_ char *text = NULL;
  size_t len = 0;

  if (rel[0] == '\0')
    {
      if (merged_rules (base, dirfd, opaque, rel, ESBX_IGNORE_PROJECT_FILE, &text, &len, err) < 0)
        return esbx_error_wrap (err, "session `%s`", session);
      esbx_ignore_push_project (ig, text ? text : "", len);
      free (text);
      text = NULL;
      len = 0;
    }
  if (merged_rules (base, dirfd, opaque, rel, ESBX_IGNORE_FILE, &text, &len, err) < 0)
    return esbx_error_wrap (err, "session `%s`", session);
  esbx_ignore_push (ig, rel, text ? text : "", len);
  return 0;
}

void
esbx_ignore_leave (struct esbx_ignore *ig)
{
  esbx_ignore_pop (ig);
}
