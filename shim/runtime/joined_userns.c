/* A container joined to a session that runs in a user namespace
 * (layerstore/userns.c) gets that namespace's map, so that root means the
 * same host id on both sides: what the container writes to the workspace
 * is owned by 0 on disk and by the session's root in `esbx exec`, and the
 * container can signal, trace or read nothing the session's root cannot.
 *
 * The container gets a user namespace of its own with exactly the
 * session's uid and gid map, not the session's namespace object: runc
 * joins a namespace given by path in libcontainer's fixed order, user
 * first, after which it could no longer join the holder's net, uts and
 * ipc namespaces, which the host's user namespace owns (the holder made
 * them before entering the session's, shim/holder/userns.c).  With a new
 * one, runc and crun join those three as host root, then unshare the user
 * namespace and the rest.  The same map gives the same ids; the two
 * namespace objects hold the same capabilities over the same (no)
 * namespaces of the host.
 *
 * Three things the container's root could not do itself are made on the
 * host side, per container, in /run/esbx/containers (joined_dir.c), and
 * undone at `delete`:
 * - its root filesystem, owned by host root, seen through idmapped mounts
 *   with the session's map (joined_rootfs.c), so that its image files are
 *   its root's to read and write and what it writes is owned by 0 on disk;
 *   a directory its root can traverse holds it (Docker's lies under
 *   /var/lib/docker, 0710);
 * - the session's sysfs and mqueue (joined_nsfs.c), which become binds.
 * Other bind sources (Docker's /etc/hosts under /var/lib/docker/containers,
 * the session's merged view) need nothing: runc 1.1 and crun open them
 * from the host side before they enter the user namespace.
 *
 * The two sysctls Docker sets for a container with a network of its own
 * (unprivileged ports, ping) are dropped: the holder set both for the
 * session's net namespace already, and the container's root may not write
 * that namespace's sysctls.  */
#include "runtime.h"
#include "holder.h"
#include "layerstore.h"
#include "utils.h"

#include <errno.h>
#include <string.h>

static json_t *
id_map (uint32_t uid, uint32_t count)
{
  json_t *list = json_new (JSON_ARRAY);
  json_t *m = json_new (JSON_OBJECT);

  json_set_int (m, "containerID", 0);
  json_set_int (m, "hostID", uid);
  json_set_int (m, "size", count);
  json_append (list, m);
  return list;
}

static void
set_user_namespace (json_t *config, const struct esbx_holder_info *info)
{
  json_t *linux_ = spec_object_member (config, "linux");
  json_t *ns = json_get (linux_, "namespaces");
  json_t *user = json_new (JSON_OBJECT);

  if (ns == NULL || ns->type != JSON_ARRAY)
    {
      ns = json_new (JSON_ARRAY);
      json_set (linux_, "namespaces", ns);
    }
  json_set_string (user, "type", "user");
  json_append (ns, user);
  json_set (linux_, "uidMappings", id_map (info->userns_uid, info->userns_count));
  json_set (linux_, "gidMappings", id_map (info->userns_uid, info->userns_count));
}

static void
drop_network_sysctls (json_t *config)
{
  json_t *sysctl = json_get (json_get (config, "linux"), "sysctl");

  if (sysctl == NULL || sysctl->type != JSON_OBJECT)
    return;
  json_remove (sysctl, "net.ipv4.ip_unprivileged_port_start");
  json_remove (sysctl, "net.ipv4.ping_group_range");
}

/* The mounts of TYPE become binds of SOURCE (with their options): true
   when there was one.  */
static bool
rebind (json_t *config, const char *type, const char *source)
{
  json_t *mounts = json_get (config, "mounts");
  bool found = false;
  size_t i;

  if (mounts == NULL || mounts->type != JSON_ARRAY)
    return false;
  for (i = 0; i < json_len (mounts); i++)
    {
      json_t *m = json_at (mounts, i);
      const char *t = json_get_string (m, "type");
      json_t *options;

      if (t == NULL || strcmp (t, type) != 0)
        continue;
      json_set_string (m, "type", "bind");
      json_set_string (m, "source", source);
      options = json_get (m, "options");
      if (options == NULL || options->type != JSON_ARRAY)
        {
          options = json_new (JSON_ARRAY);
          json_set (m, "options", options);
        }
      json_append (options, json_new_string ("rbind"));
      found = true;
    }
  return found;
}

