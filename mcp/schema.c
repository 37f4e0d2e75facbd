/* Arguments against a tool's input schema, the subset of JSON Schema the
   tools' schemas use: an object of named properties, each of one type (or
   a list of types), "required", integer bounds, enums of strings, arrays
   and objects of strings; no property beyond those named.  The schema the
   client reads is the one checked, so the two never disagree.  */
#include "mcp_internal.h"
#include "utils.h"

#include <string.h>

static bool
is_type (const json_t *v, const char *type)
{
  int64_t i;
  size_t k;

  if (strcmp (type, "string") == 0)
    return v->type == JSON_STRING;
  if (strcmp (type, "boolean") == 0)
    return v->type == JSON_BOOL;
  if (strcmp (type, "integer") == 0)
    return v->type == JSON_NUMBER && json_int_value (v, &i);
  if (strcmp (type, "number") == 0)
    return v->type == JSON_NUMBER;
  if (strcmp (type, "array") == 0)
    return v->type == JSON_ARRAY;
  if (strcmp (type, "object") == 0)
    {
      if (v->type != JSON_OBJECT)
        return false;
      for (k = 0; k < json_len (v); k++)
        if (json_at (v, k)->type != JSON_STRING)
          return false;
      return true;
    }
  return false;
}

static bool
matches_type (const json_t *prop, const json_t *v, const char **want)
{
  const json_t *t = json_get (prop, "type");
  size_t i;

  if (t == NULL)
    return true;
  if (t->type == JSON_STRING)
    {
      *want = t->text;
      return is_type (v, t->text);
    }
  for (i = 0; i < json_len (t); i++)
    if (is_type (v, json_at (t, i)->text))
      return true;
  *want = json_len (t) ? json_at (t, 0)->text : "?";
  return false;
}

static int
check_value (const char *key, const json_t *prop, const json_t *v, esbx_error_t *err)
{
  const json_t *items = json_get (prop, "items"), *en = json_get (prop, "enum");
  const char *want = NULL;
  int64_t n, bound;
  size_t i;

  if (!matches_type (prop, v, &want))
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "argument `%s` must be %s %s", key,
                                 strcmp (want, "integer") == 0 || strcmp (want, "array") == 0
                                         || strcmp (want, "object") == 0
                                     ? "an"
                                     : "a",
                                 strcmp (want, "object") == 0 ? "object of strings" : want);
  if (v->type == JSON_ARRAY && items)
    for (i = 0; i < json_len (v); i++)
      if (json_at (v, i)->type != JSON_STRING)
        return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                     "argument `%s` must be an array of strings", key);
  if (v->type == JSON_NUMBER && json_int_value (v, &n))
    {
      if (json_get_int (prop, "minimum", &bound) && n < bound)
        return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "argument `%s` must be at least %lld",
                                     key, (long long)bound);
      if (json_get_int (prop, "maximum", &bound) && n > bound)
        return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "argument `%s` must be at most %lld",
                                     key, (long long)bound);
    }
  if (en && v->type == JSON_STRING)
    {
      _cleanup_free_ char *list = NULL;

      for (i = 0; i < json_len (en); i++)
        if (strcmp (json_at (en, i)->text, v->text) == 0)
          return 0;
      list = json_serialize (en, false, NULL);
      return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "argument `%s`: `%s` is not one of %s",
                                   key, v->text, list);
    }
  return 0;
}

int
mcp_schema_check (const json_t *schema, const json_t *args, esbx_error_t *err)
{
  const json_t *props = json_get (schema, "properties"), *req = json_get (schema, "required");
  const json_t *v;
  const char *key;
  size_t i;

  if (args->type != JSON_OBJECT)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "the arguments must be an object");
  json_object_foreach (args, i, key, v)
    {
      const json_t *prop = json_get (props, key);

      if (prop == NULL)
        return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "unknown argument `%s`", key);
      if (v->type == JSON_NULL)
        continue;
      if (check_value (key, prop, v, err) < 0)
        return -1;
    }
  for (i = 0; i < json_len (req); i++)
    {
      v = json_get (args, json_at (req, i)->text);
      if (v == NULL || v->type == JSON_NULL)
        return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "argument `%s` is required",
                                     json_at (req, i)->text);
    }
  return 0;
}
