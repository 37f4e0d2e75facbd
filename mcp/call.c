/* One tool call: its arguments, checked against the tool's input schema
   before the tool runs, and its result.  */
#include "mcp_internal.h"
#include "utils.h"

#include <stdio.h>
#include <string.h>

const char *
mcp_arg_string (const struct mcp_call *c, const char *key)
{
  return json_get_string (c->args, key);
}

bool
mcp_arg_bool (const struct mcp_call *c, const char *key, bool dflt)
{
  return json_get_bool (c->args, key, dflt);
}

int64_t
mcp_arg_int (const struct mcp_call *c, const char *key, int64_t dflt)
{
  int64_t v;

  return json_get_int (c->args, key, &v) ? v : dflt;
}

char **
mcp_arg_strings (const struct mcp_call *c, const char *key)
{
  const json_t *a = json_get (c->args, key);
  size_t n = a && a->type == JSON_ARRAY ? json_len (a) : 0, i;
  char **v = xmalloc0 ((n + 1) * sizeof *v);

  for (i = 0; i < n; i++)
    v[i] = json_at (a, i)->text;
  return v;
}

char **
mcp_arg_pairs (const struct mcp_call *c, const char *key)
{
  const json_t *o = json_get (c->args, key), *v;
  size_t n = o && o->type == JSON_OBJECT ? json_len (o) : 0, i;
  char **out = xmalloc0 ((n + 1) * sizeof *out);
  const char *k;

  if (n == 0)
    return out;
  json_object_foreach (o, i, k, v)
    out[i] = xasprintf ("%s=%s", k, v->text);
  return out;
}

void
mcp_result_text (struct mcp_call *c, json_t *structured, char *text)
{
  json_free (c->structured);
  free (c->text);
  c->structured = structured;
  c->text = text;
}

void
mcp_result (struct mcp_call *c, json_t *structured)
{
  mcp_result_text (c, structured, json_serialize (structured, false, NULL));
}

json_t *
mcp_number (double v)
{
  json_t *n = json_new (JSON_NUMBER);

  n->text = xasprintf ("%.3f", v);
  return n;
}
