/* /proc and /sys of a session, with Docker's default maskedPaths and
 * readonlyPaths: nothing there lets a session change the kernel's global
 * state (core_pattern, sysrq, IRQ affinity, ...) or read what Docker hides
 * (kcore, keys, timer and scheduler debug lists, ACPI, SCSI, firmware).  */
#include "root.h"
#include "utils.h"

#include <errno.h>
#include <sys/mount.h>

static const char *const proc_readonly[] = { "bus", "fs", "irq", "sys", "sysrq-trigger" };

static const char *const proc_masked[] = {
  "asound",        "acpi",       "interrupts",  "kcore",       "keys",
  "latency_stats", "timer_list", "timer_stats", "sched_debug", "scsi",
};

static const char *const sys_masked[] = { "firmware", "devices/virtual/powercap" };

static int
each (const char *dir, const char *const *names, size_t n, int (*fn) (const char *, esbx_error_t *),
      esbx_error_t *err)
{
  size_t i;

  for (i = 0; i < n; i++)
    {
      _cleanup_free_ char *p = xasprintf ("%s/%s", dir, names[i]);
      if (fn (p, err) < 0)
        return -1;
    }
  return 0;
}

int
holder_mount_proc (const char *proc, esbx_error_t *err)
{
  if (mount ("proc", proc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
    return esbx_make_error (err, errno, "mount proc on `%s`", proc);
  if (each (proc, proc_readonly, ARRAY_SIZE (proc_readonly), holder_readonly, err) < 0)
    return -1;
  return each (proc, proc_masked, ARRAY_SIZE (proc_masked), holder_mask, err);
}

int
holder_mount_sys (const char *sys, esbx_error_t *err)
{
  if (mount ("sysfs", sys, "sysfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
    return esbx_make_error (err, errno, "mount sysfs on `%s`", sys);
  return each (sys, sys_masked, ARRAY_SIZE (sys_masked), holder_mask, err);
}
