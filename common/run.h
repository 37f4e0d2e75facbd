/* esbx: running a helper program (diff3 for rebase, diff for patches, nft,
   ip and dnsmasq for egress), the one way: fork, in the child only
   async-signal-safe steps (signals unblocked, optional limits and net
   namespace, the streams set, every other descriptor closed but those
   passed on), execv, and wait.  */
#ifndef ESBX_RUN_H
#define ESBX_RUN_H

#include "error.h"

#include <stdbool.h>
#include <stddef.h>

struct esbx_run
{
  char *const *argv;
  /* Where ARGV[0] is looked for, in order (absolute directories: the
     caller's PATH may lack the sbin ones); NULL: PATH (execvp).  */
  const char *const *dirs;
  int in, out, err; /* the child's stdin, stdout and stderr; -1: the caller's */
  const int *keep;  /* descriptors passed on at their numbers */
  size_t n_keep;
  int netns;                /* a net namespace to enter first, or -1 */
  unsigned long long fsize; /* RLIMIT_FSIZE (SIGXFSZ ignored: writes fail), 0: none */
  bool sigpipe;             /* SIGPIPE at its default (a reader that went away ends it) */
};

/* Run R and wait for it: its wait status in *STATUS (exec failing is
   status 127).  */
int esbx_run (const struct esbx_run *r, int *status, esbx_error_t *err);

#endif
