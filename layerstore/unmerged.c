/* Paths a rebase left for a person: the entries of a session's record
 * ("unmerged") and the three versions of each, kept beside the session's
 * directory entries as unmerged/ID.base, ID.ours and ID.theirs (git's index
 * stages 1, 2 and 3).  An entry stays through any number of rebases until
 * it is resolved: a text file merged with conflict markers once no line of
 * it starts with a marker, any other kind when the session says so
 * (esbx rebase --resolved).  Publish refuses while one is left.  */
#include "internal.h"
#include "copy.h"
#include "fs.h"
#include "path.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const kind_names[] = {
  [ESBX_CONFLICT_CONTENT] = "content",
  [ESBX_CONFLICT_BINARY] = "binary",
  [ESBX_CONFLICT_MODIFY_DELETE] = "modify/delete",
  [ESBX_CONFLICT_DELETE_MODIFY] = "delete/modify",
  [ESBX_CONFLICT_TYPE] = "type",
  [ESBX_CONFLICT_SYMLINK] = "symlink",
  [ESBX_CONFLICT_MODE] = "mode",
  [ESBX_CONFLICT_RENAME] = "rename",
};

static const char *const side_names[] = {
  [ESBX_SIDE_BASE] = "base",
  [ESBX_SIDE_OURS] = "ours",
  [ESBX_SIDE_THEIRS] = "theirs",
};

const char *
esbx_conflict_kind_name (enum esbx_conflict_kind k)
{
  if ((size_t)k >= sizeof kind_names / sizeof kind_names[0])
    return "content";
  return kind_names[k];
}

const char *
esbx_side_name (enum esbx_side side)
{
  return side_names[side];
}

/* An entry of KIND at PATH for the conflict with LAYER (of SESSION).  */
json_t *
esbx_unmerged_new (const char *path, enum esbx_conflict_kind kind, const char *layer,
                   const char *session, int64_t id)
{
  json_t *e = json_new (JSON_OBJECT);
  size_t i;

  json_set_string (e, "path", path);
  json_set_string (e, "kind", esbx_conflict_kind_name (kind));
  json_set (e, "layer", layer ? json_new_string (layer) : json_new (JSON_NULL));
  json_set (e, "session", session ? json_new_string (session) : json_new (JSON_NULL));
  json_set_int (e, "id", id);
  for (i = 0; i < 3; i++)
    json_set (e, side_names[i], json_new (JSON_NULL));
  return e;
}

json_t *
esbx_unmerged_entries (const json_t *record)
{
  const json_t *old = json_get (record, "unmerged"), *p;
  json_t *arr = json_new (JSON_ARRAY);
  int64_t next = 0, id;
  size_t i;

  json_array_foreach (old, i, p)
    if (p->type == JSON_OBJECT && json_get_int (p, "id", &id) && id >= next)
      next = id + 1;
  json_array_foreach (old, i, p)
    {
      /* Records written before entries were objects hold the paths of
         files with markers.  */
      if (p->type == JSON_STRING)
        json_append (arr, esbx_unmerged_new (p->text, ESBX_CONFLICT_CONTENT, NULL, NULL, next++));
      else if (p->type == JSON_OBJECT && json_get_string (p, "path") && json_get_int (p, "id", &id))
        json_append (arr, json_copy (p));
    }
  return arr;
}

int64_t
esbx_unmerged_next_id (const json_t *entries)
{
  const json_t *p;
  int64_t next = 0, id;
  size_t i;

  json_array_foreach (entries, i, p)
    if (json_get_int (p, "id", &id) && id >= next)
      next = id + 1;
  return next;
}

static char *
side_file (int64_t id, enum esbx_side side)
{
  return xasprintf ("%" PRId64 ".%s", id, side_names[side]);
}

