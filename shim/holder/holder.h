/* esbx-holder internals: the session's root filesystem.  */
#ifndef ESBX_HOLDER_INTERNAL_H
#define ESBX_HOLDER_INTERNAL_H

#include "error.h"

struct holder_config
{
  const char *session;
  const char *session_dir;
  const char *merged;
  const char *workspace;
  const char *network;
  const char *cgroup;
  const char *hide; /* the store root: other sessions' state stays out of sight */
  int ready_fd;
};

/* In a fresh mount namespace: build the session's root (the host root
   read-only, the workspace read-write, private /tmp and /dev/shm, /proc of
   the caller's pid namespace) and pivot into it.  */
int holder_setup_root (const struct holder_config *cfg, esbx_error_t *err);

/* Bring up the loopback interface of the caller's net namespace.  */
int holder_loopback_up (esbx_error_t *err);

#endif
