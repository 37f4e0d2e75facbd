/* libFuzzer harness: esbxd's Docker plugin request handling (JSON body
 * decoding, the endpoint dispatch, name and option checks) through
 * esbx_driver_serve, against an empty store in a temporary directory.
 *
 * Input: the first byte picks the endpoint, the rest is the request body.
 * Bodies that ask Create to import a host path (Opts.from) are skipped: the
 * harness exercises the decoder, not the import (fuzz_import does that).
 * With no project and no session in the store, no request can have an
 * effect, so every input starts from the same state.  */
#include "docker/driver.h"
#include "docker/plugin.h"
#include "docker/volumes.h"
#include "fs.h"
#include "json.h"
#include "layerstore.h"
#include "utils.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerInitialize (int *argc, char ***argv);
int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static const char *const endpoints[] = {
  "/Plugin.Activate",
  "/VolumeDriver.Create",
  "/VolumeDriver.Remove",
  "/VolumeDriver.Mount",
  "/VolumeDriver.Unmount",
  "/VolumeDriver.Path",
  "/VolumeDriver.Get",
  "/VolumeDriver.List",
  "/VolumeDriver.Capabilities",
  "/VolumeDriver.Unknown",
  "/",
  "",
};

static esbx_store_t *store;
static struct esbx_volumes *vols;
static struct esbx_driver *driver;

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  char tmpl[] = "/tmp/esbx-fuzz-plugin.XXXXXX";
  esbx_error_t err = NULL;

  (void)argc;
  (void)argv;
  if (mkdtemp (tmpl) == NULL || esbx_store_open (tmpl, &store, &err) < 0
      || esbx_volumes_open (store, &vols, &err) < 0)
    {
      fprintf (stderr, "fuzz_plugin_request: %s\n", err ? err->msg : "mkdtemp");
      abort ();
    }
  driver = esbx_driver_new (store, vols);
  return 0;
}

static bool
imports_a_path (const char *body, size_t len)
{
  esbx_error_t err = NULL;
  _cleanup_json_ json_t *req = json_parse (body, len, &err);
  json_t *opts;

  esbx_error_free (&err);
  opts = req && req->type == JSON_OBJECT ? json_get (req, "Opts") : NULL;
  return opts && opts->type == JSON_OBJECT && json_get (opts, "from") != NULL;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  struct esbx_driver_reply reply = { 0 };
  const char *path;
  char *body;

  if (size < 1 || size - 1 > ESBX_PLUGIN_MAX_BODY)
    return 0;
  path = endpoints[data[0] % ARRAY_SIZE (endpoints)];
  /* An exact copy, not NUL-terminated, so that reading past the body is
     caught.  */
  body = xmalloc (size);
  memcpy (body, data + 1, size - 1);
  if (!imports_a_path (body, size - 1))
    {
      esbx_driver_serve (driver, path, body, size - 1, &reply);
      if (reply.status == 0 || reply.body == NULL)
        abort ();
      free (reply.body);
      free (reply.subject);
      free (reply.result);
    }
  free (body);
  return 0;
}
