/* esbx shim: the seccomp filter of every session command, Docker's default
   profile as an allow-list.
 *
 * Two filters, both loaded with no_new_privs set:
 *  1. the profile (syscall_profile.h, generated from moby's default.json):
 *     its unconditional syscalls, those of the capabilities a session keeps
 *     (chroot), socket for any family but AF_KCM and AF_VSOCK, personality
 *     for Linux and Linux32 only, clone without namespace flags; clone3
 *     fails with ENOSYS so that libc falls back to clone.  Syscalls the
 *     profile grants only with a capability a session lacks (mount, setns,
 *     unshare, bpf, ptrace of others' processes, kexec, modules, NUMA
 *     policy, ...) fail with EPERM; everything else, and every syscall a
 *     later kernel adds, with ENOSYS.
 *  2. refusals by argument that the profile cannot express next to an
 *     unconditional allow: ioctl TIOCSTI and TIOCLINUX (typing into or
 *     driving a terminal), socket AF_VSOCK and AF_KCM, compared on the 32
 *     bits the kernel reads.  The kernel applies the stricter answer.  */
#ifndef ESBX_SYSCALL_FILTER_H
#define ESBX_SYSCALL_FILTER_H

#include "error.h"

/* no_new_privs and both filters; the last step before execve.  */
int esbx_seccomp_load (esbx_error_t *err);

#endif
