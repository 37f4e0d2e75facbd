/* esbx: a child that only holds new namespaces (a keeper), the one way:
   forked, in the child only system calls (the parent may be threaded):
   signals unblocked, killed when the parent dies, every descriptor closed
   (a lock the parent holds must not outlive it there), unshare, then it
   waits to be killed.  The parent reads or writes its /proc/PID files
   (a user namespace's maps, its ns/ links) and ends it.  */
#ifndef ESBX_NSKEEPER_H
#define ESBX_NSKEEPER_H

#include "error.h"

#include <sys/types.h>

/* A keeper in new namespaces of FLAGS (CLONE_NEWUSER, CLONE_NEWNET...):
   its pid once it is in them.  */
pid_t esbx_nskeeper_start (int flags, esbx_error_t *err);
/* PID killed and reaped.  */
void esbx_nskeeper_stop (pid_t pid);

#endif
