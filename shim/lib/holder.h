/* esbx shim: the session holder, esbx-holder, one per session.
 *
 * It is PID 1 of the session's pid namespace and owns its mnt, uts, ipc and
 * (unless the session shares the host network) net namespaces.  A session's
 * commands join all of them; a container (`--runtime esbx`) joins the net,
 * uts and ipc namespaces only, keeping a pid namespace of its own, so that
 * neither can open the other's /proc/PID entries.  Both sit in the session
 * cgroup (a container whose engine manages cgroups through systemd keeps
 * the engine's).  It is recorded in ROOT/sessions/S/holder.json with its
 * pid and start time.
 *
 * The executable is looked up next to the running program, then in its
 * ../shim/ (a build tree), then $ESBX_HOLDER, then $PATH.  */
#ifndef ESBX_HOLDER_H
#define ESBX_HOLDER_H

#include "layerstore.h"
#include "sandbox_session.h"

#include <sys/types.h>

/* What esbx-holder sends on its ready pipe (common/sync.h) once the
   session's namespaces are ready; an error instead when it failed.  */
#define ESBX_HOLDER_READY 'R'

/* In the session directory while a container of the session may live
   outside the session cgroup (esbx-runtime with a systemd cgroup manager):
   esbx_holder_stop then also ends every process of the session's ipc
   namespace, which such a container joined and cannot leave.  */
#define ESBX_HOLDER_OUTSIDE_CGROUP "containers-outside-cgroup"

struct esbx_holder_info
{
  pid_t pid;
  unsigned long long starttime;
  char *cgroup;          /* session cgroup path relative to the cgroup root, e.g. "esbx/S" */
  uint32_t userns_uid;   /* host id of the session's root in its user namespace, 0: none */
  uint32_t userns_count; /* ids mapped from userns_uid */
  /* The gVisor tier (gvisor.h): pid is the sandbox's; NULL otherwise.  */
  char *gvisor_id;    /* runsc's container id */
  char *gvisor_state; /* runsc's --root */
  char *gvisor_runsc; /* the runsc binary */
};

/* Start the holder of the session SS holds if it is not running; fails
   with a clear cause if the holder cannot start.  While it starts one, SS
   holds an owner marker (owner.h).  */
int esbx_holder_ensure (struct esbx_sandbox_session *ss, struct esbx_holder_info *info,
                        esbx_error_t *err);
/* < 0 with ESRCH if not running.  */
int esbx_holder_get (esbx_store_t *store, const char *session, struct esbx_holder_info *info,
                     esbx_error_t *err);
/* End the holder and every process of the session, remove the session
   cgroup.  Not running is not an error.  */
int esbx_holder_stop (esbx_store_t *store, const char *session, esbx_error_t *err);
void esbx_holder_info_free (struct esbx_holder_info *info);

/* The holder's mount of the session's view at WORKSPACE (holder_workspace.c):
   detached, 1 without a change when something in the session uses it;
   attached again from the host's view MERGED.  */
int esbx_holder_workspace_detach (const struct esbx_holder_info *info, const char *workspace,
                                  esbx_error_t *err);
int esbx_holder_workspace_attach (const struct esbx_holder_info *info, const char *merged,
                                  const char *workspace, esbx_error_t *err);

#endif
