#include "confine.h"
#include "utils.h"

#include <errno.h>
#include <grp.h>
#include <linux/capability.h>
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

bool
esbx_confine_keeps (int cap)
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
    if (!esbx_confine_keeps (cap) && prctl (PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
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
