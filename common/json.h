/* esbx: a small mutable JSON document type.  This module is the only one
   that talks to yajl: it parses with yajl's event API and writes with
   yajl_gen.  */
#ifndef ESBX_JSON_H
#define ESBX_JSON_H

#include "error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum json_type
{
  JSON_NULL,
  JSON_BOOL,
  JSON_NUMBER,
  JSON_STRING,
  JSON_ARRAY,
  JSON_OBJECT,
};

typedef struct json json_t;
struct json
{
  enum json_type type;
  bool boolean;
  char *text; /* JSON_STRING: the string; JSON_NUMBER: its literal.  */
  size_t n;   /* JSON_ARRAY, JSON_OBJECT: number of items.  */
  size_t cap;
  char **keys;    /* JSON_OBJECT.  */
  json_t **items; /* JSON_ARRAY, JSON_OBJECT.  */
};

/* Largest document json_parse accepts.  */
#define JSON_MAX_DOCUMENT (16u * 1024 * 1024)
/* Arrays and objects nested deeper than this are refused: the tree is
   converted, checked and freed recursively (here and in yajl), and a
   document of a few MiB of `[` would overflow the stack.  */
#define JSON_MAX_DEPTH 256

json_t *json_parse (const char *buf, size_t len, esbx_error_t *err);
/* The same for a document the store wrote itself and may be larger (a
   layer record of a large import: ~200 bytes per entry).  */
json_t *json_parse_limit (const char *buf, size_t len, size_t limit, esbx_error_t *err);
void json_free (json_t *j);
static inline void
cleanup_jsonp (json_t **j)
{
  json_free (*j);
}
#define _cleanup_json_ __attribute__ ((cleanup (cleanup_jsonp)))

json_t *json_new (enum json_type type);
json_t *json_new_string (const char *s);
/* An array of the strings of V (NULL-terminated; NULL: none).  */
json_t *json_new_strings (char *const *v);
json_t *json_new_int (int64_t v);
json_t *json_new_bool (bool v);
/* A deep copy of J (NULL for NULL).  */
json_t *json_copy (const json_t *j);

/* Object access.  json_get returns NULL when obj is not an object or has no
   such key.  */
json_t *json_get (const json_t *obj, const char *key);
const char *json_get_string (const json_t *obj, const char *key);
bool json_get_int (const json_t *obj, const char *key, int64_t *out);
bool json_get_bool (const json_t *obj, const char *key, bool dflt);
/* Set KEY to VALUE (owned), replacing an existing member.  */
void json_set (json_t *obj, const char *key, json_t *value);
void json_set_string (json_t *obj, const char *key, const char *s);
void json_set_int (json_t *obj, const char *key, int64_t v);
void json_remove (json_t *obj, const char *key);
/* Append VALUE (owned) to an array.  */
void json_append (json_t *arr, json_t *value);
bool json_int_value (const json_t *j, int64_t *out);

/* Iteration, in document order (an object keeps the order its members were
   set in).  json_len is the number of items of an array or members of an
   object, 0 for anything else and for NULL.  json_at is the I-th item of an
   array or the value of the I-th member of an object; json_key_at is the key
   of the I-th member of an object.  Both return NULL when I is out of range
   or J has no such thing.  */
size_t json_len (const json_t *j);
json_t *json_at (const json_t *j, size_t i);
const char *json_key_at (const json_t *obj, size_t i);
/* Move the I-th item (or member value) out of J, leaving a JSON null in its
   place so that J stays whole and freeable.  */
json_t *json_take_at (json_t *j, size_t i);

/* for (I, VALUE) over an array (size_t I, json_t *VALUE).  */
#define json_array_foreach(arr, i, value)                                                          \
  for ((i) = 0; (i) < json_len (arr) && ((value) = json_at ((arr), (i)), true); (i)++)
/* for (I, KEY, VALUE) over an object (const char *KEY); nothing for an
   array.  */
#define json_object_foreach(obj, i, key, value)                                                    \
  for ((i) = 0; (i) < json_len (obj) && ((key) = json_key_at ((obj), (i))) != NULL                 \
                && ((value) = json_at ((obj), (i)), true);                                         \
       (i)++)

/* Serialize; never fails (bytes that are not UTF-8 become U+FFFD).  */
char *json_serialize (const json_t *j, bool pretty, size_t *len);

/* Read and parse a file beneath dirfd, refusing documents over the limit.  */
json_t *json_parse_file_at (int dirfd, const char *path, esbx_error_t *err);
/* An error on the wire (the gateway's answers, the progress and exec
   streams): {"error": MSG, "kind": KIND, "code": EXIT STATUS} in O.  */
void json_set_error (json_t *o, const struct esbx_error *e);
/* The error answer O carries, made again in *ERR with its kind ("kind", or
   "code" from an older esbxd) and its message (DFLT when it has none);
   returns -1.  */
int json_get_error (const json_t *o, const char *dflt, esbx_error_t *err);
json_t *json_parse_file_at_limit (int dirfd, const char *path, size_t limit, esbx_error_t *err);

#endif
