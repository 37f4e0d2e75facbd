/* The OCI config of a gVisor session's sandbox: what esbx-holder builds
 * for the namespaces tier (shim/holder/rootfs.c), said as mounts that
 * runsc's gofer serves:
 *
 *   /                       an empty directory of mount points, read-only
 *   /usr /lib* ... /etc     read-only, nosuid, nodev binds of the host's
 *                           (symlinks such as /bin -> usr/bin copied)
 *   /etc secrets            every file that is not world-readable bound
 *                           over by an empty file, every directory that
 *                           is not world-searchable by an empty tmpfs,
 *                           machine-id, docker, containerd, esbx too (the
 *                           rules of etc_mask.c, which the holder follows)
 *   /tmp /run /home /root   gVisor's own tmpfs, in the sandbox's memory
 *   /run/secrets/F          the session's secret files, read-only; a
 *                           placeholder for those the egress proxy puts
 *                           in (ROOT.placeholder.NAME)
 *   /etc/resolv.conf        an egress session's resolver and the proxy's
 *   /etc/ssl/certs/ca-...   CA with the host's, as the holder binds them
 *   /proc /sys /dev         gVisor's own
 *   WORKSPACE               the session's merged view, read-write
 *
 * Docker's capability set, no_new_privs, and a pid, mount, ipc, uts and
 * net namespace of its own: empty (loopback only), the one made for an
 * egress session, or none with --network host (the host's).  */
#include "gvisor.h"
#include "confine.h"
#include "etc_mask.h"
#include "fs.h"
#include "text.h"
#include "layerstore.h"
#include "utils.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/capability.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const host_allowed[] = {
  "usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc",
};
static const char *const private_dirs[] = { "tmp", "run", "home", "root" };

static const char *const cap_names[] = {
  [CAP_CHOWN] = "CAP_CHOWN",
  [CAP_DAC_OVERRIDE] = "CAP_DAC_OVERRIDE",
  [CAP_FOWNER] = "CAP_FOWNER",
  [CAP_FSETID] = "CAP_FSETID",
  [CAP_KILL] = "CAP_KILL",
  [CAP_SETGID] = "CAP_SETGID",
  [CAP_SETUID] = "CAP_SETUID",
  [CAP_SETPCAP] = "CAP_SETPCAP",
  [CAP_NET_BIND_SERVICE] = "CAP_NET_BIND_SERVICE",
  [CAP_NET_RAW] = "CAP_NET_RAW",
  [CAP_SYS_CHROOT] = "CAP_SYS_CHROOT",
  [CAP_MKNOD] = "CAP_MKNOD",
  [CAP_AUDIT_WRITE] = "CAP_AUDIT_WRITE",
  [CAP_SETFCAP] = "CAP_SETFCAP",
};

static json_t *
strings (const char *const *v, size_t n)
{
  json_t *a = json_new (JSON_ARRAY);
  size_t i;

  for (i = 0; i < n; i++)
    if (v[i])
      json_append (a, json_new_string (v[i]));
  return a;
}

json_t *
esbx_gvisor_caps (bool any)
{
  json_t *a = json_new (JSON_ARRAY);
  size_t i;

  for (i = 0; any && i < ARRAY_SIZE (cap_names); i++)
    if (cap_names[i] && esbx_confine_keeps ((int)i))
      json_append (a, json_new_string (cap_names[i]));
  return a;
}

static void
add_mount (json_t *mounts, const char *dest, const char *type, const char *source,
           const char *const *options, size_t n)
{
  json_t *m = json_new (JSON_OBJECT);

  json_set_string (m, "destination", dest);
  json_set_string (m, "type", type);
  json_set_string (m, "source", source);
  json_set (m, "options", strings (options, n));
  json_append (mounts, m);
}

static void
ro_bind (json_t *mounts, const char *dest, const char *source)
{
  static const char *const o[] = { "rbind", "ro", "nosuid", "nodev" };
  add_mount (mounts, dest, "bind", source, o, ARRAY_SIZE (o));
}

