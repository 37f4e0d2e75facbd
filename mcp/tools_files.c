/* The file tools: read, write, edit, list and delete files of a session's
   workspace, its merged view mounted on demand as the gateway's file
   routes do.  Every path is cleaned (no "..") and resolved beneath the
   view's directory fd (path.h: openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS,
   or the O_NOFOLLOW walk): no symlink is followed, none leaves the
   workspace, a FIFO or a device is never opened.  Writes go to a new file
   renamed over the old one, so a reader never sees half a file and a
   symlink planted in its place is replaced, never followed.  */
#include "mcp_internal.h"
#include "fs.h"
#include "path.h"
#include "sandbox.h"
#include "text.h"
#include "utils.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The workspace of the call's session as a directory fd, and PATH (NULL:
   the workspace itself) relative to it in *REL.  An absolute path must be
   under the session's workspace (/workspace): the file tools reach the
   workspace only.  */
static int
open_workspace (struct mcp_call *c, const char *path, bool allow_root, int *root, char **rel,
                esbx_error_t *err)
{
  _cleanup_free_ char *merged = NULL, *shown = NULL;
  struct esbx_session *rec = NULL;
  const char *rest = path ? path : "";
  esbx_error_t perr = NULL;
  int r;

  if (esbx_session_load (c->store, c->session, &rec, err) < 0)
    return -1;
  if (rest[0] == '/')
    {
      size_t wlen = strlen (rec->workspace);

      if (strncmp (rest, rec->workspace, wlen) != 0 || (rest[wlen] != '\0' && rest[wlen] != '/'))
        {
          shown = esbx_quote_path (path);
          r = esbx_make_error_kind (err, ESBX_ERR_FORBIDDEN, 0,
                                    "path `%s` is outside the workspace `%s`", shown,
                                    rec->workspace);
          esbx_session_free (rec);
          return r;
        }
      rest += wlen;
    }
  esbx_session_free (rec);
  if (esbx_clean_relpath (rest, allow_root, rel, &perr) < 0)
    {
      shown = esbx_quote_path (path ? path : "");
      esbx_make_error_kind (err, perr->status == ENAMETOOLONG ? ESBX_ERR_TOO_LARGE : ESBX_ERR_USAGE,
                            perr->status, "%s", perr->msg);
      esbx_error_free (&perr);
      return -1;
    }
  if (esbx_sandbox_view_acquire (c->store, c->session, &merged, err) < 0)
    return -1;
  *root = esbx_open_dir_at (AT_FDCWD, merged, err);
  return *root < 0 ? -1 : 0;
}

/* The regular file REL beneath ROOT, whole: at most MCP_MAX_FILE bytes.  */
static int
read_whole (int root, const char *rel, char **buf, size_t *len, struct stat *st, esbx_error_t *err)
{
  _cleanup_close_ int fd = esbx_open_regular_beneath (root, rel, err);
  size_t n = 0;
  ssize_t r;

  if (fd < 0 || fstat (fd, st) < 0)
    return fd < 0 ? -1 : esbx_make_error (err, errno, "stat `%s`", rel);
  if ((uint64_t)st->st_size > MCP_MAX_FILE)
    return esbx_make_error_kind (err, ESBX_ERR_TOO_LARGE, 0,
                                 "`%s` is %lld bytes, over the %u bytes a file tool takes whole",
                                 rel, (long long)st->st_size, MCP_MAX_FILE);
  *buf = xmalloc ((size_t)st->st_size + 1);
  while (n < (size_t)st->st_size
         && (r = TEMP_FAILURE_RETRY (read (fd, *buf + n, (size_t)st->st_size - n))) > 0)
    n += (size_t)r;
  (*buf)[n] = '\0';
  *len = n;
  return 0;
}

static bool
is_text (const char *buf, size_t len)
{
  return esbx_utf8_valid (buf, len) && memchr (buf, '\0', len) == NULL;
}

