/* esbxd: the gateway's routes that read and write a session's files.  */
#ifndef ESBX_PLUGIN_GATEWAY_ROUTES_FILES_H
#define ESBX_PLUGIN_GATEWAY_ROUTES_FILES_H

#include "request.h"

void esbx_gateway_file_read (struct esbx_gateway_ctx *ctx);
void esbx_gateway_file_write (struct esbx_gateway_ctx *ctx);

#endif
