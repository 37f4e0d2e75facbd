/* esbxd: the gateway's routes for the paths a rebase left unmerged.  */
#ifndef ESBX_PLUGIN_GATEWAY_ROUTES_UNMERGED_H
#define ESBX_PLUGIN_GATEWAY_ROUTES_UNMERGED_H

#include "request.h"

/* GET /v1/sessions/S/unmerged?path=P&side=base|ours|theirs: that version.  */
void esbx_gateway_unmerged_show (struct esbx_gateway_ctx *ctx);
/* POST /v1/sessions/S/resolved {"paths": [P...]}.  */
void esbx_gateway_unmerged_resolve (struct esbx_gateway_ctx *ctx);

#endif