/* ROOT/sessions/S/unmerged, made if need be.  */
static int
open_unmerged_dir (int sdfd, bool create, esbx_error_t *err)
{
  int fd;

  if (create && mkdirat (sdfd, ESBX_UNMERGED_DIR, 0700) < 0 && errno != EEXIST)
    return esbx_make_error (err, errno, "mkdir `%s`", ESBX_UNMERGED_DIR);
  fd = TEMP_FAILURE_RETRY (
      openat (sdfd, ESBX_UNMERGED_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (fd < 0)
    return esbx_make_error (err, errno, "open `%s`", ESBX_UNMERGED_DIR);
  return fd;
}

int
esbx_unmerged_keep (int sdfd, json_t *entry, enum esbx_side side, int fd, const char *target,
                    const char *type, esbx_error_t *err)
{
  _cleanup_close_ int dfd = -1, out = -1;
  _cleanup_free_ char *name = NULL;
  int64_t id = 0;

  json_set (entry, side_names[side], type ? json_new_string (type) : json_new (JSON_NULL));
  if (fd < 0 && target == NULL)
    return 0;
  json_get_int (entry, "id", &id);
  dfd = open_unmerged_dir (sdfd, true, err);
  if (dfd < 0)
    return -1;
  name = side_file (id, side);
  unlinkat (dfd, name, 0);
  out = TEMP_FAILURE_RETRY (
      openat (dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (out < 0)
    return esbx_make_error (err, errno, "create `%s/%s`", ESBX_UNMERGED_DIR, name);
  if (target)
    return esbx_write_all (out, target, strlen (target)) < 0
               ? esbx_make_error (err, errno, "write `%s/%s`", ESBX_UNMERGED_DIR, name)
               : 0;
  return esbx_copy_file_data (fd, out, NULL, NULL, NULL, err);
}

/* Does the file at PATH of the upper UFD still hold a line that starts
   with a conflict marker esbx writes?  */
static bool
has_markers (int ufd, const char *path)
{
  return esbx_has_conflict_markers (ufd, path) == 1;
}

bool
esbx_unmerged_resolved (int ufd, const json_t *entry)
{
  const char *kind = json_get_string (entry, "kind");

  if (kind == NULL || strcmp (kind, "content") != 0)
    return false;
  return !has_markers (ufd, json_get_string (entry, "path"));
}

void
esbx_unmerged_prune (int sdfd, const json_t *keep)
{
  _cleanup_close_ int dfd = open_unmerged_dir (sdfd, false, NULL);
  _cleanup_strv_ char **names = NULL;
  const json_t *p;
  size_t i, k;

  if (dfd < 0)
    return;
  names = esbx_list_dir_fd (dfd, ESBX_UNMERGED_DIR, NULL);
  for (i = 0; names && names[i]; i++)
    {
      bool used = false;
      int64_t id;

      json_array_foreach (keep, k, p)
        if (json_get_int (p, "id", &id))
          {
            _cleanup_free_ char *prefix = xasprintf ("%" PRId64 ".", id);
            if (esbx_has_prefix (names[i], prefix))
              used = true;
          }
      if (!used)
        unlinkat (dfd, names[i], 0);
    }
  if (json_len (keep) == 0)
    {
      close (dfd);
      dfd = -1;
      unlinkat (sdfd, ESBX_UNMERGED_DIR, AT_REMOVEDIR);
    }
}

/* The entries of S that are not resolved in the upper UFD.  */
static json_t *
unresolved (const struct esbx_session *s, int ufd)
{
  _cleanup_json_ json_t *all = esbx_unmerged_entries (s->record);
  json_t *left = json_new (JSON_ARRAY);
  size_t i;

  for (i = 0; i < json_len (all); i++)
    if (!esbx_unmerged_resolved (ufd, json_at (all, i)))
      json_append (left, json_copy (json_at (all, i)));
  return left;
}

int
esbx_unmerged_check (const struct esbx_session *s, int ufd, struct esbx_publish_result *r,
                     esbx_error_t *err)
{
  json_t *left = unresolved (s, ufd);
  const json_t *first;
  const char *kind;

  if (json_len (left) == 0)
    {
      json_free (left);
      return 0;
    }
  first = json_at (left, 0);
  kind = json_get_string (first, "kind");
  json_free (r->unmerged);
  r->unmerged = left;
  if (kind && strcmp (kind, "content") == 0)
    return esbx_make_error_kind (err, ESBX_ERR_UNMERGED, 0,
                                 "publish `%s`: %zu path%s that rebase could not merge (first: "
                                 "`%s` still has the conflict markers rebase left); resolve "
                                 "them first",
                                 s->name, json_len (left), json_len (left) == 1 ? "" : "s",
                                 json_get_string (first, "path"));
  return esbx_make_error_kind (err, ESBX_ERR_UNMERGED, 0,
                               "publish `%s`: %zu path%s that rebase could not merge (first: "
                               "`%s`, %s); keep or change it, then `esbx rebase --resolved %s "
                               "PATH`",
                               s->name, json_len (left), json_len (left) == 1 ? "" : "s",
                               json_get_string (first, "path"), kind ? kind : "?", s->name);
}

/* The entry of ENTRIES at PATH, or NULL.  */
static json_t *
find_entry (const json_t *entries, const char *path, size_t *at)
{
  size_t i;

  for (i = 0; i < json_len (entries); i++)
    {
      const char *p = json_get_string (json_at (entries, i), "path");
      if (p && strcmp (p, path) == 0)
        {
          if (at)
            *at = i;
          return json_at (entries, i);
        }
    }
  return NULL;
}

/* "/a/b" from what a user typed ("a/b", "/a/b", "./a/b").  */
static int
entry_path (const char *session, const char *given, char **out, esbx_error_t *err)
{
  _cleanup_free_ char *clean = NULL;

  if (esbx_clean_relpath (given[0] == '/' ? given + 1 : given, false, &clean, err) < 0)
    return esbx_error_wrap (err, "session `%s`: path `%s`", session, given);
  *out = xasprintf ("/%s", clean);
  return 0;
}

int
esbx_session_unmerged_show (esbx_store_t *store, const char *name, const char *path,
                            enum esbx_side side, int outfd, esbx_error_t *err)
{
  struct esbx_session *s = NULL;
  _cleanup_json_ json_t *entries = NULL;
  _cleanup_close_ int sdfd = -1, dfd = -1, in = -1;
  _cleanup_free_ char *want = NULL, *file = NULL;
  const json_t *e;
  const char *type;
  int64_t id = 0;
  char buf[65536];
  ssize_t n;
  int ret = -1;

  if (esbx_session_load (store, name, &s, err) < 0)
    return esbx_error_wrap (err, "rebase --show");
  if (entry_path (name, path, &want, err) < 0)
    goto out;
  entries = esbx_unmerged_entries (s->record);
  e = find_entry (entries, want, NULL);
  if (e == NULL)
    {
      esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0,
                            "rebase --show `%s`: `%s` is not a path rebase left unmerged", name,
                            want);
      goto out;
    }
  type = json_get_string (e, side_names[side]);
  if (type == NULL || strcmp (type, "directory") == 0)
    {
      esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0,
                            "rebase --show `%s`: `%s` has no %s version (%s)", name, want,
                            side_names[side], type ? "a directory" : "absent on that side");
      goto out;
    }
  json_get_int (e, "id", &id);
  sdfd = esbx_session_open_dir (store, name, err);
  if (sdfd < 0 || (dfd = open_unmerged_dir (sdfd, false, err)) < 0)
    goto out;
  file = side_file (id, side);
  in = TEMP_FAILURE_RETRY (openat (dfd, file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (in < 0)
    {
      esbx_make_error (err, errno, "rebase --show `%s`: `%s`: the %s version is gone", name, want,
                       side_names[side]);
      goto out;
    }
  while ((n = TEMP_FAILURE_RETRY (read (in, buf, sizeof buf))) > 0)
    if (esbx_write_all (outfd, buf, (size_t)n) < 0)
      {
        esbx_make_error (err, errno, "rebase --show `%s`: write", name);
        goto out;
      }
  if (n < 0)
    {
      esbx_make_error (err, errno, "rebase --show `%s`: read `%s`", name, file);
      goto out;
    }
  ret = 0;
out:
  esbx_session_free (s);
  return ret;
}

int
esbx_session_unmerged_resolve (esbx_store_t *store, const char *name, char *const *paths,
                               esbx_error_t *err)
{
  struct esbx_session *s = NULL;
  _cleanup_json_ json_t *entries = NULL;
  _cleanup_close_ int slock = -1, sdfd = -1;
  size_t i, at;
  int ret = -1;

  slock = esbx_session_lock (store, name, err);
  if (slock < 0)
    return esbx_error_wrap (err, "rebase --resolved");
  if (esbx_session_load (store, name, &s, err) < 0)
    return esbx_error_wrap (err, "rebase --resolved");
  entries = esbx_unmerged_entries (s->record);
  /* Every path is checked before anything changes.  */
  for (i = 0; paths[i]; i++)
    {
      _cleanup_free_ char *want = NULL;

      if (entry_path (name, paths[i], &want, err) < 0)
        goto out;
      if (find_entry (entries, want, NULL) == NULL)
        {
          esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0,
                                "rebase --resolved `%s`: `%s` is not a path rebase left unmerged",
                                name, want);
          goto out;
        }
    }
  for (i = 0; paths[i]; i++)
    {
      _cleanup_free_ char *want = NULL;

      if (entry_path (name, paths[i], &want, err) < 0)
        goto out;
      if (find_entry (entries, want, &at))
        json_free (json_take_at (entries, at));
    }
  json_set (s->record, "unmerged", entries);
  entries = NULL;
  if (esbx_session_save (store, name, s->record, err) < 0)
    goto out;
  sdfd = esbx_session_open_dir (store, name, NULL);
  if (sdfd >= 0)
    esbx_unmerged_prune (sdfd, json_get (s->record, "unmerged"));
  ret = 0;
out:
  esbx_session_free (s);
  return ret;
}
