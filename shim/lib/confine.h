/* esbx shim: what a command gives up before it runs in a session: every
   capability outside Docker's default set (from the bounding set too), and
   root when --user names another user.  The seccomp filter (syscall_filter.h) is
   the last step, after the setns calls it forbids.  */
#ifndef ESBX_CONFINE_H
#define ESBX_CONFINE_H

#include "error.h"

#include <stdbool.h>
#include <sys/types.h>

/* Switch to UID:GID when SET_USER (supplementary groups cleared), dropping
   capabilities first.  */
int esbx_confine_user (bool set_user, uid_t uid, gid_t gid, esbx_error_t *err);
/* Whether a session command keeps capability CAP (Docker's default set).  */
bool esbx_confine_keeps (int cap);

#endif
