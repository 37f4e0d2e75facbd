/* esbx shim: the gVisor tier.  A session made with `--isolation gvisor`
   has a gVisor sandbox (runsc, standalone) for holder: its root is built
   from the same allow-list as esbx-holder's (gvisor_spec.c), its commands
   run in gVisor's kernel through `runsc exec` (gvisor.c).  */
#ifndef ESBX_GVISOR_H
#define ESBX_GVISOR_H

#include "egress.h"
#include "holder.h"
#include "sandbox_session.h"

#include <stdbool.h>
#include <stdint.h>

/* The session's record asks for the gVisor tier.  */
bool esbx_gvisor_wanted (const struct esbx_session *s);

/* The network of a sandbox as its spec says it (gvisor.c): the host's
   (HOST: no net namespace in the spec, runsc's hostinet), or a namespace
   of its own, NETNS when the caller made it (egress: gVisor's netstack
   takes over its interfaces), else an empty one (loopback only).  An
   egress sandbox's /etc/resolv.conf and CA bundle are RESOLV_CONF and
   CA_BUNDLE (shim/lib/egress.h), as the holder's are.  */
struct esbx_gvisor_net
{
  bool host;
  const char *netns;
  const char *resolv_conf;
  const char *ca_bundle;
};

/* gvisor_spec.c: the OCI config of SS's sandbox (root DIR, an empty
   directory of mount points) on network NET, as JSON.  */
json_t *esbx_gvisor_spec (const struct esbx_sandbox_session *ss, const char *root,
                          const struct esbx_gvisor_net *net, esbx_error_t *err);
/* Docker's capability set by name (ANY), or none.  */
json_t *esbx_gvisor_caps (bool any);
/* Make the mount points beneath ROOT that the spec names, and the
   placeholder files of the secrets the egress proxy puts in.  */
int esbx_gvisor_root_prepare (const struct esbx_sandbox_session *ss, const char *root,
                              esbx_error_t *err);

/* gvisor.c: start SS's sandbox in the session cgroup CGROUP (made by the
   caller) and write its holder record; the sandbox process is the
   holder.  NET, for an egress session, is its network prepared with its
   table in place (esbx_egress_prepare, esbx_egress_rules): the sandbox
   gets its link.  */
int esbx_gvisor_start (struct esbx_sandbox_session *ss, const char *cgroup,
                       const struct esbx_egress *net, esbx_error_t *err);
/* The runsc argv that runs ARGV in the sandbox of INFO: as UID:GID in
   CWD with exactly ENV.  */
char **esbx_gvisor_exec_argv (const struct esbx_holder_info *info, const char *cwd, uid_t uid,
                              gid_t gid, char *const *env, char *const *argv);
/* The runsc binary: $ESBX_RUNSC, else runsc on PATH (NULL: none).  */
char *esbx_gvisor_runsc (void);

#endif
