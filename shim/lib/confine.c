#include "confine.h"
#include "utils.h"

#include <errno.h>
#include <grp.h>
#include <linux/capability.h>
#include <sched.h>
#include <seccomp.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

/* Docker's default capability set: enough for package managers, chown and
   friends; nothing that reaches the kernel's global state.  */
static const int keep_caps[] = {
  CAP_CHOWN,      CAP_DAC_OVERRIDE, CAP_FOWNER,      CAP_FSETID,           CAP_KILL,
  CAP_SETGID,     CAP_SETUID,       CAP_SETPCAP,     CAP_NET_BIND_SERVICE, CAP_NET_RAW,
  CAP_SYS_CHROOT, CAP_MKNOD,        CAP_AUDIT_WRITE, CAP_SETFCAP,
};

/* Denied with EPERM (like Docker's default profile, which also keys most of
   these on CAP_SYS_ADMIN and friends).  Names unknown to the architecture
   are skipped.  */
static const char *const denied[] = {
  "mount",
  "umount",
  "umount2",
  "unshare",
  "setns",
  "pivot_root",
  "open_tree",
  "move_mount",
  "fsopen",
  "fsconfig",
  "fsmount",
  "fspick",
  "mount_setattr",
  "ptrace",
  "process_vm_readv",
  "process_vm_writev",
  "kexec_load",
  "kexec_file_load",
  "init_module",
  "finit_module",
  "delete_module",
  "create_module",
  "bpf",
  "keyctl",
  "add_key",
  "request_key",
  "reboot",
  "swapon",
  "swapoff",
  "open_by_handle_at",
  "name_to_handle_at",
  "perf_event_open",
  "userfaultfd",
  "acct",
  "quotactl",
  "quotactl_fd",
  "lookup_dcookie",
  "iopl",
  "ioperm",
  "settimeofday",
  "clock_settime",
  "clock_adjtime",
  "adjtimex",
  "stime",
  "syslog",
  "vhangup",
  "nfsservctl",
  "uselib",
  "_sysctl",
  "get_kernel_syms",
  "query_module",
  "pidfd_getfd",
  "fanotify_init",
  "lsm_set_self_attr",
};

static const uint64_t ns_flags[] = {
  CLONE_NEWNS,  CLONE_NEWUTS, CLONE_NEWIPC,    CLONE_NEWUSER,
  CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP,
};

static bool
kept (int cap)
{
  size_t i;

  for (i = 0; i < ARRAY_SIZE (keep_caps); i++)
    if (keep_caps[i] == cap)
      return true;
  return false;
}

static int
last_cap (void)
{
  _cleanup_file_ FILE *f = fopen ("/proc/sys/kernel/cap_last_cap", "re");
  int v = CAP_LAST_CAP;

  if (f == NULL || fscanf (f, "%d", &v) != 1)
    return CAP_LAST_CAP;
  return v;
}

static int
drop_caps (bool to_nonroot, esbx_error_t *err)
{
  struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
  struct __user_cap_data_struct data[2] = { { 0 } };
  int cap, last = last_cap ();
  size_t i;

  for (cap = 0; cap <= last; cap++)
    if (!kept (cap) && prctl (PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
      return esbx_make_error (err, errno, "drop capability %d from the bounding set", cap);
  prctl (PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  if (to_nonroot)
    return 0; /* setuid to a non-zero uid clears the rest.  */
  for (i = 0; i < ARRAY_SIZE (keep_caps); i++)
    {
      data[keep_caps[i] / 32].effective |= 1u << (keep_caps[i] % 32);
      data[keep_caps[i] / 32].permitted |= 1u << (keep_caps[i] % 32);
    }
  if (syscall (SYS_capset, &hdr, data) < 0)
    return esbx_make_error (err, errno, "capset");
  return 0;
}

int
esbx_confine_user (bool set_user, uid_t uid, gid_t gid, esbx_error_t *err)
{
  bool nonroot = set_user && uid != 0;

  if (drop_caps (nonroot, err) < 0)
    return -1;
  if (!set_user)
    return 0;
  if (setgroups (0, NULL) < 0)
    return esbx_make_error (err, errno, "setgroups");
  if (setresgid (gid, gid, gid) < 0)
    return esbx_make_error (err, errno, "setgid %u", (unsigned)gid);
  if (setresuid (uid, uid, uid) < 0)
    return esbx_make_error (err, errno, "setuid %u", (unsigned)uid);
  return 0;
}

int
esbx_confine_seccomp (esbx_error_t *err)
{
  scmp_filter_ctx ctx;
  size_t i;
  int nr, r;

  if (prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
    return esbx_make_error (err, errno, "set no_new_privs");
  ctx = seccomp_init (SCMP_ACT_ALLOW);
  if (ctx == NULL)
    return esbx_make_error (err, ENOMEM, "seccomp_init");
  for (i = 0; i < ARRAY_SIZE (denied); i++)
    {
      nr = seccomp_syscall_resolve_name (denied[i]);
      if (nr == __NR_SCMP_ERROR)
        continue;
      r = seccomp_rule_add (ctx, SCMP_ACT_ERRNO (EPERM), nr, 0);
      if (r < 0 && r != -EDOM && r != -EFAULT)
        goto fail;
    }
  /* New namespaces through clone: the flags are the first argument.  */
  for (i = 0; i < ARRAY_SIZE (ns_flags); i++)
    {
      r = seccomp_rule_add (ctx, SCMP_ACT_ERRNO (EPERM), SCMP_SYS (clone), 1,
                            SCMP_A0 (SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]));
      if (r < 0)
        goto fail;
    }
  /* clone3 hides its flags in memory a filter cannot read: report it
     missing so that libc falls back to clone, as Docker does.  */
  r = seccomp_rule_add (ctx, SCMP_ACT_ERRNO (ENOSYS), SCMP_SYS (clone3), 0);
  if (r < 0)
    goto fail;
  r = seccomp_load (ctx);
  if (r < 0)
    goto fail;
  seccomp_release (ctx);
  return 0;

fail:
  seccomp_release (ctx);
  return esbx_make_error (err, -r, "install the seccomp filter");
}