static bool
has_mount_of_type (const json_t *config, const char *type)
{
  const json_t *mounts = json_get (config, "mounts");
  size_t i;

  if (mounts == NULL || mounts->type != JSON_ARRAY)
    return false;
  for (i = 0; i < json_len (mounts); i++)
    {
      const char *t = json_get_string (json_at (mounts, i), "type");
      if (t && strcmp (t, type) == 0)
        return true;
    }
  return false;
}

/* The mounts, once DIR exists.  */
static int
mount_all (json_t *config, const char *session, const char *root, const char *dir,
           const struct esbx_holder_info *info, esbx_error_t *err)
{
  _cleanup_free_ char *target = xasprintf ("%s/root", dir);
  _cleanup_free_ char *sys = xasprintf ("%s/sys", dir);
  _cleanup_free_ char *mqueue = xasprintf ("%s/mqueue", dir);
  _cleanup_free_ char *work = NULL;
  _cleanup_close_ int userns = -1;
  struct esbx_idmap map;
  int r;

  userns = esbx_userns_open (info->userns_uid, info->userns_count, err);
  if (userns < 0)
    return -1;
  map.userns_fd = userns;
  map.uid = info->userns_uid;
  r = joined_rootfs_mount (root, target, &map, &work, err);
  if (work && joined_dir_set_work (dir, work, err) < 0)
    return -1;
  if (r == -2)
    return esbx_error_wrap (err,
                            "esbx session `%s` runs in a user namespace and the container's "
                            "root filesystem cannot be seen with its ids",
                            session);
  if (r < 0)
    return esbx_error_wrap (err, "esbx session `%s`: the container's root filesystem", session);
  if (has_mount_of_type (config, "sysfs") && joined_mount_sysfs (info->pid, sys, err) < 0)
    return esbx_error_wrap (err, "esbx session `%s`", session);
  if (has_mount_of_type (config, "mqueue") && joined_mount_mqueue (info->pid, mqueue, err) < 0)
    return esbx_error_wrap (err, "esbx session `%s`", session);
  rebind (config, "sysfs", sys);
  rebind (config, "mqueue", mqueue);
  json_set_string (spec_object_member (config, "root"), "path", target);
  return 0;
}

int
spec_join_userns (struct runtime *rt, json_t *config, const char *session, const char *bundle,
                  const char *id, const struct esbx_holder_info *info, char **dir, int *lock_fd,
                  esbx_error_t *err)
{
  const char *path = json_get_string (json_get (config, "root"), "path");
  _cleanup_free_ char *root = NULL;
  _cleanup_free_ char *d = NULL;
  int lock = -1;

  *dir = NULL;
  *lock_fd = -1;
  if (info->userns_uid == 0)
    return 0;
  if (path == NULL || path[0] == '\0')
    return esbx_make_error (err, 0, "config.json has no root.path");
  root = path[0] == '/' ? xstrdup (path) : xasprintf ("%s/%s", bundle, path);
  if (joined_dir_make (rt, runtime_root (rt), id, (gid_t)info->userns_uid, &d, &lock, err) < 0)
    return esbx_error_wrap (err, "esbx session `%s`", session);
  if (mount_all (config, session, root, d, info, err) < 0)
    {
      esbx_error_t ignored = NULL;

      if (joined_dir_remove (d, &ignored) < 0)
        esbx_error_free (&ignored);
      close (lock);
      return -1;
    }
  set_user_namespace (config, info);
  drop_network_sysctls (config);
  *dir = steal_pointer (&d);
  *lock_fd = lock;
  return 0;
}
