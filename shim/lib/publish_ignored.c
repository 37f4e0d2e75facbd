/* esbx_sandbox_publish with ESBX_PUBLISH_INCLUDE_IGNORED: the same verb,
   publishing what the session's ignore rules would leave in it.  Kept
   apart from sandbox.c only until esbx_sandbox_publish takes the flag.  */
#include "sandbox.h"

int
esbx_sandbox_publish_ext (esbx_store_t *store, const char *name, const char *message,
                          unsigned int flags, struct esbx_publish_result *result, esbx_error_t *err)
{
  if (!(flags & ESBX_PUBLISH_INCLUDE_IGNORED))
    return esbx_sandbox_publish (store, name, message, flags, result, err);
  if (esbx_session_publish_flags (store, name, message, ESBX_CHANGES_INCLUDE_IGNORED, result, err)
      < 0)
    return -1;
  if ((flags & ESBX_PUBLISH_DISCARD) && esbx_sandbox_discard (store, name, err) < 0)
    return -1;
  return 0;
}
