/* The sessions a container cannot join, refused with the way out in the
 * message.
 *
 * A gVisor sandbox (shim/lib/gvisor.c): its processes live in gVisor's
 * kernel, where runc cannot put a container.
 *
 * A session in a user namespace is joined with the session's map
 * (joined_userns.c), but only by a runtime that is host root and for a
 * container that has no user namespace of its own:
 * - podman rootless runs the runtime as an unprivileged user, which can
 *   neither join the holder's namespaces (the host's user namespace owns
 *   them) nor make the idmapped mounts of the container's root;
 * - Docker's userns-remap (and podman --userns, --uidmap) give the
 *   container a map of their own, with image layers chowned to it: the
 *   container's root would be another host id than the session's, which
 *   is what joining in the session's map is there to end.  Rather than
 *   pick one of the two maps, the create is refused.  */
#include "runtime.h"
#include "holder.h"
#include "utils.h"

#include <inttypes.h>
#include <string.h>
#include <unistd.h>

static bool
has_own_user_namespace (const json_t *config)
{
  const json_t *linux_ = json_get (config, "linux");
  const json_t *ns = json_get (linux_, "namespaces");
  size_t i;

  if (json_get (linux_, "uidMappings") || json_get (linux_, "gidMappings"))
    return true;
  if (ns == NULL || ns->type != JSON_ARRAY)
    return false;
  for (i = 0; i < json_len (ns); i++)
    {
      const char *type = json_get_string (json_at (ns, i), "type");
      if (type && strcmp (type, "user") == 0)
        return true;
    }
  return false;
}

int
spec_refuse_join (const char *session, const struct esbx_holder_info *info, const json_t *config,
                  esbx_error_t *err)
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
  if (geteuid () != 0)
    return esbx_make_error_kind (
        err, ESBX_ERR_FORBIDDEN, 0,
        "esbx session `%s` runs in a user namespace and the runtime runs as uid %u, not as host "
        "root (podman rootless?): a container joins it only from a rootful engine",
        session, (unsigned)geteuid ());
  if (has_own_user_namespace (config))
    return esbx_make_error_kind (
        err, ESBX_ERR_FORBIDDEN, 0,
        "esbx session `%s` runs in a user namespace (its root is host uid %" PRIu32
        ") and the container asks for one of its own (Docker's userns-remap, podman --userns): "
        "a container joins with the session's map only; run it without one, or create the "
        "session with `--userns off`",
        session, info->userns_uid);
  return 0;
}
