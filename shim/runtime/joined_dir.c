/* The host's side of a container joined to a session in a user namespace
 * (joined_userns.c): one directory per container,
 * /run/esbx/containers/KEY (KEY: the first 8 hex digits of the SHA-256 of
 * the wrapped runtime's --root, then the container id, so that two engines'
 * containers of one id never meet), holding the mount points of its root
 * (root/), of the session's sysfs (sys/) and mqueue (mqueue/), a record of
 * who it belongs to and what else was made for it (the overlay's work
 * directory beside the engine's upper), and a lock.
 *
 * `delete` removes it after runc's delete.  A container that never got its
 * delete (an engine killed, a runtime root removed) leaves it behind: every
 * create first sweeps the entries whose container the wrapped runtime no
 * longer knows (no ROOT/ID directory) and that nobody holds locked.  The
 * create holds the lock from before its first mount into runc (the fd is
 * inherited through execve), so a sweep never takes the mounts of a
 * container whose runc has not yet written its state.  */
#include "runtime.h"
#include "fs.h"
#include "hash.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#define JOINED_RUN_DIR "/run/esbx/containers"
#define JOINED_RECORD  "record.json"
#define JOINED_LOCK    "lock"

static const char *const mount_points[] = { "sys", "mqueue", "root" };

static const char *
run_dir (void)
{
  /* Tests point it elsewhere to see a sweep without touching the host's.  */
  const char *d = getenv ("ESBX_JOINED_RUN_DIR");
  return d && d[0] ? d : JOINED_RUN_DIR;
}

static bool
id_valid (const char *id)
{
  return id && id[0] && id[0] != '.' && strchr (id, '/') == NULL && strlen (id) < 200;
}

char *
joined_dir_path (const char *runc_root, const char *id)
{
  char hex[ESBX_SHA256_HEX_LEN + 1];

  if (!id_valid (id))
    return NULL;
  esbx_sha256_buf (runc_root, strlen (runc_root), hex);
  return xasprintf ("%s/%.8s-%s", run_dir (), hex, id);
}

/* Unmount what the entry's mount points hold, remove the work directory
   its record names, then the entry.  A mount point that stays mounted
   keeps the entry (rmdir fails on it): nothing below a mount is ever
   removed.  */
