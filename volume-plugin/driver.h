/* esbxd: Docker's VolumeDriver protocol over the LayerStack.  A volume is a
   session of the store; the plugin adds the Create options and the mount
   counts that Docker relies on (volumes.h).  */
#ifndef ESBX_PLUGIN_DRIVER_H
#define ESBX_PLUGIN_DRIVER_H

#include "http.h"
#include "layerstore.h"
#include "volumes.h"

#define ESBX_PLUGIN_CONTENT_TYPE "application/vnd.docker.plugins.v1.2+json"

struct esbx_driver;

struct esbx_driver *esbx_driver_new (esbx_store_t *store, struct esbx_volumes *vols);
void esbx_driver_free (struct esbx_driver *d);

/* An esbx_http_handler: DATA is the driver.  */
void esbx_driver_serve (void *data, const char *path, const char *body, size_t len,
                        struct esbx_http_reply *reply);

#endif
