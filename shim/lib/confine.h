/* esbx shim: what a command gives up before it runs in a session: every
   capability outside Docker's default set (from the bounding set too), the
   ability to gain privileges (no_new_privs), and the syscalls that would let
   it leave or reshape the sandbox (a libseccomp filter: mount, unshare,
   setns, ptrace, kexec, modules, bpf, keyrings, reboot, ... fail with
   EPERM).  Called after the setns calls, which the filter forbids.  */
#ifndef ESBX_CONFINE_H
#define ESBX_CONFINE_H

#include "error.h"

#include <stdbool.h>
#include <sys/types.h>

/* Switch to UID:GID when SET_USER (supplementary groups cleared), dropping
   capabilities first.  */
int esbx_confine_user (bool set_user, uid_t uid, gid_t gid, esbx_error_t *err);
/* no_new_privs and the seccomp filter; the last step before execve.  */
int esbx_confine_seccomp (esbx_error_t *err);

#endif
