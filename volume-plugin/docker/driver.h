/* esbxd: Docker's VolumeDriver protocol over the LayerStack.  A volume is a
   session of the store; the plugin adds the Create options and the mount
   counts that Docker relies on (volumes.h).  */
#ifndef ESBX_PLUGIN_DOCKER_DRIVER_H
#define ESBX_PLUGIN_DOCKER_DRIVER_H

#include "layerstore.h"
#include "volumes.h"

#include <stddef.h>

/* The answer to one plugin request, in the protocol's terms.  */
struct esbx_driver_reply
{
  unsigned status; /* HTTP status; 200 unless the driver sets another */
  char *body;      /* owned: the JSON answer */
  char *subject;   /* owned, may be NULL: the volume the request was about, for the log */
  char *result;    /* owned, may be NULL ("ok"): one-line outcome, for the log */
};

/* Fill REPLY with {"Err": MSG}, the protocol's error.  */
void esbx_driver_reply_error (struct esbx_driver_reply *reply, unsigned status, const char *msg);

struct esbx_driver;

struct esbx_driver *esbx_driver_new (esbx_store_t *store, struct esbx_volumes *vols);
void esbx_driver_free (struct esbx_driver *d);

/* The project of volumes created without `-o project=` and without a
   PROJECT.SESSION name (NULL: none, such a Create is refused).  */
void esbx_driver_set_default_project (struct esbx_driver *d, const char *project);

/* Answer one plugin request: PATH names the endpoint, BODY (LEN bytes, not
   necessarily NUL-terminated) is its JSON.  */
void esbx_driver_serve (struct esbx_driver *d, const char *path, const char *body, size_t len,
                        struct esbx_driver_reply *reply);

#endif