static int
clean_entry (int parent, const char *name, esbx_error_t *err)
{
  _cleanup_close_ int dfd
      = TEMP_FAILURE_RETRY (openat (parent, name, O_DIRECTORY | O_NOFOLLOW | O_RDONLY | O_CLOEXEC));
  _cleanup_json_ json_t *rec = NULL;
  esbx_error_t ignored = NULL;
  const char *work;
  size_t i;

  if (dfd < 0)
    return errno == ENOENT ? 0 : esbx_make_error (err, errno, "open `%s/%s`", run_dir (), name);
  for (i = 0; i < ARRAY_SIZE (mount_points); i++)
    {
      _cleanup_free_ char *p = xasprintf ("%s/%s/%s", run_dir (), name, mount_points[i]);

      while (umount2 (p, MNT_DETACH | UMOUNT_NOFOLLOW) == 0)
        ;
      if (unlinkat (dfd, mount_points[i], AT_REMOVEDIR) < 0 && errno != ENOENT)
        return esbx_make_error (err, errno, "remove `%s`", p);
    }
  rec = json_parse_file_at (dfd, JOINED_RECORD, &ignored);
  esbx_error_free (&ignored);
  work = rec ? json_get_string (rec, "work") : NULL;
  if (work && work[0] == '/' && esbx_rm_rf_at (AT_FDCWD, work, err) < 0)
    return -1;
  unlinkat (dfd, JOINED_RECORD, 0);
  unlinkat (dfd, JOINED_LOCK, 0);
  if (unlinkat (parent, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
    return esbx_make_error (err, errno, "remove `%s/%s`", run_dir (), name);
  return 0;
}

/* Whether entry NAME is stale: not locked, and its container unknown to
   the runtime root its record names.  */
static bool
stale (int parent, const char *name)
{
  _cleanup_close_ int dfd
      = TEMP_FAILURE_RETRY (openat (parent, name, O_DIRECTORY | O_NOFOLLOW | O_RDONLY | O_CLOEXEC));
  _cleanup_close_ int lock = -1;
  _cleanup_json_ json_t *rec = NULL;
  _cleanup_free_ char *state = NULL;
  esbx_error_t ignored = NULL;
  const char *root, *id;

  if (dfd < 0)
    return false;
  lock = TEMP_FAILURE_RETRY (openat (dfd, JOINED_LOCK, O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (lock >= 0 && flock (lock, LOCK_EX | LOCK_NB) < 0)
    return false;
  rec = json_parse_file_at (dfd, JOINED_RECORD, &ignored);
  esbx_error_free (&ignored);
  root = rec ? json_get_string (rec, "runtime_root") : NULL;
  id = rec ? json_get_string (rec, "id") : NULL;
  if (root == NULL || !id_valid (id))
    return true; /* a create that died before its record */
  state = xasprintf ("%s/%s", root, id);
  return access (state, F_OK) < 0 && errno == ENOENT;
}

static void
sweep (struct runtime *rt)
{
  _cleanup_close_ int dfd = TEMP_FAILURE_RETRY (open (run_dir (), O_DIRECTORY | O_CLOEXEC));
  _cleanup_strv_ char **names = NULL;
  esbx_error_t e = NULL;
  char **p;

  if (dfd < 0)
    return;
  names = esbx_list_dir_fd (dfd, run_dir (), &e);
  for (p = names; p && *p; p++)
    if (stale (dfd, *p) && clean_entry (dfd, *p, &e) < 0)
      {
        runtime_log (rt, "warning", e->msg);
        esbx_error_free (&e);
      }
  esbx_error_free (&e);
}

int
joined_dir_make (struct runtime *rt, const char *runc_root, const char *id, gid_t group,
                 char **path, int *lock_fd, esbx_error_t *err)
{
  _cleanup_free_ char *dir = joined_dir_path (runc_root, id);
  _cleanup_close_ int parent = -1, dfd = -1, lock = -1;
  _cleanup_json_ json_t *rec = json_new (JSON_OBJECT);
  _cleanup_free_ char *data = NULL;
  const char *name;
  size_t i, len;

  if (dir == NULL)
    return esbx_make_error (err, EINVAL, "container id `%s`: not a name", id ? id : "");
  if (esbx_mkdir_p (run_dir (), 0711, err) < 0)
    return -1;
  sweep (rt);
  parent = esbx_open_dir_at (AT_FDCWD, run_dir (), err);
  if (parent < 0)
    return -1;
  name = strrchr (dir, '/') + 1;
  /* The same container created again after a crash: what it left goes;
     a container the runtime still knows keeps its own.  */
  if (esbx_exists_at (parent, name) && !stale (parent, name))
    return esbx_make_error (err, EEXIST, "container `%s` exists", id);
  if (clean_entry (parent, name, err) < 0)
    return -1;
  if (mkdirat (parent, name, 0700) < 0)
    return esbx_make_error (err, errno, "mkdir `%s`", dir);
  dfd = esbx_open_dir_at (parent, name, err);
  if (dfd < 0)
    return -1;
  /* Passed by the session's root group (the container's root, whose
     runtime mounts from inside its user namespace) and host root only:
     another host user must not reach the container's root filesystem,
     which Docker keeps under a directory of mode 0710 too.  */
  if (fchown (dfd, 0, group) < 0 || fchmod (dfd, 0710) < 0)
    return esbx_make_error (err, errno, "set the owner of `%s`", dir);
  /* Not O_CLOEXEC: runc inherits it, see above.  */
  lock = TEMP_FAILURE_RETRY (openat (dfd, JOINED_LOCK, O_RDWR | O_CREAT | O_NOFOLLOW, 0600));
  if (lock < 0 || flock (lock, LOCK_EX) < 0)
    return esbx_make_error (err, errno, "lock `%s/%s`", dir, JOINED_LOCK);
  json_set_string (rec, "runtime_root", runc_root);
  json_set_string (rec, "id", id);
  data = json_serialize (rec, false, &len);
  if (esbx_replace_file_at (dfd, JOINED_RECORD, data, len, 0600, err) < 0)
    return -1;
  for (i = 0; i < ARRAY_SIZE (mount_points); i++)
    if (mkdirat (dfd, mount_points[i], 0755) < 0)
      return esbx_make_error (err, errno, "mkdir `%s/%s`", dir, mount_points[i]);
  *path = steal_pointer (&dir);
  *lock_fd = take_fd (&lock);
  return 0;
}

int
joined_dir_set_work (const char *path, const char *work, esbx_error_t *err)
{
  _cleanup_close_ int dfd = esbx_open_dir_at (AT_FDCWD, path, err);
  _cleanup_json_ json_t *rec = NULL;
  _cleanup_free_ char *data = NULL;
  size_t len;

  if (dfd < 0)
    return -1;
  rec = json_parse_file_at (dfd, JOINED_RECORD, err);
  if (rec == NULL)
    return -1;
  json_set_string (rec, "work", work);
  data = json_serialize (rec, false, &len);
  return esbx_replace_file_at (dfd, JOINED_RECORD, data, len, 0600, err);
}

int
joined_dir_remove (const char *path, esbx_error_t *err)
{
  _cleanup_free_ char *dir = xstrdup (path);
  _cleanup_close_ int parent = -1;
  char *slash = strrchr (dir, '/');

  *slash = '\0';
  parent = TEMP_FAILURE_RETRY (open (dir, O_DIRECTORY | O_CLOEXEC));
  if (parent < 0)
    return errno == ENOENT ? 0 : esbx_make_error (err, errno, "open `%s`", dir);
  return clean_entry (parent, slash + 1, err);
}
