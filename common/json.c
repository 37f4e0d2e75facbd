#include "json.h"
#include "fs.h"
#include "text.h"
#include "utils.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

json_t *
json_new (enum json_type type)
{
  json_t *j = xmalloc0 (sizeof *j);
  j->type = type;
  return j;
}

json_t *
json_new_string (const char *s)
{
  json_t *j = json_new (JSON_STRING);
  j->text = xstrdup (s ? s : "");
  return j;
}

json_t *
json_new_int (int64_t v)
{
  json_t *j = json_new (JSON_NUMBER);
  char buf[32];

  snprintf (buf, sizeof buf, "%" PRId64, v);
  j->text = xstrdup (buf);
  return j;
}

json_t *
json_new_bool (bool v)
{
  json_t *j = json_new (JSON_BOOL);
  j->boolean = v;
  return j;
}

json_t *
json_copy (const json_t *j)
{
  json_t *c;
  size_t i;

  if (j == NULL)
    return NULL;
  c = json_new (j->type);
  c->boolean = j->boolean;
  c->text = j->text ? xstrdup (j->text) : NULL;
  if (j->n == 0)
    return c;
  c->n = c->cap = j->n;
  c->items = xmalloc0 (j->n * sizeof *c->items);
  if (j->keys)
    c->keys = xmalloc0 (j->n * sizeof *c->keys);
  for (i = 0; i < j->n; i++)
    {
      c->items[i] = json_copy (j->items[i]);
      if (j->keys)
        c->keys[i] = xstrdup (j->keys[i]);
    }
  return c;
}

void
json_free (json_t *j)
{
  size_t i;

  if (j == NULL)
    return;
  for (i = 0; i < j->n; i++)
    {
      if (j->keys)
        free (j->keys[i]);
      json_free (j->items[i]);
    }
  free (j->keys);
  free (j->items);
  free (j->text);
  free (j);
}

static void
grow (json_t *j)
{
  if (j->n < j->cap)
    return;
  j->cap = j->cap ? j->cap * 2 : 4;
  j->items = xrealloc (j->items, j->cap * sizeof (json_t *));
  if (j->type == JSON_OBJECT)
    j->keys = xrealloc (j->keys, j->cap * sizeof (char *));
}

void
json_append (json_t *arr, json_t *value)
{
  grow (arr);
  arr->items[arr->n++] = value;
}

size_t
json_len (const json_t *j)
{
  if (j == NULL || (j->type != JSON_ARRAY && j->type != JSON_OBJECT))
    return 0;
  return j->n;
}

json_t *
json_at (const json_t *j, size_t i)
{
  return i < json_len (j) ? j->items[i] : NULL;
}

const char *
json_key_at (const json_t *obj, size_t i)
{
  if (obj == NULL || obj->type != JSON_OBJECT || i >= obj->n)
    return NULL;
  return obj->keys[i];
}

json_t *
json_take_at (json_t *j, size_t i)
{
  json_t *v = json_at (j, i);

  if (v)
    j->items[i] = json_new (JSON_NULL);
  return v;
}

static ssize_t
find_key (const json_t *obj, const char *key)
{
  size_t i;

  if (obj == NULL || obj->type != JSON_OBJECT)
    return -1;
  for (i = 0; i < obj->n; i++)
    if (strcmp (obj->keys[i], key) == 0)
      return (ssize_t)i;
  return -1;
}

json_t *
json_get (const json_t *obj, const char *key)
{
  ssize_t i = find_key (obj, key);
  return i < 0 ? NULL : obj->items[i];
}

const char *
json_get_string (const json_t *obj, const char *key)
{
  json_t *v = json_get (obj, key);
  return v && v->type == JSON_STRING ? v->text : NULL;
}

bool
json_int_value (const json_t *j, int64_t *out)
{
  char *end;
  long long v;

  if (j == NULL || j->type != JSON_NUMBER)
    return false;
  errno = 0;
  v = strtoll (j->text, &end, 10);
  if (errno != 0 || *end != '\0')
    return false;
  *out = v;
  return true;
}

bool
json_get_int (const json_t *obj, const char *key, int64_t *out)
{
  return json_int_value (json_get (obj, key), out);
}

bool
json_get_bool (const json_t *obj, const char *key, bool dflt)
{
  json_t *v = json_get (obj, key);
  return v && v->type == JSON_BOOL ? v->boolean : dflt;
}

void
json_set (json_t *obj, const char *key, json_t *value)
{
  ssize_t i = find_key (obj, key);

  if (i >= 0)
    {
      json_free (obj->items[i]);
      obj->items[i] = value;
      return;
    }
  grow (obj);
  obj->keys[obj->n] = xstrdup (key);
  obj->items[obj->n++] = value;
}