static void
tmpfs (json_t *mounts, const char *dest, const char *mode, uint64_t size, bool ro)
{
  _cleanup_free_ char *m = xasprintf ("mode=%s", mode);
  _cleanup_free_ char *sz = xasprintf ("size=%" PRIu64, size);
  const char *o[] = { "nosuid", "nodev", m, sz, ro ? "ro" : NULL };

  add_mount (mounts, dest, "tmpfs", "tmpfs", o, ro ? 5 : 4);
}

/* Mask PATH (host path DFD/NAME, seen at PATH in the sandbox): an empty
   file over a file, an empty read-only tmpfs over a directory.  */
static void
mask (json_t *mounts, const char *path, const struct stat *st, const char *empty)
{
  if (S_ISDIR (st->st_mode))
    tmpfs (mounts, path, "0755", 4096, true);
  else if (S_ISREG (st->st_mode))
    ro_bind (mounts, path, empty);
}

struct etc_mask
{
  json_t *mounts;
  const char *empty;
};

static int
mask_one (void *data, const char *path, const struct stat *st, esbx_error_t *err)
{
  const struct etc_mask *m = data;

  (void)err;
  mask (m->mounts, path, st, m->empty);
  return 0;
}

/* The placeholder of a secret the proxy puts in (SECRET, of the session's
   record) is in a file beside the sandbox's root DIR/BASE:
   DIR/BASE.placeholder.NAME; NULL when SECRET is no such secret.  */
static char *
placeholder_file (const char *base, const json_t *secret)
{
  const char *name = json_get_string (secret, "name");

  if (name == NULL || !esbx_name_valid (name) || !json_get_bool (secret, "inject", false)
      || json_get_string (secret, "placeholder") == NULL)
    return NULL;
  return xasprintf ("%s.placeholder.%s", base, name);
}

/* The files of the placeholders, 0400, what the holder writes in its
   /run/secrets for them (shim/holder/secrets.c), beside ROOT.  */
static int
write_placeholders (const struct esbx_sandbox_session *ss, const char *root, esbx_error_t *err)
{
  const json_t *secrets = json_get (ss->rec->record, "secrets"), *a;
  _cleanup_free_ char *dir = xstrdup (root);
  _cleanup_close_ int dfd = -1;
  char *slash = strrchr (dir, '/');
  size_t i;

  if (slash == NULL)
    return esbx_make_error (err, EINVAL, "sandbox root `%s`: not a path", root);
  *slash = '\0';
  json_array_foreach (secrets, i, a)
    {
      _cleanup_free_ char *name = NULL;
      const char *text = json_get_string (a, "placeholder");

      if (json_get_string (a, "file") == NULL || (name = placeholder_file (slash + 1, a)) == NULL)
        continue;
      if (dfd < 0 && (dfd = esbx_open_dir_at (AT_FDCWD, dir, err)) < 0)
        return -1;
      if (esbx_replace_file_at (dfd, name, text, strlen (text), 0400, err) < 0)
        return -1;
    }
  return 0;
}

