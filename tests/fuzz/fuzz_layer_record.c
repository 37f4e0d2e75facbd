/* libFuzzer harness: the layer record parser (esbx_layer_from_json, the
 * reader of projects/P/layers/ID/record.json).  A record that parses must
 * serialise and parse again to the same id, parent, index and changes.  */
#include "internal.h"
#include "json.h"
#include "utils.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static bool
same_string (const char *a, const char *b)
{
  return (a == NULL && b == NULL) || (a && b && strcmp (a, b) == 0);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  esbx_error_t err = NULL;
  _cleanup_json_ json_t *j = NULL;
  _cleanup_json_ json_t *out = NULL;
  _cleanup_json_ json_t *back = NULL;
  _cleanup_free_ char *text = NULL;
  struct esbx_layer *l = NULL, *l2 = NULL;
  size_t len, i;

  j = json_parse ((const char *)data, size, &err);
  if (j == NULL)
    {
      esbx_error_free (&err);
      return 0;
    }
  if (esbx_layer_from_json (j, &l, &err) < 0)
    {
      if (err == NULL || err->msg == NULL)
        abort ();
      esbx_error_free (&err);
      return 0;
    }
  out = esbx_layer_to_json (l);
  text = json_serialize (out, false, &len);
  back = json_parse (text, len, &err);
  if (back == NULL || esbx_layer_from_json (back, &l2, &err) < 0)
    {
      fprintf (stderr, "fuzz_layer_record: the serialised record does not parse: %s\n%s\n",
               err ? err->msg : "?", text);
      abort ();
    }
  if (!same_string (l->id, l2->id) || !same_string (l->parent, l2->parent) || l->index != l2->index
      || l->changes.n != l2->changes.n)
    abort ();
  for (i = 0; i < l->changes.n; i++)
    if (strcmp (l->changes.v[i].path, l2->changes.v[i].path) != 0
        || l->changes.v[i].kind != l2->changes.v[i].kind
        || l->changes.v[i].type != l2->changes.v[i].type)
      abort ();
  esbx_layer_free (l);
  esbx_layer_free (l2);
  return 0;
}
