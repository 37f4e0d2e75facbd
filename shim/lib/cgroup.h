/* esbx shim: the session cgroup, the resource account and limits of every
 * process of a session.
 *
 * cgroup v2 is used where /sys/fs/cgroup is a cgroup2 mount, or where
 * /sys/fs/cgroup/unified is one with controllers available; otherwise the v1
 * controllers memory, pids, cpu, cpuacct, freezer and devices, each under
 * /sys/fs/cgroup/CONTROLLER/REL.  REL is a path relative to the cgroup root
 * such as "esbx/S" (see esbx_cgroup_session_path).  Missing v1 controllers
 * are skipped: accounting is best effort, membership is not.  */
#ifndef ESBX_CGROUP_H
#define ESBX_CGROUP_H

#include "error.h"
#include "layerstore.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

enum esbx_cgroup_version
{
  ESBX_CGROUP_V1 = 1,
  ESBX_CGROUP_V2 = 2,
};

struct esbx_cgroup_limits
{
  uint64_t memory;  /* bytes, 0 = unlimited */
  uint64_t pids;    /* 0 = unlimited */
  const char *cpus; /* "1.5", NULL = unlimited */
};

/* UINT64_MAX marks what could not be read.  */
struct esbx_cgroup_usage
{
  uint64_t memory;       /* bytes in use now */
  uint64_t memory_peak;  /* high-water mark */
  uint64_t memory_limit; /* UINT64_MAX when unlimited */
  uint64_t cpu_usec;     /* CPU time consumed, user + system */
  uint64_t pids;         /* tasks now */
  uint64_t pids_limit;   /* UINT64_MAX when unlimited */
  uint64_t oom_kills;    /* processes killed by the OOM killer */
  uint64_t pids_denied;  /* forks refused by pids.max */
};

enum esbx_cgroup_version esbx_cgroup_version (void);

/* The cgroup of SESSION in STORE, relative to the cgroup root: "esbx/S" for
   the default store, "esbx/HASH.S" for other roots so that two stores with
   a session of the same name never share one.  */
char *esbx_cgroup_session_path (esbx_store_t *store, const char *session);
/* The prefix of every cgroup name that belongs to STORE under "esbx/".  */
char *esbx_cgroup_store_prefix (esbx_store_t *store);

/* Create REL (idempotent) and apply LIMITS.  */
int esbx_cgroup_create (const char *rel, const struct esbx_cgroup_limits *limits,
                        esbx_error_t *err);
bool esbx_cgroup_exists (const char *rel);
/* Move PID into REL.  PID 0 is the caller, which must be single-threaded
   (a freshly forked child): on v1 it then moves its one thread through
   `tasks`, which skips the cgroup-wide lock whose RCU wait made every
   `esbx exec` 6-16 ms slower through `cgroup.procs`.  */
int esbx_cgroup_enter (const char *rel, pid_t pid, esbx_error_t *err);
/* Every pid (host view) in REL and its descendants.  */
int esbx_cgroup_pids (const char *rel, pid_t **pids, size_t *n, esbx_error_t *err);
int esbx_cgroup_usage (const char *rel, struct esbx_cgroup_usage *usage, esbx_error_t *err);
/* SIGKILL every process of REL and wait (bounded) until it is empty.  */
int esbx_cgroup_kill (const char *rel, esbx_error_t *err);
/* Freeze (FROZEN true) or thaw every process of REL and wait until the
   kernel says it is done: v2 cgroup.freeze, v1 freezer.state.  A missing
   cgroup (no holder) is nothing to do.  */
int esbx_cgroup_freeze (const char *rel, bool frozen, esbx_error_t *err);
/* Whether REL exists and is frozen.  */
bool esbx_cgroup_frozen (const char *rel);
/* Kill what is left and remove REL.  Missing is not an error.  */
int esbx_cgroup_remove (const char *rel, esbx_error_t *err);
/* Names (last components) of the cgroups directly under "esbx".  */
char **esbx_cgroup_list_esbx (esbx_error_t *err);

#endif