int
esbx_gvisor_root_prepare (const struct esbx_sandbox_session *ss, const char *root,
                          esbx_error_t *err)
{
  _cleanup_close_ int rfd = -1;
  _cleanup_free_ char *empty = xasprintf ("%s.empty", root);
  const char *ws = ss->rec->workspace ? ss->rec->workspace : "/workspace";
  _cleanup_free_ char *rel = NULL;
  char *p, *slash;
  size_t i;
  int fd;

  if (mkdir (root, 0755) < 0 && errno != EEXIST)
    return esbx_make_error (err, errno, "mkdir `%s`", root);
  rfd = esbx_open_dir_at (AT_FDCWD, root, err);
  if (rfd < 0)
    return -1;
  fd = TEMP_FAILURE_RETRY (open (empty, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0444));
  if (fd < 0)
    return esbx_make_error (err, errno, "create `%s`", empty);
  close (fd);
  if (write_placeholders (ss, root, err) < 0)
    return -1;
  for (i = 0; i < ARRAY_SIZE (host_allowed); i++)
    {
      struct stat st;
      char target[4096];
      ssize_t n;
      _cleanup_free_ char *host = xasprintf ("/%s", host_allowed[i]);

      if (lstat (host, &st) < 0)
        continue;
      if (S_ISLNK (st.st_mode))
        {
          n = readlink (host, target, sizeof target - 1);
          if (n < 0)
            continue;
          target[n] = '\0';
          if (symlinkat (target, rfd, host_allowed[i]) < 0 && errno != EEXIST)
            return esbx_make_error (err, errno, "symlink `%s/%s`", root, host_allowed[i]);
        }
      else if (S_ISDIR (st.st_mode) && mkdirat (rfd, host_allowed[i], 0755) < 0 && errno != EEXIST)
        return esbx_make_error (err, errno, "mkdir `%s/%s`", root, host_allowed[i]);
    }
  for (i = 0; i < ARRAY_SIZE (private_dirs); i++)
    if (mkdirat (rfd, private_dirs[i], 0755) < 0 && errno != EEXIST)
      return esbx_make_error (err, errno, "mkdir `%s/%s`", root, private_dirs[i]);
  /* The workspace: its mount point, one component at a time, never
     through a symlink (the root holds only what was made above).  */
  rel = xstrdup (ws + 1);
  for (p = rel; p && *p; p = slash ? slash + 1 : NULL)
    {
      struct stat st;

      slash = strchr (p, '/');
      if (slash)
        *slash = '\0';
      if (fstatat (rfd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR (st.st_mode))
        return esbx_make_error (err, ENOTDIR, "workspace `%s`: `%s` is not a directory", ws, rel);
      if (mkdirat (rfd, rel, 0755) < 0 && errno != EEXIST)
        return esbx_make_error (err, errno, "workspace `%s`: mkdir `%s`", ws, rel);
      if (slash)
        *slash = '/';
    }
  return 0;
}

/* FILE of the host's /etc, when it is a regular file, replaced by SOURCE.  */
static void
etc_file (json_t *mounts, const char *file, const char *source)
{
  struct stat st;

  if (source && lstat (file, &st) == 0 && S_ISREG (st.st_mode))
    ro_bind (mounts, file, source);
}

json_t *
esbx_gvisor_spec (const struct esbx_sandbox_session *ss, const char *root,
                  const struct esbx_gvisor_net *net, esbx_error_t *err)
{
  static const char *const ns_types[] = { "pid", "network", "ipc", "uts", "mount" };
  const struct esbx_session *s = ss->rec;
  uint64_t tmpfs_size = s->tmpfs_size ? s->tmpfs_size : ESBX_DEFAULT_TMPFS_SIZE;
  uint64_t shm_size = s->shm_size ? s->shm_size : ESBX_DEFAULT_SHM_SIZE;
  _cleanup_free_ char *merged = esbx_session_merged (ss->store, ss->name);
  _cleanup_free_ char *empty = xasprintf ("%s.empty", root);
  json_t *spec = json_new (JSON_OBJECT), *process = json_new (JSON_OBJECT);
  json_t *caps = json_new (JSON_OBJECT), *user = json_new (JSON_OBJECT);
  json_t *rootj = json_new (JSON_OBJECT), *linux_ = json_new (JSON_OBJECT);
  json_t *mounts = json_new (JSON_ARRAY), *ns = json_new (JSON_ARRAY);
  const json_t *secrets = json_get (s->record, "secrets"), *a;
  static const char *const init[] = { "/usr/bin/sleep", "infinity" };
  static const char *const path_env[]
      = { "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" };
  static const char *const devpts_o[]
      = { "nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5" };
  static const char *const sys_o[] = { "nosuid", "noexec", "nodev", "ro" };
  static const char *const ws_o[] = { "rbind", "rw", "nosuid", "nodev" };
  static const char *const dev_o[] = { "nosuid", "strictatime", "mode=755", "size=65536k" };
  size_t i;

  json_set_string (spec, "ociVersion", "1.0.2");
  json_set (process, "terminal", json_new_bool (false));
  json_set_int (user, "uid", 0);
  json_set_int (user, "gid", 0);
  json_set (process, "user", user);
  json_set (process, "args", strings (init, ARRAY_SIZE (init)));
  json_set (process, "env", strings (path_env, ARRAY_SIZE (path_env)));
  json_set_string (process, "cwd", "/");
  json_set (caps, "bounding", esbx_gvisor_caps (true));
  json_set (caps, "effective", esbx_gvisor_caps (true));
  json_set (caps, "permitted", esbx_gvisor_caps (true));
  json_set (process, "capabilities", caps);
  json_set (process, "noNewPrivileges", json_new_bool (true));
  json_set (spec, "process", process);
  json_set_string (rootj, "path", root);
  json_set (rootj, "readonly", json_new_bool (true));
  json_set (spec, "root", rootj);
  json_set_string (spec, "hostname", ss->name);

  add_mount (mounts, "/proc", "proc", "proc", NULL, 0);
  add_mount (mounts, "/dev", "tmpfs", "tmpfs", dev_o, ARRAY_SIZE (dev_o));
  add_mount (mounts, "/dev/pts", "devpts", "devpts", devpts_o, ARRAY_SIZE (devpts_o));
  tmpfs (mounts, "/dev/shm", "1777", shm_size, false);
  add_mount (mounts, "/sys", "sysfs", "sysfs", sys_o, ARRAY_SIZE (sys_o));
  for (i = 0; i < ARRAY_SIZE (host_allowed); i++)
    {
      _cleanup_free_ char *host = xasprintf ("/%s", host_allowed[i]);
      struct stat st;

      if (lstat (host, &st) == 0 && S_ISDIR (st.st_mode))
        ro_bind (mounts, host, host);
    }
  /* The host's /etc unmasked is no sandbox: a walk that fails fails it.  */
  if (esbx_etc_mask_walk ("/etc", mask_one, &(struct etc_mask){ mounts, empty }, err) < 0)
    {
      json_free (mounts);
      json_free (ns);
      json_free (linux_);
      json_free (spec);
      return NULL;
    }
  tmpfs (mounts, "/tmp", "1777", tmpfs_size, false);
  tmpfs (mounts, "/run", "0755", tmpfs_size, false);
  tmpfs (mounts, "/home", "0755", tmpfs_size, false);
  tmpfs (mounts, "/root", "0700", tmpfs_size, false);
  json_array_foreach (secrets, i, a)
    {
      const char *name = json_get_string (a, "name"), *file = json_get_string (a, "file");
      _cleanup_free_ char *src = NULL;
      static const char *const o[] = { "bind", "ro", "nosuid", "nodev", "noexec" };

      if (name == NULL || file == NULL || !esbx_name_valid (name))
        continue;
      src = placeholder_file (root, a);
      if (src == NULL)
        src = esbx_secret_path (ss->store, name);
      add_mount (mounts, file, "bind", src, o, ARRAY_SIZE (o));
    }
  etc_file (mounts, "/etc/resolv.conf", net->resolv_conf);
  etc_file (mounts, "/etc/ssl/certs/ca-certificates.crt", net->ca_bundle);
  add_mount (mounts, s->workspace ? s->workspace : "/workspace", "bind", merged, ws_o,
             ARRAY_SIZE (ws_o));
  json_set (spec, "mounts", mounts);
  for (i = 0; i < ARRAY_SIZE (ns_types); i++)
    {
      bool netns = strcmp (ns_types[i], "network") == 0;
      json_t *e;

      if (netns && net->host)
        continue;
      e = json_new (JSON_OBJECT);
      json_set_string (e, "type", ns_types[i]);
      if (netns && net->netns)
        json_set_string (e, "path", net->netns);
      json_append (ns, e);
    }
  json_set (linux_, "namespaces", ns);
  json_set (spec, "linux", linux_);
  return spec;
}
