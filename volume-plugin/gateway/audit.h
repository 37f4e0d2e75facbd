/* esbxd: the gateway's audit log, ROOT/audit.log: one JSON object per
   request, allowed or denied, with the token id that made it.  */
#ifndef ESBX_PLUGIN_GATEWAY_AUDIT_H
#define ESBX_PLUGIN_GATEWAY_AUDIT_H

#include "error.h"
#include "layerstore.h"

#include <stdbool.h>

struct esbx_audit;

int esbx_audit_open (esbx_store_t *store, struct esbx_audit **out, esbx_error_t *err);
void esbx_audit_close (struct esbx_audit *a);
/* TOKEN_ID NULL: no valid token.  REASON may be NULL.  */
void esbx_audit_record (struct esbx_audit *a, const char *token_id, const char *method,
                        const char *path, bool allowed, unsigned status, const char *reason);

#endif
