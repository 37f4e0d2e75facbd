/* A container joining a session that runs in a user namespace
 * (layerstore/userns.c): it gets a user namespace of its own with the
 * session's map, so that root in the container is the same host id as
 * root in the session, and the workspace (the session's merged view,
 * whose ids the host sees moved up by the range's first) shows the files'
 * real owners in both.
 *
 * runc joins the holder's net, uts and ipc namespaces as root of the host
 * first and only then makes the new user namespace, so the container
 * lives in namespaces its user namespace does not own, as the session's
 * commands do.  Two consequences, handled here:
 *   - the sysctls Docker sets in a container's net namespace (ports below
 *     1024 and ping for every id) cannot be written from inside; the
 *     holder set the same values in the session's net namespace, so they
 *     are dropped from the config;
 *   - /dev/mqueue cannot be mounted for an ipc namespace it does not own;
 *     the mount is dropped (POSIX message queues still work: mq_open needs
 *     no mount).
 * The image root stays owned by host root: root in the container reads
 * it like any user, and writes only where its modes let every user.
 *
 * A container that asks for a user namespace of its own (Docker's
 * userns-remap, a config with uidMappings) cannot mean by root what the
 * session means: refused, with the way out in the message.  */
#include "runtime.h"
#include "holder.h"
#include "utils.h"

#include <inttypes.h>
#include <string.h>

static const char *const given_sysctls[] = {
  "net.ipv4.ip_unprivileged_port_start",
  "net.ipv4.ping_group_range",
};

static bool
has_user_namespace (const json_t *linux_)
{
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

static json_t *
mapping (uint32_t host, uint32_t count)
{
  json_t *a = json_new (JSON_ARRAY);
  json_t *m = json_new (JSON_OBJECT);

  json_set_int (m, "containerID", 0);
  json_set_int (m, "hostID", host);
  json_set_int (m, "size", count);
  json_append (a, m);
  return a;
}

static void
drop_mqueue (json_t *config)
{
  json_t *mounts = json_get (config, "mounts");
  json_t *kept;
  size_t i;

  if (mounts == NULL || mounts->type != JSON_ARRAY)
    return;
  kept = json_new (JSON_ARRAY);
  for (i = 0; i < json_len (mounts); i++)
    {
      const char *type = json_get_string (json_at (mounts, i), "type");

      if (type && strcmp (type, "mqueue") == 0)
        continue;
      json_append (kept, json_take_at (mounts, i));
    }
  json_set (config, "mounts", kept);
}

int
spec_join_userns (json_t *config, const char *session, const struct esbx_holder_info *info,
                  esbx_error_t *err)
{
  json_t *linux_ = json_get (config, "linux");
  json_t *sysctl, *ns, *entry;
  size_t i;

  if (info->userns_uid == 0)
    return 0;
  if (linux_ == NULL || linux_->type != JSON_OBJECT)
    {
      linux_ = json_new (JSON_OBJECT);
      json_set (config, "linux", linux_);
    }
  if (has_user_namespace (linux_))
    return esbx_make_error_kind (
        err, ESBX_ERR_FORBIDDEN, 0,
        "esbx session `%s` runs in a user namespace of its own (its root is host uid %" PRIu32
        "); this container asks for another one (Docker's userns-remap, or uidMappings in its "
        "config), where root would be someone else: run it with `--userns host`, or create the "
        "session with `--userns off`",
        session, info->userns_uid);
  ns = json_get (linux_, "namespaces");
  if (ns == NULL || ns->type != JSON_ARRAY)
    {
      ns = json_new (JSON_ARRAY);
      json_set (linux_, "namespaces", ns);
    }
  entry = json_new (JSON_OBJECT);
  json_set_string (entry, "type", "user");
  json_append (ns, entry);
  json_set (linux_, "uidMappings", mapping (info->userns_uid, info->userns_count));
  json_set (linux_, "gidMappings", mapping (info->userns_uid, info->userns_count));
  sysctl = json_get (linux_, "sysctl");
  if (sysctl && sysctl->type == JSON_OBJECT)
    for (i = 0; i < ARRAY_SIZE (given_sysctls); i++)
      json_remove (sysctl, given_sysctls[i]);
  drop_mqueue (config);
  return 0;
}
