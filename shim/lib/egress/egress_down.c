/* Taking a session's egress network down when its holder ends: the
   refused attempts recorded as events first, then the slot freed (resolver,
   nftables table, veth pair, records).  */
#include "egress.h"
#include "utils.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

static void
down_if_session (esbx_store_t *store, int dfd, int slot, const char *session, void *data)
{
  if (strcmp (session, data) != 0)
    return;
  esbx_egress_record_refused (store, session);
  esbx_egress_free_slot (dfd, slot);
}

void
esbx_egress_down (esbx_store_t *store, const char *session)
{
  _cleanup_close_ int dfd = -1;

  int slot;

  dfd = TEMP_FAILURE_RETRY (open (ESBX_EGRESS_RUN, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dfd < 0)
    return;
  /* Through the index: one slot a session.  */
  slot = esbx_egress_slot (store, session);
  if (slot >= 0)
    down_if_session (store, dfd, slot, session, (void *)session);
}