void
json_set_string (json_t *obj, const char *key, const char *s)
{
  json_set (obj, key, json_new_string (s));
}

void
json_set_int (json_t *obj, const char *key, int64_t v)
{
  json_set (obj, key, json_new_int (v));
}

void
json_remove (json_t *obj, const char *key)
{
  ssize_t i = find_key (obj, key);

  if (i < 0)
    return;
  free (obj->keys[i]);
  json_free (obj->items[i]);
  memmove (&obj->keys[i], &obj->keys[i + 1], (obj->n - i - 1) * sizeof (char *));
  memmove (&obj->items[i], &obj->items[i + 1], (obj->n - i - 1) * sizeof (json_t *));
  obj->n--;
}

/* Takes V's strings and keys (yajl's tree allocates them with malloc and
   frees NULL as nothing): most of a document is its strings, copied once
   instead of twice.  */
static json_t *
from_yajl (yajl_val v)
{
  json_t *j;
  size_t i;

  switch (v->type)
    {
    case yajl_t_string:
      j = json_new (JSON_STRING);
      j->text = steal_pointer (&v->u.string);
      return j;
    case yajl_t_number:
      j = json_new (JSON_NUMBER);
      j->text = xstrdup (v->u.number.r);
      return j;
    case yajl_t_true:
      return json_new_bool (true);
    case yajl_t_false:
      return json_new_bool (false);
    case yajl_t_array:
      j = json_new (JSON_ARRAY);
      for (i = 0; i < v->u.array.len; i++)
        json_append (j, from_yajl (v->u.array.values[i]));
      return j;
    case yajl_t_object:
      j = json_new (JSON_OBJECT);
      for (i = 0; i < v->u.object.len; i++)
        {
          json_t *value = from_yajl (v->u.object.values[i]);

          /* A key said twice: the last one counts, as json_set does.  */
          if (find_key (j, v->u.object.keys[i]) >= 0)
            json_set (j, v->u.object.keys[i], value);
          else
            {
              grow (j);
              j->keys[j->n] = (char *)steal_pointer (&v->u.object.keys[i]);
              j->items[j->n++] = value;
            }
        }
      return j;
    case yajl_t_null:
    default:
      return json_new (JSON_NULL);
    }
}

/* yajl's own check lets overlong and surrogate encodings through, which
   serialising would then replace: refuse what esbx_utf8_valid refuses, so
   that a parsed document always serialises to the same strings.  */
static bool
strings_valid (yajl_val v)
{
  size_t i;

  switch (v->type)
    {
    case yajl_t_string:
      return esbx_utf8_valid (v->u.string, strlen (v->u.string));
    case yajl_t_array:
      for (i = 0; i < v->u.array.len; i++)
        if (!strings_valid (v->u.array.values[i]))
          return false;
      return true;
    case yajl_t_object:
      for (i = 0; i < v->u.object.len; i++)
        if (!esbx_utf8_valid (v->u.object.keys[i], strlen (v->u.object.keys[i]))
            || !strings_valid (v->u.object.values[i]))
          return false;
      return true;
    default:
      return true;
    }
}

/* Whether BUF/LEN nests arrays and objects at most JSON_MAX_DEPTH deep
   (brackets inside strings do not count).  */
static bool
depth_ok (const char *buf, size_t len)
{
  bool in_string = false, escaped = false;
  size_t depth = 0, i;

  for (i = 0; i < len; i++)
    {
      char c = buf[i];

      if (in_string)
        {
          if (escaped)
            escaped = false;
          else if (c == '\\')
            escaped = true;
          else if (c == '"')
            in_string = false;
        }
      else if (c == '"')
        in_string = true;
      else if ((c == '[' || c == '{') && ++depth > JSON_MAX_DEPTH)
        return false;
      else if ((c == ']' || c == '}') && depth > 0)
        depth--;
    }
  return true;
}

json_t *
json_parse (const char *buf, size_t len, esbx_error_t *err)
{
  return json_parse_limit (buf, len, JSON_MAX_DOCUMENT, err);
}

