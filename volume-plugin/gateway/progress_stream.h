/* esbxd: a long route's progress while it runs (`?progress=1`).  The work
   runs in a thread of its own whose progress sink (layerstore.h) turns each
   report into a JSON line; the answer (Content-Type
   application/vnd.esbx.progress) streams those lines as they come,

     {"phase":"export","unit":"files","done":N,"total":T,"bytes":B,
      "elapsed_ms":MS}                  total 0: unknown; "final":true on
                                        the last report of a phase

   then one line that ends them,

     {"result": {...}}                  what the route answers without
                                        ?progress=1
     {"error", "kind", "code"}          the work failed after its first report

   and, after a result, the route's payload if it has one (an export's
   archive).  Until the first report a failure is still an HTTP error, as
   it is without ?progress=1.  */
#ifndef ESBX_PLUGIN_GATEWAY_PROGRESS_STREAM_H
#define ESBX_PLUGIN_GATEWAY_PROGRESS_STREAM_H

#include "request.h"

#define ESBX_GATEWAY_PROGRESS_TYPE "application/vnd.esbx.progress"

/* The work of a route: its result (owned), or NULL with *ERR set.  It may
   set *PAYLOAD to an fd whose content, from its offset, follows the result
   line (closed after).  It runs in another thread, after the request's
   handler has returned: DATA must not borrow from the request.  */
typedef json_t *(*esbx_gateway_work_fn) (void *data, int *payload, esbx_error_t *err);

/* The request asks for ?progress=1.  */
bool esbx_gateway_wants_progress (struct esbx_gateway_ctx *ctx);
/* Run FN (DATA, freed with DATA_FREE at the end) and answer with its
   progress stream.  A client that goes away does not stop the work: the
   answer is freed once it has finished.  */
void esbx_gateway_reply_progress (struct esbx_gateway_ctx *ctx, esbx_gateway_work_fn fn, void *data,
                                  void (*data_free) (void *));

#endif
