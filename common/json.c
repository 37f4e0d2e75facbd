#include "json.h"
#include "fs.h"
#include "text.h"
#include "utils.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <yajl/yajl_gen.h>
#include <yajl/yajl_parse.h>

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
json_new_strings (char *const *v)
{
  json_t *arr = json_new (JSON_ARRAY);

  for (; v && *v; v++)
    json_append (arr, json_new_string (*v));
  return arr;
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
  /* The first byte tells most keys apart without a call.  */
  for (i = 0; i < obj->n; i++)
    if (obj->keys[i][0] == key[0] && strcmp (obj->keys[i], key) == 0)
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

/* The parser: yajl's event API building json_t directly.  (yajl's tree
   built a tree of its own, converted and freed it, and turned every number
   into a long long and a double nobody read: half the cost of reading a
   session record.)  The stack holds the open arrays and objects, and KEY
   the member name an object waits a value for.  */
#define DEPTH_TEXT(n)  DEPTH_TEXT_ (n)
#define DEPTH_TEXT_(n) #n

struct parse
{
  json_t *root;
  json_t *stack[JSON_MAX_DEPTH];
  size_t depth;
  char *key;
  const char *why; /* our reason for stopping yajl, NULL when it was yajl's */
};

/* A string of yajl's (LEN bytes, a "\u0000" escape among them possibly):
   a C string ends at its first NUL, as yajl's tree had it.  Refused when
   esbx_utf8_valid refuses it: yajl's own check lets overlong and surrogate
   encodings through, which serialising would then replace, so a parsed
   document always serialises to the same strings.  */
static char *
parsed_string (struct parse *p, const unsigned char *s, size_t len)
{
  char *c = xstrndup ((const char *)s, len);

  if (esbx_utf8_valid (c, strlen (c)))
    return c;
  free (c);
  p->why = "a string is not valid UTF-8";
  return NULL;
}

/* VALUE (owned) into the open container, or as the root.  */
static int
add (struct parse *p, json_t *value)
{
  json_t *top = p->depth ? p->stack[p->depth - 1] : NULL;
  ssize_t i;

  if (top == NULL)
    {
      json_free (p->root);
      p->root = value;
      return 1;
    }
  if (top->type == JSON_ARRAY)
    {
      json_append (top, value);
      return 1;
    }
  /* A key said twice: the last one counts, as json_set does.  */
  i = find_key (top, p->key);
  if (i >= 0)
    {
      json_free (top->items[i]);
      top->items[i] = value;
      free (steal_pointer (&p->key));
      return 1;
    }
  grow (top);
  top->keys[top->n] = steal_pointer (&p->key);
  top->items[top->n++] = value;
  return 1;
}

static int
on_null (void *ctx)
{
  return add (ctx, json_new (JSON_NULL));
}

static int
on_bool (void *ctx, int v)
{
  return add (ctx, json_new_bool (v));
}

static int
on_number (void *ctx, const char *s, size_t len)
{
  json_t *j = json_new (JSON_NUMBER);

  j->text = xstrndup (s, len);
  return add (ctx, j);
}

static int
on_string (void *ctx, const unsigned char *s, size_t len)
{
  char *text = parsed_string (ctx, s, len);
  json_t *j;

  if (text == NULL)
    return 0;
  j = json_new (JSON_STRING);
  j->text = text;
  return add (ctx, j);
}

static int
on_key (void *ctx, const unsigned char *s, size_t len)
{
  struct parse *p = ctx;

  free (p->key);
  p->key = parsed_string (p, s, len);
  return p->key != NULL;
}

static int
open_container (struct parse *p, enum json_type type)
{
  json_t *j;

  if (p->depth == JSON_MAX_DEPTH)
    {
      p->why = "nested deeper than " DEPTH_TEXT (JSON_MAX_DEPTH);
      return 0;
    }
  j = json_new (type);
  add (p, j);
  p->stack[p->depth++] = j;
  return 1;
}

static int
on_start_map (void *ctx)
{
  return open_container (ctx, JSON_OBJECT);
}

static int
on_start_array (void *ctx)
{
  return open_container (ctx, JSON_ARRAY);
}

static int
on_end (void *ctx)
{
  struct parse *p = ctx;

  p->depth--;
  return 1;
}

static const yajl_callbacks parse_callbacks = {
  .yajl_null = on_null,
  .yajl_boolean = on_bool,
  .yajl_number = on_number,
  .yajl_string = on_string,
  .yajl_start_map = on_start_map,
  .yajl_map_key = on_key,
  .yajl_end_map = on_end,
  .yajl_start_array = on_start_array,
  .yajl_end_array = on_end,
};

json_t *
json_parse (const char *buf, size_t len, esbx_error_t *err)
{
  return json_parse_limit (buf, len, JSON_MAX_DOCUMENT, err);
}

json_t *
json_parse_limit (const char *buf, size_t len, size_t limit, esbx_error_t *err)
{
  struct parse p = { 0 };
  yajl_handle h;
  yajl_status st;

  if (len > limit)
    return esbx_make_error (err, 0, "JSON document too large (%zu bytes, limit %zu)", len, limit),
           NULL;
  if (memchr (buf, '\0', len) != NULL)
    return esbx_make_error (err, 0, "invalid JSON: NUL byte in document"), NULL;
  h = yajl_alloc (&parse_callbacks, NULL, &p);
  if (h == NULL)
    abort ();
  /* As yajl's tree parser had it.  */
  yajl_config (h, yajl_allow_comments, 1);
  st = yajl_parse (h, (const unsigned char *)buf, len);
  if (st == yajl_status_ok)
    st = yajl_complete_parse (h);
  if (st != yajl_status_ok)
    {
      if (p.why)
        esbx_make_error (err, 0, "invalid JSON: %s", p.why);
      else
        {
          unsigned char *msg = yajl_get_error (h, 0, NULL, 0);
          const char *text = msg ? (const char *)msg : "parse error";

          /* yajl's message ends its line; keep the line.  */
          esbx_make_error (err, 0, "invalid JSON: %.*s", (int)strcspn (text, "\n"), text);
          if (msg)
            yajl_free_error (h, msg);
        }
      yajl_free (h);
      free (p.key);
      json_free (p.root);
      return NULL;
    }
  yajl_free (h);
  free (p.key);
  if (p.root == NULL)
    return esbx_make_error (err, 0, "invalid JSON: parse error: premature EOF"), NULL;
  return p.root;
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
