/* The rules of the session seccomp filter (syscall_filter.h), built with
   libseccomp at build time by seccomp_gen.c; see filter_rules.h.  */
#include "filter_rules.h"
#include "confine.h"
#include "syscall_profile.h"
#include "utils.h"

#include <errno.h>
#include <sched.h>
#include <seccomp.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>

#ifndef AF_KCM
#define AF_KCM 41
#endif
/* Docker's profile numbers: AF_KCM is 38 in its comments' kernel headers,
   AF_VSOCK 40; both refused whatever libc calls them.  */
static const uint64_t refused_families[] = { 38, 40 };

static const unsigned long refused_ioctls[] = { TIOCSTI, TIOCLINUX };

/* personality(2) values of the profile: PER_LINUX, PER_LINUX32,
   UNAME26, PER_LINUX32|UNAME26 and the query 0xffffffff.  */
static const uint64_t personalities[] = { 0x0, 0x8, 0x20000, 0x20008, 0xffffffff };

/* The namespace flags clone(2) may not carry (CLONE_NEWNS, NEWCGROUP,
   NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET): the profile's mask.  */
#define CLONE_NS_MASK 0x7E020000ULL
static const uint64_t clone_ns_flags[] = {
  CLONE_NEWNS,   CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC,
  CLONE_NEWUSER, CLONE_NEWPID,    CLONE_NEWNET,
};

/* Socket families the profile allows: all but 38 and 40, as masked ranges
   that also require the upper 32 bits to be zero.  */
static const struct
{
  uint64_t mask, value;
} families[] = {
  { ~0x1fULL, 0 }, /* 0-31 */
  { ~0x3ULL, 32 }, /* 32-35 */
  { ~0x1ULL, 36 }, /* 36-37 */
  { ~0x0ULL, 39 }, /* 39 */
  { ~0x0ULL, 41 }, /* 41 */
  { ~0x1ULL, 42 }, /* 42-43 */
  { ~0x3ULL, 44 }, /* 44-47 */
  { ~0xfULL, 48 }, /* 48-63 */
};

/* Filtered by their arguments (add_arg_rules), whatever a capability
   table says of them.  */
static const char *const by_argument[] = { "clone", "clone3", "socket", "personality" };

static bool
filtered_by_argument (const char *name)
{
  size_t i;

  for (i = 0; i < ARRAY_SIZE (by_argument); i++)
    if (strcmp (name, by_argument[i]) == 0)
      return true;
  return false;
}

/* Names unknown to this libseccomp or this architecture are skipped.  */
static int
add_names (scmp_filter_ctx ctx, uint32_t action, const char *const *names)
{
  int nr, r;

  for (; *names; names++)
    {
      if (filtered_by_argument (*names))
        continue;
      nr = seccomp_syscall_resolve_name (*names);
      if (nr == __NR_SCMP_ERROR)
        continue;
      r = seccomp_rule_add (ctx, action, nr, 0);
      if (r < 0 && r != -EDOM && r != -EFAULT && r != -EEXIST)
        return r;
    }
  return 0;
}

static int
add_arg_rules (scmp_filter_ctx ctx)
{
  size_t i;
  int r = 0;

  for (i = 0; i < ARRAY_SIZE (families) && r == 0; i++)
    r = seccomp_rule_add (ctx, SCMP_ACT_ALLOW, SCMP_SYS (socket), 1,
                          SCMP_A0 (SCMP_CMP_MASKED_EQ, families[i].mask, families[i].value));
  for (i = 0; i < ARRAY_SIZE (personalities) && r == 0; i++)
    r = seccomp_rule_add (ctx, SCMP_ACT_ALLOW, SCMP_SYS (personality), 1,
                          SCMP_A0 (SCMP_CMP_EQ, personalities[i], 0));
  if (r == 0)
    r = seccomp_rule_add (ctx, SCMP_ACT_ALLOW, SCMP_SYS (clone), 1,
                          SCMP_A0 (SCMP_CMP_MASKED_EQ, CLONE_NS_MASK, 0));
  /* clone3 hides its flags in memory a filter cannot read: it is left to
     the default, ENOSYS, so that libc falls back to clone.  */
  return r;
}

static int
add_arches (scmp_filter_ctx ctx)
{
  int r;

  /* 32-bit programs on x86_64, as in the profile's archMap.  */
  if (seccomp_arch_native () != SCMP_ARCH_X86_64)
    return 0;
  r = seccomp_arch_add (ctx, SCMP_ARCH_X86);
  if (r == 0 || r == -EEXIST)
    r = seccomp_arch_add (ctx, SCMP_ARCH_X32);
  return r == -EEXIST ? 0 : r;
}

scmp_filter_ctx
esbx_seccomp_profile (void)
{
  scmp_filter_ctx ctx = seccomp_init (SCMP_ACT_ERRNO (ENOSYS));
  size_t i;
  int r;

  if (ctx == NULL)
    return NULL;
  r = add_arches (ctx);
  if (r == 0)
    r = add_names (ctx, SCMP_ACT_ALLOW, profile_allowed);
  if (r == 0 && seccomp_arch_native () == SCMP_ARCH_X86_64)
    r = add_names (ctx, SCMP_ACT_ALLOW, profile_allowed_x86);
  for (i = 0; i < ARRAY_SIZE (profile_by_cap) && r == 0; i++)
    r = add_names (
        ctx, esbx_confine_keeps (profile_by_cap[i].cap) ? SCMP_ACT_ALLOW : SCMP_ACT_ERRNO (EPERM),
        profile_by_cap[i].names);
  if (r == 0)
    r = add_arg_rules (ctx);
  if (r == 0)
    return ctx;
  seccomp_release (ctx);
  return NULL;
}

scmp_filter_ctx
esbx_seccomp_refusals (void)
{
  scmp_filter_ctx ctx = seccomp_init (SCMP_ACT_ALLOW);
  size_t i;
  int r;

  if (ctx == NULL)
    return NULL;
  r = add_arches (ctx);
  for (i = 0; i < ARRAY_SIZE (refused_ioctls) && r == 0; i++)
    r = seccomp_rule_add (ctx, SCMP_ACT_ERRNO (EPERM), SCMP_SYS (ioctl), 1,
                          SCMP_A1 (SCMP_CMP_MASKED_EQ, 0xffffffffULL, refused_ioctls[i]));
  for (i = 0; i < ARRAY_SIZE (refused_families) && r == 0; i++)
    r = seccomp_rule_add (ctx, SCMP_ACT_ERRNO (EPERM), SCMP_SYS (socket), 1,
                          SCMP_A0 (SCMP_CMP_MASKED_EQ, 0xffffffffULL, refused_families[i]));
  for (i = 0; i < ARRAY_SIZE (clone_ns_flags) && r == 0; i++)
    r = seccomp_rule_add (ctx, SCMP_ACT_ERRNO (EPERM), SCMP_SYS (clone), 1,
                          SCMP_A0 (SCMP_CMP_MASKED_EQ, clone_ns_flags[i], clone_ns_flags[i]));
  if (r == 0)
    return ctx;
  seccomp_release (ctx);
  return NULL;
}
