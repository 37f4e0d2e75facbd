/* libFuzzer harness: the MCP server's message handling (mcp/: JSON-RPC,
 * the lifecycle, tools/call's arguments against the tools' schemas and
 * the caller's limits) through esbx_mcp_handle_text, against an empty
 * store in a temporary directory.
 *
 * Input: the first byte picks the server (its scopes, a project limit, and
 * whether it is initialized first); the rest is one message.  With no
 * project and no session in the store, no call can have an effect, so
 * every input starts from the same state.  */
#include "json.h"
#include "layerstore.h"
#include "mcp.h"
#include "utils.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerInitialize (int *argc, char ***argv);
int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static esbx_store_t *store;

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  char tmpl[] = "/tmp/esbx-fuzz-mcp.XXXXXX";
  esbx_error_t err = NULL;

  (void)argc;
  (void)argv;
  if (mkdtemp (tmpl) == NULL || esbx_store_open (tmpl, &store, &err) < 0)
    {
      fprintf (stderr, "fuzz_mcp_message: %s\n", err ? err->msg : "mkdtemp");
      abort ();
    }
  return 0;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  static const char init[] = "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":"
                             "{\"protocolVersion\":\"2025-11-25\"}}";
  struct esbx_mcp_host h = { .store = store, .transport = "fuzz" };
  struct esbx_mcp_server *s = NULL;
  esbx_error_t err = NULL;
  json_t *r;

  if (size == 0)
    return 0;
  h.scopes = (data[0] & 7) ? (data[0] & 7) : ESBX_SCOPE_OBSERVE;
  h.project = (data[0] & 8) ? "p" : NULL;
  if (esbx_mcp_server_new (&h, &s, &err) < 0)
    abort ();
  if (data[0] & 16)
    json_free (esbx_mcp_handle_text (s, init, strlen (init), NULL));
  r = esbx_mcp_handle_text (s, (const char *)data + 1, size - 1, NULL);
  if (r)
    free (json_serialize (r, false, NULL));
  json_free (r);
  esbx_mcp_server_free (s);
  return 0;
}
