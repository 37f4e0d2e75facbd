/* esbx shim: the device policy of a session cgroup.
 *
 * A session may open only the nodes of its /dev (null, zero, full, random,
 * urandom, tty, ptmx and its ptys) and what Docker grants a container by
 * default on top (console, tun), and may make (mknod) any node without
 * being able to open it: Docker's default rules.  On cgroup v1 they are
 * written to the devices controller (a child cgroup, such as a container
 * of the session that runc makes, can only narrow them); on v2 they are an
 * eBPF program of type BPF_PROG_TYPE_CGROUP_DEVICE attached with
 * BPF_F_ALLOW_MULTI, so a container's own program adds to it.  */
#ifndef ESBX_DEVICES_H
#define ESBX_DEVICES_H

#include "error.h"

/* DIR: the session's cgroup directory in the v1 devices hierarchy, or in
   the v2 tree.  */
int esbx_devices_apply_v1 (const char *dir, esbx_error_t *err);
int esbx_devices_apply_v2 (const char *dir, esbx_error_t *err);

#endif
