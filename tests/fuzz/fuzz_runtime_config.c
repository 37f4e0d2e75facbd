/* libFuzzer harness: esbx-runtime's config.json rewrite (shim/runtime/spec.c).
 *
 * Input: a bundle's config.json.  The store root is a fixed directory that
 * holds sessions/s1/merged, so that seeds naming
 * /tmp/esbx-fuzz-runtime/sessions/s1/merged find a session.  When a session
 * is found the config is rewritten to join a holder, serialised and parsed
 * again: the result must be valid JSON that names the same session.  */
#include "json.h"
#include "runtime.h"
#include "utils.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define ROOT "/tmp/esbx-fuzz-runtime"

int LLVMFuzzerInitialize (int *argc, char ***argv);
int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  (void)argc;
  (void)argv;
  mkdir (ROOT, 0700);
  mkdir (ROOT "/sessions", 0700);
  mkdir (ROOT "/sessions/s1", 0700);
  mkdir (ROOT "/sessions/s1/merged", 0700);
  return 0;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  static char *const roots[] = { (char *)ROOT, (char *)"/nonexistent/esbx", NULL };
  esbx_error_t err = NULL;
  _cleanup_json_ json_t *config = NULL;
  _cleanup_json_ json_t *again = NULL;
  _cleanup_free_ char *session = NULL;
  _cleanup_free_ char *text = NULL;
  size_t root = 0, len;

  config = json_parse ((const char *)data, size, &err);
  if (config == NULL)
    {
      esbx_error_free (&err);
      return 0;
    }
  if (spec_find_session (config, roots, &session, &root, &err) < 0)
    {
      esbx_error_free (&err);
      return 0;
    }
  if (session == NULL)
    return 0;
  if (root != 0 || strcmp (session, "s1") != 0)
    abort ();
  spec_join_holder (config, session, 4242, "/esbx/fuzz.s1");
  text = json_serialize (config, false, &len);
  again = json_parse (text, len, &err);
  if (again == NULL)
    abort ();
  return 0;
}
