/* esbx shim: a session as one operation of the shim holds it (one `esbx
   exec`, one `create` of esbx-runtime): its directory opened and its
   session.json read once, then handed down to the holder, the owner marker,
   the cgroup, the event log and an exec's monitor and command instead of
   its name.  */
#ifndef ESBX_SANDBOX_SESSION_H
#define ESBX_SANDBOX_SESSION_H

#include "layerstore.h"

struct esbx_sandbox_session
{
  esbx_store_t *store; /* borrowed */
  char *name;
  int dfd;                  /* ROOT/sessions/NAME */
  struct esbx_session *rec; /* its session.json */
  char *marker;             /* the owner marker (owner.h), NULL when none */
  unsigned owners;          /* esbx_owner_begin calls not yet ended */
};

/* Fails (kind ESBX_ERR_NOT_FOUND) when the session does not exist.  */
int esbx_sandbox_session_open (esbx_store_t *store, const char *name,
                               struct esbx_sandbox_session **out, esbx_error_t *err);
/* Removes the owner marker if one is left.  */
void esbx_sandbox_session_close (struct esbx_sandbox_session *ss);

static inline void
cleanup_sandbox_sessionp (struct esbx_sandbox_session **ss)
{
  esbx_sandbox_session_close (*ss);
}
#define _cleanup_sandbox_session_ __attribute__ ((cleanup (cleanup_sandbox_sessionp)))

#endif
