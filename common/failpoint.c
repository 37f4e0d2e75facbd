#include "failpoint.h"

#ifdef ESBX_FAILPOINTS
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void
esbx_failpoint (const char *name)
{
  const char *want = getenv ("ESBX_FAILPOINT");

  if (want && strcmp (want, name) == 0)
    kill (getpid (), SIGKILL);
}
#endif