int
mcp_tool_file_read (struct mcp_call *c, esbx_error_t *err)
{
  _cleanup_close_ int root = -1;
  _cleanup_free_ char *rel = NULL, *buf = NULL, *out = NULL;
  int64_t first = mcp_arg_int (c, "start_line", 1), last = mcp_arg_int (c, "end_line", 0);
  const char *path = mcp_arg_string (c, "path");
  size_t len = 0, lines = 0, line, i, from, to;
  struct stat st;
  json_t *o;

  if (open_workspace (c, path, false, &root, &rel, err) < 0
      || read_whole (root, rel, &buf, &len, &st, err) < 0)
    return esbx_error_wrap (err, "file_read");
  if (!is_text (buf, len))
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "file_read: `%s` is not UTF-8 text (%zu bytes): run `base64 %s` "
                                 "to see it",
                                 rel, len, rel);
  if (last && last < first)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "file_read: end_line %lld is before start_line %lld",
                                 (long long)last, (long long)first);
  /* Lines FIRST..LAST (1-based, inclusive) as the bytes FROM..TO.  */
  from = first <= 1 ? 0 : len;
  to = len;
  for (i = 0, line = 1; i < len; i++)
    if (buf[i] == '\n')
      {
        lines++;
        if (last && (int64_t)line == last && to == len)
          to = i + 1;
        line++;
        if ((int64_t)line == first)
          from = i + 1;
      }
  if (len && buf[len - 1] != '\n')
    lines++;
  if (from > to)
    from = to;
  out = xstrndup (buf + from, to > from ? to - from : 0);
  o = json_new (JSON_OBJECT);
  json_set_string (o, "path", rel);
  json_set_string (o, "content", out);
  json_set_int (o, "size", (int64_t)st.st_size);
  if (first > 1 || last)
    {
      json_set_int (o, "start_line", first);
      json_set_int (o, "end_line", last ? last : (int64_t)lines);
    }
  else
    json_set_int (o, "lines", (int64_t)lines);
  mcp_result_text (c, o, steal_pointer (&out));
  return 0;
}

/* The parent directory of REL beneath ROOT, made when missing, one
   component at a time and never through a symlink; *BASE is REL's last
   component.  */
