/* esbx shim: the rules of the session seccomp filter (see
 * shim/lib/syscall_filter.h for what they allow and refuse), as libseccomp
 * contexts.  Built at build time only: seccomp_gen.c compiles both into
 * classic BPF programs that syscall_filter.c installs with seccomp(2), so
 * that no command pays for libseccomp's compilation (~35 ms) and the
 * binaries do not link libseccomp.  */
#ifndef ESBX_FILTER_RULES_H
#define ESBX_FILTER_RULES_H

#include <seccomp.h>

/* 1. The profile: Docker's default as an allow-list.  NULL on failure.  */
scmp_filter_ctx esbx_seccomp_profile (void);
/* 2. The refusals by argument, installed after the profile.  */
scmp_filter_ctx esbx_seccomp_refusals (void);

#endif
