#include "sandbox_session.h"
#include "utils.h"

#include <fcntl.h>
#include <unistd.h>

int
esbx_sandbox_session_open (esbx_store_t *store, const char *name, struct esbx_sandbox_session **out,
                           esbx_error_t *err)
{
  struct esbx_sandbox_session *ss;
  _cleanup_close_ int dfd = -1;
  struct esbx_session *rec = NULL;

  dfd = esbx_session_open_dir (store, name, err);
  if (dfd < 0)
    return -1;
  if (esbx_session_load_at (dfd, name, &rec, err) < 0)
    return -1;
  ss = xmalloc0 (sizeof *ss);
  ss->store = store;
  ss->name = xstrdup (name);
  ss->dfd = take_fd (&dfd);
  ss->rec = rec;
  *out = ss;
  return 0;
}

void
esbx_sandbox_session_close (struct esbx_sandbox_session *ss)
{
  if (ss == NULL)
    return;
  /* An operation that failed between esbx_owner_begin and its end.  */
  if (ss->marker)
    unlinkat (ss->dfd, ss->marker, 0);
  free (ss->marker);
  if (ss->dfd >= 0)
    close (ss->dfd);
  esbx_session_free (ss->rec);
  free (ss->name);
  free (ss);
}
