/* Installs the two programs that the build compiled from the rules of
   shim/seccomp/filter_rules.c (seccomp_bpf.h, made by esbx-seccomp-gen):
   what seccomp_load of libseccomp would install, without its ~35 ms of
   compilation in every command.  */
#include "syscall_filter.h"
#include "seccomp_bpf.h"
#include "utils.h"

#include <errno.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static int
install (const struct sock_filter *insns, size_t len)
{
  struct sock_fprog prog = { .len = (unsigned short)len, .filter = (struct sock_filter *)insns };

  return (int)syscall (SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
}

int
esbx_seccomp_load (esbx_error_t *err)
{
  if (prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
    return esbx_make_error (err, errno, "set no_new_privs");
  /* The refusals last: where both filters answer with an errno, the kernel
     takes the newest filter's, so a refused clone or socket family reads
     EPERM rather than the profile's ENOSYS.  */
  if (install (esbx_seccomp_profile_bpf, ARRAY_SIZE (esbx_seccomp_profile_bpf)) < 0
      || install (esbx_seccomp_refusals_bpf, ARRAY_SIZE (esbx_seccomp_refusals_bpf)) < 0)
    return esbx_make_error (err, errno, "install the seccomp filter");
  return 0;
}
