/* esbx: a small mutable JSON document type.  This module is the only one
   that talks to yajl: it parses with yajl_tree and writes with yajl_gen.  */
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

json_t *json_parse (const char *buf, size_t len, esbx_error_t *err);
void json_free (json_t *j);
static inline void
cleanup_jsonp (json_t **j)
{
  json_free (*j);
}
#define _cleanup_json_ __attribute__ ((cleanup (cleanup_jsonp)))

json_t *json_new (enum json_type type);
json_t *json_new_string (const char *s);
json_t *json_new_int (int64_t v);
json_t *json_new_bool (bool v);

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

/* Serialize; never fails (bytes that are not UTF-8 become U+FFFD).  */
char *json_serialize (const json_t *j, bool pretty, size_t *len);

/* Read and parse a file beneath dirfd, refusing documents over the limit.  */
json_t *json_parse_file_at (int dirfd, const char *path, esbx_error_t *err);

#endif
