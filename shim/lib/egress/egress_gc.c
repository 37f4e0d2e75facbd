/* Egress networks whose session is gone or whose holder no longer runs
   (a holder killed with -9 cannot take its network down): found by
   `esbx gc` and freed.  */
#include "egress.h"
#include "sandbox.h"
#include "text.h"
#include "utils.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

static void
down_if_stale (esbx_store_t *store, int dfd, int slot, const char *session, void *data)
{
  FILE *report = data;

  if (esbx_name_valid (session) && esbx_session_exists (store, session)
      && esbx_sandbox_holder_running (store, session))
    return;
  if (esbx_name_valid (session) && esbx_session_exists (store, session))
    esbx_egress_record_refused (store, session);
  esbx_egress_free_slot (dfd, slot);
  if (report)
    fprintf (report, "removed egress network %d of session `%s`\n", slot, session);
}

void
esbx_egress_gc (esbx_store_t *store, FILE *report)
{
  _cleanup_close_ int dfd = -1;

  dfd = TEMP_FAILURE_RETRY (open (ESBX_EGRESS_RUN, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dfd < 0)
    return;
  esbx_egress_for_each_slot (store, dfd, down_if_stale, report);
}