static int
open_parent_made (int root, const char *rel, char **base, esbx_error_t *err)
{
  _cleanup_free_ char *copy = xstrdup (rel);
  _cleanup_close_ int dir = fcntl (root, F_DUPFD_CLOEXEC, 3);
  char *p = copy, *slash;

  if (dir < 0)
    return esbx_make_error (err, errno, "dup");
  while ((slash = strchr (p, '/')))
    {
      int next;

      *slash = '\0';
      next = TEMP_FAILURE_RETRY (openat (dir, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (next < 0 && errno == ENOENT)
        {
          if (mkdirat (dir, p, 0755) < 0 && errno != EEXIST)
            return esbx_make_error (err, errno, "mkdir `%s`", copy);
          next = TEMP_FAILURE_RETRY (
              openat (dir, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        }
      if (next < 0)
        return esbx_make_error (err, errno == ELOOP ? ELOOP : errno, "`%s`%s", copy,
                                errno == ELOOP || errno == ENOTDIR
                                    ? " is a symlink or not a directory; refusing to follow it"
                                    : "");
      close (dir);
      dir = next;
      *slash = '/';
      p = slash + 1;
    }
  *base = xstrdup (p);
  return take_fd (&dir);
}

/* DATA as the whole of BASE in DIR, mode MODE: a new file renamed over
   the old.  */
static int
replace_file (int dir, const char *rel, const char *base, const char *data, size_t len, mode_t mode,
              esbx_error_t *err)
{
  _cleanup_free_ char *suffix = esbx_random_hex (6), *tmp = NULL;
  _cleanup_close_ int fd = -1;
  struct stat st;

  if (fstatat (dir, base, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR (st.st_mode))
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "`%s` is a directory", rel);
  tmp = xasprintf (".%.200s.esbx-%s", base, suffix);
  fd = TEMP_FAILURE_RETRY (
      openat (dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (fd < 0)
    return esbx_make_error (err, errno, "create `%s`", rel);
  if (esbx_write_all (fd, data, len) < 0 || fchmod (fd, mode) < 0
      || renameat (dir, tmp, dir, base) < 0)
    {
      int saved = errno;

      unlinkat (dir, tmp, 0);
      return esbx_make_error (err, saved, "write `%s`", rel);
    }
  return 0;
}

static int
parse_mode (const char *s, mode_t *mode, esbx_error_t *err)
{
  char *end;
  unsigned long m;

  errno = 0;
  m = strtoul (s, &end, 8);
  if (*s == '\0' || *end || errno || m > 0777)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "argument `mode` must be octal permission bits (no setuid, setgid "
                                 "or sticky), e.g. 0644: not `%s`",
                                 s);
  *mode = (mode_t)m;
  return 0;
}

int
mcp_tool_file_write (struct mcp_call *c, esbx_error_t *err)
{
  _cleanup_close_ int root = -1, dir = -1;
  _cleanup_free_ char *rel = NULL, *base = NULL;
  const char *contents = mcp_arg_string (c, "contents"), *mode_s = mcp_arg_string (c, "mode");
  size_t len = strlen (contents);
  mode_t mode = 0644;
  struct stat st;
  bool created;
  json_t *o;

  if (len > MCP_MAX_FILE)
    return esbx_make_error_kind (err, ESBX_ERR_TOO_LARGE, 0,
                                 "file_write: %zu bytes, over the %u a file tool takes", len,
                                 MCP_MAX_FILE);
  if ((mode_s && parse_mode (mode_s, &mode, err) < 0)
      || open_workspace (c, mcp_arg_string (c, "path"), false, &root, &rel, err) < 0
      || (dir = open_parent_made (root, rel, &base, err)) < 0)
    return esbx_error_wrap (err, "file_write");
  created = fstatat (dir, base, &st, AT_SYMLINK_NOFOLLOW) < 0;
  if (!created && mode_s == NULL && S_ISREG (st.st_mode))
    mode = st.st_mode & 0777;
  if (replace_file (dir, rel, base, contents, len, mode, err) < 0)
    return esbx_error_wrap (err, "file_write");
  o = json_new (JSON_OBJECT);
  json_set_string (o, "path", rel);
  json_set_int (o, "size", (int64_t)len);
  json_set (o, "created", json_new_bool (created));
  mcp_result_text (c, o, xasprintf ("wrote %zu bytes to `%s`", len, rel));
  return 0;
}

int
mcp_tool_file_edit (struct mcp_call *c, esbx_error_t *err)
{
  _cleanup_close_ int root = -1, dir = -1;
  _cleanup_free_ char *rel = NULL, *base = NULL, *buf = NULL, *out = NULL;
  const char *search = mcp_arg_string (c, "search_text"),
             *replace = mcp_arg_string (c, "replace_text");
  int64_t which = mcp_arg_int (c, "which_match", 0);
  size_t len = 0, slen = strlen (search), rlen = strlen (replace), n = 0, at = 0, olen;
  const char *p, *chosen = NULL;
  struct stat st;
  json_t *o;

  if (slen == 0)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "file_edit: search_text is empty");
  if (open_workspace (c, mcp_arg_string (c, "path"), false, &root, &rel, err) < 0
      || read_whole (root, rel, &buf, &len, &st, err) < 0)
    return esbx_error_wrap (err, "file_edit");
  for (p = buf; (p = memmem (p, len - (size_t)(p - buf), search, slen)); p += slen)
    if (++n == (size_t)which || (which == 0 && n == 1))
      chosen = p;
  if (n == 0)
    return esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0,
                                 "file_edit `%s`: the search text is not in the file; nothing "
                                 "changed",
                                 rel);
  if (n > 1 && which == 0)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "file_edit `%s`: the search text is found %zu times: say which "
                                 "with which_match (1 to %zu); nothing changed",
                                 rel, n, n);
  if ((size_t)which > n)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "file_edit `%s`: which_match %lld, but the search text is found "
                                 "%zu times; nothing changed",
                                 rel, (long long)which, n);
  at = (size_t)(chosen - buf);
  olen = len - slen + rlen;
  if (olen > MCP_MAX_FILE)
    return esbx_make_error_kind (err, ESBX_ERR_TOO_LARGE, 0,
                                 "file_edit `%s`: the result would be %zu bytes, over %u", rel,
                                 olen, MCP_MAX_FILE);
  out = xmalloc (olen + 1);
  memcpy (out, buf, at);
  memcpy (out + at, replace, rlen);
  memcpy (out + at + rlen, buf + at + slen, len - at - slen);
  if ((dir = esbx_open_parent_beneath (root, rel, &base, err)) < 0
      || replace_file (dir, rel, base, out, olen, st.st_mode & 0777, err) < 0)
    return esbx_error_wrap (err, "file_edit");
  o = json_new (JSON_OBJECT);
  json_set_string (o, "path", rel);
  json_set_int (o, "matches", (int64_t)n);
  json_set_int (o, "replaced", which ? which : 1);
  json_set_int (o, "size", (int64_t)olen);
  mcp_result_text (c, o,
                   xasprintf ("edited `%s`: replaced match %lld of %zu", rel,
                              (long long)(which ? which : 1), n));
  return 0;
}

struct listing
{
  json_t *entries;
  FILE *text;
  size_t n;
  bool truncated;
};

/* The entries of directory FD (PREFIX its path), DEPTH levels down.  */
static void
list_dir (struct listing *l, int fd, const char *prefix, int depth)
{
  esbx_error_t err = NULL;
  _cleanup_strv_ char **names = esbx_list_dir_fd (fd, prefix, &err);
  size_t i;

  esbx_error_free (&err);
  for (i = 0; names && names[i]; i++)
    {
      _cleanup_free_ char *path = NULL;
      struct stat st;
      json_t *o;

      if (l->n >= MCP_MAX_LIST)
        {
          l->truncated = true;
          return;
        }
      if (fstatat (fd, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0)
        continue;
      path = prefix[0] ? xasprintf ("%s/%s", prefix, names[i]) : xstrdup (names[i]);
      o = json_new (JSON_OBJECT);
      json_set_string (o, "path", path);
      json_set_string (o, "type", esbx_file_mode_name (st.st_mode));
      json_set_int (o, "size", (int64_t)st.st_size);
      json_set_int (o, "mode", st.st_mode & 07777);
      json_append (l->entries, o);
      l->n++;
      if (l->text)
        fprintf (l->text, "%-7s %10lld  %s%s\n", esbx_file_mode_name (st.st_mode),
                 (long long)st.st_size, path, S_ISDIR (st.st_mode) ? "/" : "");
      if (S_ISDIR (st.st_mode) && depth > 1)
        {
          _cleanup_close_ int sub = TEMP_FAILURE_RETRY (
              openat (fd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));

          if (sub >= 0)
            list_dir (l, sub, path, depth - 1);
        }
    }
}

int
mcp_tool_file_list (struct mcp_call *c, esbx_error_t *err)
{
  _cleanup_close_ int root = -1, fd = -1;
  _cleanup_free_ char *rel = NULL, *text = NULL;
  struct listing l = { .entries = json_new (JSON_ARRAY) };
  size_t tlen = 0;
  struct stat st;
  json_t *o;

  if (open_workspace (c, mcp_arg_string (c, "path"), true, &root, &rel, err) < 0)
    {
      json_free (l.entries);
      return esbx_error_wrap (err, "file_list");
    }
  fd = rel[0] ? esbx_open_beneath (root, rel, O_RDONLY | O_DIRECTORY, 0, err)
              : fcntl (root, F_DUPFD_CLOEXEC, 3);
  if (fd < 0 || fstat (fd, &st) < 0)
    {
      json_free (l.entries);
      if (fd >= 0 || *err == NULL)
        return esbx_make_error (err, errno, "file_list `%s`", rel);
      return esbx_error_wrap (err, "file_list");
    }
  l.text = open_memstream (&text, &tlen);
  list_dir (&l, fd, rel, (int)mcp_arg_int (c, "depth", 1));
  if (l.text)
    {
      if (l.truncated)
        fprintf (l.text, "[cut at %u entries]\n", MCP_MAX_LIST);
      fclose (l.text);
    }
  o = json_new (JSON_OBJECT);
  json_set_string (o, "path", rel[0] ? rel : ".");
  json_set (o, "entries", l.entries);
  json_set (o, "truncated", json_new_bool (l.truncated));
  mcp_result_text (c, o, text && tlen ? steal_pointer (&text) : xstrdup ("(empty)"));
  return 0;
}

int
mcp_tool_file_delete (struct mcp_call *c, esbx_error_t *err)
{
  _cleanup_close_ int root = -1, dir = -1;
  _cleanup_free_ char *rel = NULL, *base = NULL;
  struct stat st;
  json_t *o;

  if (open_workspace (c, mcp_arg_string (c, "path"), false, &root, &rel, err) < 0
      || (dir = esbx_open_parent_beneath (root, rel, &base, err)) < 0)
    return esbx_error_wrap (err, "file_delete");
  if (fstatat (dir, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return esbx_make_error (err, errno, "file_delete `%s`", rel);
  if (S_ISDIR (st.st_mode) && !mcp_arg_bool (c, "recursive", false))
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "file_delete `%s`: is a directory: give recursive to delete it "
                                 "and all it holds",
                                 rel);
  if (S_ISDIR (st.st_mode)
          ? esbx_rm_rf_at (dir, base, err) < 0
          : unlinkat (dir, base, 0) < 0 && esbx_make_error (err, errno, "unlink `%s`", rel) < 0)
    return esbx_error_wrap (err, "file_delete");
  o = json_new (JSON_OBJECT);
  json_set_string (o, "path", rel);
  json_set_string (o, "type", esbx_file_mode_name (st.st_mode));
  mcp_result_text (c, o, xasprintf ("deleted %s `%s`", esbx_file_mode_name (st.st_mode), rel));
  return 0;
}
