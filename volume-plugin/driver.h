/* esbxd: Docker's VolumeDriver protocol over the LayerStack.  A volume is a
   session of the store; the plugin adds the Create options and the mount
   counts that Docker relies on (volumes.h).  */
#ifndef ESBX_PLUGIN_DRIVER_H
#define ESBX_PLUGIN_DRIVER_H

#include "layerstore.h"
#include "plugin.h"
#include "volumes.h"

struct esbx_driver;

struct esbx_driver *esbx_driver_new (esbx_store_t *store, struct esbx_volumes *vols);
void esbx_driver_free (struct esbx_driver *d);

/* Answer one plugin request: PATH names the endpoint, BODY (LEN bytes, not
   necessarily NUL-terminated) is its JSON.  */
void esbx_driver_serve (struct esbx_driver *d, const char *path, const char *body, size_t len,
                        struct esbx_plugin_reply *reply);

#endif
