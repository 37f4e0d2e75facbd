/* esbxd: Docker's volume plugin socket.  Every request is a POST whose
   JSON body (1 MiB at most) goes to the driver (driver.h); every answer,
   errors included, is JSON in Docker's plugin content type, and every
   request leaves one line in the log.  */
#ifndef ESBX_PLUGIN_DOCKER_PLUGIN_H
#define ESBX_PLUGIN_DOCKER_PLUGIN_H

#include "error.h"

/* Bodies larger than this are refused with 413 and never reach the driver.  */
#define ESBX_PLUGIN_MAX_BODY (1024u * 1024u)
/* Connections open at once on the plugin socket.  */
#define ESBX_PLUGIN_MAX_CONNECTIONS 256

struct esbx_driver;
struct esbx_plugin;

/* Bind a unix socket at SOCKET_PATH (mode 0660), refusing to steal one that
   another process still answers on, and serve DRIVER on it.  */
int esbx_plugin_start (const char *socket_path, struct esbx_driver *driver,
                       struct esbx_plugin **out, esbx_error_t *err);
/* Stop serving (waiting for requests in flight) and remove the socket.  */
void esbx_plugin_stop (struct esbx_plugin *plugin);

#endif
