/* esbx shim: what /proc says about a process, with its identity pinned by
   pid and start time so that a reused pid is never mistaken for it.  */
#ifndef ESBX_PROC_H
#define ESBX_PROC_H

#include <stdbool.h>
#include <sys/types.h>

/* Start time (clock ticks after boot, field 22 of /proc/PID/stat).  Fails
   with ESRCH when PID is gone or a zombie: an exited process is not alive
   even while nobody has reaped it.  */
int esbx_proc_starttime (pid_t pid, unsigned long long *starttime);
bool esbx_proc_alive (pid_t pid, unsigned long long starttime);
/* The pid as seen in the innermost pid namespace of PID (last of NSpid).  */
pid_t esbx_proc_ns_pid (pid_t pid);
/* argv joined with spaces, or "[comm]" for kernel threads; NULL when gone.  */
char *esbx_proc_cmdline (pid_t pid);
/* SIGKILL every process whose namespace /proc/PID/ns/TYPE is the one NSFD
   (an open /proc/X/ns/TYPE, which pins it, so its inode is not reused)
   refers to, until a pass of /proc finds none; < 0 with EBUSY when some
   survive 40 passes.  The caller must not be in that namespace.  */
int esbx_proc_kill_ns (int nsfd, const char *type);

#endif