json_t *
json_parse_limit (const char *buf, size_t len, size_t limit, esbx_error_t *err)
{
  _cleanup_free_ char *copy = NULL;
  char errbuf[256] = "";
  yajl_val v;
  json_t *j;
  char *nl;

  if (len > limit)
    return esbx_make_error (err, 0, "JSON document too large (%zu bytes, limit %zu)", len, limit),
           NULL;
  if (memchr (buf, '\0', len) != NULL)
    return esbx_make_error (err, 0, "invalid JSON: NUL byte in document"), NULL;
  if (!depth_ok (buf, len))
    return esbx_make_error (err, 0, "invalid JSON: nested deeper than %d", JSON_MAX_DEPTH), NULL;
  copy = xstrndup (buf, len);
  v = yajl_tree_parse (copy, errbuf, sizeof errbuf);
  if (v == NULL)
    {
      /* yajl's message spans lines; keep the first.  */
      nl = strchr (errbuf, '\n');
      if (nl)
        *nl = '\0';
      return esbx_make_error (err, 0, "invalid JSON: %s", errbuf[0] ? errbuf : "parse error"), NULL;
    }
  if (!strings_valid (v))
    {
      yajl_tree_free (v);
      return esbx_make_error (err, 0, "invalid JSON: a string is not valid UTF-8"), NULL;
    }
  j = from_yajl (v);
  yajl_tree_free (v);
  return j;
}

static void
gen_string (yajl_gen g, const char *s)
{
  _cleanup_free_ char *fixed = NULL;
  size_t len = strlen (s);

  if (!esbx_utf8_valid (s, len))
    {
      fixed = esbx_utf8_sanitize (s, len);
      s = fixed;
      len = strlen (fixed);
    }
  yajl_gen_string (g, (const unsigned char *)s, len);
}

static void
gen (yajl_gen g, const json_t *j)
{
  size_t i;

  /* yajl's beautifier opens a line even inside an empty container ("[",
     "", "]"): written as a raw atom it stays "[]" or "{}".  */
  if ((j->type == JSON_ARRAY || j->type == JSON_OBJECT) && j->n == 0)
    {
      yajl_gen_number (g, j->type == JSON_ARRAY ? "[]" : "{}", 2);
      return;
    }
  switch (j->type)
    {
    case JSON_NULL:
      yajl_gen_null (g);
      break;
    case JSON_BOOL:
      yajl_gen_bool (g, j->boolean);
      break;
    case JSON_NUMBER:
      yajl_gen_number (g, j->text, strlen (j->text));
      break;
    case JSON_STRING:
      gen_string (g, j->text);
      break;
    case JSON_ARRAY:
      yajl_gen_array_open (g);
      for (i = 0; i < j->n; i++)
        gen (g, j->items[i]);
      yajl_gen_array_close (g);
      break;
    case JSON_OBJECT:
      yajl_gen_map_open (g);
      for (i = 0; i < j->n; i++)
        {
          gen_string (g, j->keys[i]);
          gen (g, j->items[i]);
        }
      yajl_gen_map_close (g);
      break;
    }
}

char *
json_serialize (const json_t *j, bool pretty, size_t *len)
{
  const unsigned char *buf;
  yajl_gen g = yajl_gen_alloc (NULL);
  size_t blen;
  char *out;

  if (g == NULL)
    abort ();
  yajl_gen_config (g, yajl_gen_beautify, pretty ? 1 : 0);
  yajl_gen_config (g, yajl_gen_validate_utf8, 1);
  gen (g, j);
  yajl_gen_get_buf (g, &buf, &blen);
  out = xstrndup ((const char *)buf, blen);
  yajl_gen_free (g);
  /* yajl's beautifier ends with a newline; callers add their own.  */
  while (blen > 0 && out[blen - 1] == '\n')
    out[--blen] = '\0';
  if (len)
    *len = blen;
  return out;
}

json_t *
json_parse_file_at (int dirfd, const char *path, esbx_error_t *err)
{
  return json_parse_file_at_limit (dirfd, path, JSON_MAX_DOCUMENT, err);
}

json_t *
json_parse_file_at_limit (int dirfd, const char *path, size_t limit, esbx_error_t *err)
{
  _cleanup_free_ char *buf = NULL;
  size_t len;
  json_t *j;

  if (esbx_read_file_at (dirfd, path, limit, &buf, &len, err) < 0)
    return NULL;
  j = json_parse_limit (buf, len, limit, err);
  if (j == NULL)
    esbx_error_wrap (err, "`%s`", path);
  return j;
}

void
json_set_error (json_t *o, const struct esbx_error *e)
{
  json_set_string (o, "error", e->msg);
  json_set_string (o, "kind", esbx_error_kind_name (e->kind));
  json_set_int (o, "code", esbx_error_exit_status (e));
}

int
json_get_error (const json_t *o, const char *dflt, esbx_error_t *err)
{
  const char *msg = json_get_string (o, "error"), *kind = json_get_string (o, "kind");
  int64_t code = ESBX_EXIT_ERROR;
  enum esbx_error_kind k;

  if (kind)
    k = esbx_error_kind_of_name (kind);
  else
    {
      json_get_int (o, "code", &code);
      k = esbx_error_kind_of_exit (code < 1 || code > 255 ? ESBX_EXIT_ERROR : (int)code);
    }
  return esbx_make_error_kind (err, k, 0, "%s", msg ? msg : dflt);
}
