/* The sessions a container cannot join, refused with the way out in the
 * message: one whose holder is a gVisor sandbox (shim/lib/gvisor.c), whose
 * processes live in gVisor's kernel where runc cannot put a container,
 * and one that runs in a user namespace (layerstore/userns.c):
 *
 * Joining would mean a user namespace with the session's map for the
 * container, so that root means the same host id on both sides.  runc
 * can make one after joining the holder's net, uts and ipc namespaces,
 * but the container's own root filesystem then belongs to an id its
 * root does not have: Docker's image layers (and a bundle's rootfs) are
 * owned by host root under directories only host root may enter, so runc
 * cannot even bind the rootfs ("permission denied"), and where it could,
 * root in the container could write nothing of its image.  Docker's
 * userns-remap solves that with image layers chowned to the range; esbx
 * has no say over Docker's layers.  A container in the host's user
 * namespace next to the session's commands would make "root" mean two
 * things in one session (the container could signal and read what the
 * session's root cannot), which is what the user namespace is there to
 * end.  So: refused.  Volumes made by the Docker plugin run without a
 * user namespace unless asked (-o userns=auto), so `--runtime esbx`
 * works with them as before.  */
#include "runtime.h"
#include "holder.h"
#include "utils.h"

#include <inttypes.h>

int
spec_refuse_join (const char *session, const struct esbx_holder_info *info, esbx_error_t *err)
{
  if (info->gvisor_id)
    return esbx_make_error_kind (
        err, ESBX_ERR_FORBIDDEN, 0,
        "esbx session `%s` is a gVisor sandbox: a container cannot join it (its commands run in "
        "gVisor's kernel); mount the volume without --runtime esbx, or create the session "
        "without --isolation gvisor",
        session);
  if (info->userns_uid == 0)
    return 0;
  return esbx_make_error_kind (
      err, ESBX_ERR_FORBIDDEN, 0,
      "esbx session `%s` runs in a user namespace (its root is host uid %" PRIu32
      "): a container cannot join it, its image root belongs to host root; create the session "
      "with `--userns off` (Docker volumes: -o userns=off, their default)",
      session, info->userns_uid);
}
