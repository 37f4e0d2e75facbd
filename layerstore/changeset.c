/* Change sets: the entries of `esbx diff` and of layer records.  */
#include "internal.h"
#include "utils.h"

#include <string.h>

static const char *const kind_names[] = { "added", "modified", "deleted" };
static const char *const type_names[] = { "none", "file", "dir", "symlink", "fifo" };

bool
esbx_change_same_state (const struct esbx_change *a, const struct esbx_change *b)
{
  if ((a->kind == ESBX_DELETED) != (b->kind == ESBX_DELETED))
    return false;
  if (a->kind == ESBX_DELETED)
    return true;
  if (a->type != b->type || a->mode != b->mode)
    return false;
  if (a->type == ESBX_TYPE_FILE)
    return strcmp (a->sha256, b->sha256) == 0;
  if (a->type == ESBX_TYPE_SYMLINK)
    return a->target && b->target && strcmp (a->target, b->target) == 0;
  return true;
}

const char *
esbx_change_kind_name (enum esbx_change_kind k)
{
  return kind_names[k];
}

enum esbx_file_type
esbx_file_type_of (mode_t m)
{
  if (S_ISREG (m))
    return ESBX_TYPE_FILE;
  if (S_ISDIR (m))
    return ESBX_TYPE_DIR;
  if (S_ISLNK (m))
    return ESBX_TYPE_SYMLINK;
  if (S_ISFIFO (m))
    return ESBX_TYPE_FIFO;
  return ESBX_TYPE_NONE;
}

const char *
esbx_file_type_name (enum esbx_file_type t)
{
  return type_names[t];
}

const char *
esbx_file_mode_name (mode_t m)
{
  enum esbx_file_type t = esbx_file_type_of (m);

  return t == ESBX_TYPE_NONE ? "other" : type_names[t];
}

int
esbx_file_type_parse (const char *s, enum esbx_file_type *t)
{
  size_t i;

  for (i = 1; s && i < ARRAY_SIZE (type_names); i++)
    if (strcmp (s, type_names[i]) == 0)
      {
        *t = (enum esbx_file_type)i;
        return 0;
      }
  return -1;
}

static void
change_clear (struct esbx_change *c)
{
  free (c->path);
  free (c->target);
  free (c->link);
}

void
esbx_changeset_free (struct esbx_changeset *cs)
{
  size_t i;

  for (i = 0; i < cs->n; i++)
    change_clear (&cs->v[i]);
  free (cs->v);
  cs->v = NULL;
  cs->n = cs->cap = 0;
}

void
esbx_changeset_push (struct esbx_changeset *cs, struct esbx_change *c)
{
  if (cs->n == cs->cap)
    {
      cs->cap = cs->cap ? cs->cap * 2 : 16;
      cs->v = xrealloc (cs->v, cs->cap * sizeof *cs->v);
    }
  cs->v[cs->n++] = *c;
  memset (c, 0, sizeof *c);
}

/* Paths sort component-wise so that a directory comes right before its
   contents ("/a", "/a/b", "/a.b"), which publish and export rely on.  */
static int
path_cmp (const char *a, const char *b)
{
  for (; *a && *a == *b; a++, b++)
    ;
  if (*a == *b)
    return 0;
  /* The end of a path, then '/', sort before any other byte.  */
  if (*a == '\0' || (*a == '/' && *b != '\0'))
    return -1;
  if (*b == '\0' || *b == '/')
    return 1;
  return (unsigned char)*a - (unsigned char)*b;
}

static int
change_cmp (const void *a, const void *b)
{
  return path_cmp (((const struct esbx_change *)a)->path, ((const struct esbx_change *)b)->path);
}

void
esbx_changeset_sort (struct esbx_changeset *cs)
{
  esbx_sort (cs->v, cs->n, sizeof *cs->v, change_cmp);
}

const struct esbx_change *
esbx_changeset_find (const struct esbx_changeset *cs, const char *path)
{
  struct esbx_change key = { .path = (char *)path };

  if (cs->n == 0)
    return NULL;
  return bsearch (&key, cs->v, cs->n, sizeof *cs->v, change_cmp);
}

json_t *
esbx_change_to_json (const struct esbx_change *c)
{
  json_t *j = json_new (JSON_OBJECT);

  json_set_string (j, "path", c->path);
  json_set_string (j, "kind", esbx_change_kind_name (c->kind));
  json_set_string (j, "type", esbx_file_type_name (c->type));
  if (c->kind != ESBX_DELETED)
    {
      json_set_int (j, "mode", c->mode);
      json_set_int (j, "size", c->size);
      if (c->type == ESBX_TYPE_FILE)
        json_set_string (j, "sha256", c->sha256);
      if (c->target)
        json_set_string (j, "target", c->target);
      if (c->link)
        json_set_string (j, "link", c->link);
    }
  if (c->opaque)
    json_set (j, "opaque", json_new_bool (true));
  if (c->stripped)
    json_set (j, "stripped", json_new_bool (true));
  return j;
}

int
esbx_change_from_json (const json_t *j, struct esbx_change *c, esbx_error_t *err)
{
  const char *path = json_get_string (j, "path");
  const char *kind = json_get_string (j, "kind");
  const char *type = json_get_string (j, "type");
  const char *sha = json_get_string (j, "sha256");
  const char *target = json_get_string (j, "target");
  const char *link = json_get_string (j, "link");
  int64_t v;
  size_t i;

  memset (c, 0, sizeof *c);
  if (path == NULL || path[0] != '/' || kind == NULL || type == NULL)
    return esbx_make_error (err, 0, "change entry without path, kind or type");
  for (i = 0; i < ARRAY_SIZE (kind_names); i++)
    if (strcmp (kind, kind_names[i]) == 0)
      break;
  if (i == ARRAY_SIZE (kind_names))
    return esbx_make_error (err, 0, "change `%s`: unknown kind `%s`", path, kind);
  c->kind = (enum esbx_change_kind)i;
  if (esbx_file_type_parse (type, &c->type) < 0)
    return esbx_make_error (err, 0, "change `%s`: unknown type `%s`", path, type);
  if (json_get_int (j, "mode", &v))
    c->mode = (mode_t)v & 07777;
  if (json_get_int (j, "size", &v))
    c->size = v;
  /* Conflict checks and fsck compare file hashes: a file without one is a
     corrupt record, not an empty hash.  */
  if (sha == NULL && c->kind != ESBX_DELETED && c->type == ESBX_TYPE_FILE)
    return esbx_make_error (err, 0, "change `%s`: file without sha256", path);
  if (sha)
    {
      if (strlen (sha) != 64 || strspn (sha, "0123456789abcdef") != 64)
        return esbx_make_error (err, 0, "change `%s`: bad sha256", path);
      memcpy (c->sha256, sha, 65);
    }
  if (link && (link[0] != '/' || c->kind == ESBX_DELETED || c->type != ESBX_TYPE_FILE))
    return esbx_make_error (err, 0, "change `%s`: bad link", path);
  c->opaque = json_get_bool (j, "opaque", false);
  c->stripped = json_get_bool (j, "stripped", false);
  c->path = xstrdup (path);
  c->target = xstrdup (target);
  c->link = xstrdup (link);
  return 0;
}
