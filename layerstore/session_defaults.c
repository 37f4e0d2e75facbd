/* The store's defaults for a session's resources: ROOT/defaults.conf,
 * `key = value` lines (common/conffile.h):
 *
 *   memory = 4G          the session cgroup's memory limit; "unlimited": none
 *   pids = 4096          its pids limit; "unlimited": none
 *   tmpfs_size = 512M    each of /tmp, /run, /home and /root: memory/8, at
 *                        most 1G
 *   shm_size = 64M       /dev/shm: memory/16, at most 64M (Docker's size)
 *   disk = 10G           a disk of its own (disk_defaults.c reads it): none
 *   userns = auto        its commands in a user namespace of their own where
 *                        the store's filesystem can idmap the layers (auto),
 *                        or as root of the host (off); see userns.c.
 *                        Without the key, $ESBX_USERNS (auto or off) if set.
 *   isolation = gvisor   its holder a gVisor sandbox (shim/lib/gvisor.c);
 *                        default namespaces
 *
 * A missing file or key takes the built-in value above.  The tmpfs
 * together (4 x tmpfs_size + shm_size) may take at most 3/4 of the memory
 * limit: a session asking for more is refused.  A session's own
 * --memory, --pids, --tmpfs-size and --shm-size win; what applies is
 * written in its record, so a later change of the file changes no session
 * that exists.  Every tmpfs of a session is written from inside the
 * session cgroup, so its pages count in the memory limit too.  */
#include "internal.h"
#include "conffile.h"
#include "text.h"
#include "utils.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

struct defaults
{
  uint64_t memory, pids, tmpfs_size, shm_size;
  const char *userns;
  const char *isolation;
};

static int
set (const char *key, const char *value, const char *where, void *data, esbx_error_t *err)
{
  struct defaults *d = data;
  bool limit = strcmp (key, "memory") == 0 || strcmp (key, "pids") == 0;
  uint64_t v;
  esbx_error_t perr = NULL;

  /* Checked here, applied with the project's default (disk_defaults.c).  */
  if (strcmp (key, "disk") == 0)
    {
      int64_t bytes;
      return esbx_disk_size_parse (value, &bytes, err) < 0 ? esbx_error_wrap (err, "%s", where) : 0;
    }
  if (strcmp (key, "isolation") == 0)
    {
      if (strcmp (value, "namespaces") != 0 && strcmp (value, "gvisor") != 0)
        return esbx_make_error (err, 0, "%s: `isolation = %s`: expected namespaces or gvisor",
                                where, value);
      d->isolation = strcmp (value, "gvisor") == 0 ? "gvisor" : "namespaces";
      return 0;
    }
  if (strcmp (key, "userns") == 0)
    {
      if (strcmp (value, "auto") != 0 && strcmp (value, "off") != 0)
        return esbx_make_error (err, 0, "%s: `userns = %s`: expected auto or off", where, value);
      d->userns = strcmp (value, "auto") == 0 ? "auto" : "off";
      return 0;
    }
  if (!limit && strcmp (key, "tmpfs_size") != 0 && strcmp (key, "shm_size") != 0)
    return esbx_make_error (
        err, 0,
        "%s: unknown key `%s` (memory, pids, tmpfs_size, shm_size, disk, userns or isolation)",
        where, key);
  if (limit && strcmp (value, "unlimited") == 0)
    v = 0;
  else if (esbx_parse_size (value, &v, &perr) < 0 || v == 0)
    {
      esbx_error_free (&perr);
      return esbx_make_error (err, 0, "%s: `%s = %s`: expected a size above 0%s", where, key, value,
                              limit ? " or unlimited" : "");
    }
  if (strcmp (key, "memory") == 0)
    d->memory = v;
  else if (strcmp (key, "pids") == 0)
    d->pids = v;
  else if (strcmp (key, "tmpfs_size") == 0)
    d->tmpfs_size = v;
  else
    d->shm_size = v;
  return 0;
}

/* "512 MiB", "64 KiB", "100 bytes": for messages.  */
static char *
size_text (uint64_t v)
{
  if (v >= (1ull << 20) && v % (1ull << 20) == 0)
    return xasprintf ("%" PRIu64 " MiB", v >> 20);
  if (v >= 1024 && v % 1024 == 0)
    return xasprintf ("%" PRIu64 " KiB", v >> 10);
  return xasprintf ("%" PRIu64 " bytes", v);
}

/* A share of MEMORY (0: unlimited) for a size nobody set: at most CAP.  */
static uint64_t
share (uint64_t memory, uint64_t divisor, uint64_t cap)
{
  uint64_t v;

  if (memory == 0)
    return cap;
  v = (memory / divisor) & ~4095ull;
  return v == 0 ? 4096 : v < cap ? v : cap;
}

int
esbx_session_defaults_apply (esbx_store_t *store, struct esbx_session_opts *o, esbx_error_t *err)
{
  const char *env = getenv ("ESBX_USERNS");
  struct defaults d = { ESBX_DEFAULT_MEMORY,
                        ESBX_DEFAULT_PIDS,
                        0,
                        0,
                        env && strcmp (env, "off") == 0 ? "off" : "auto",
                        NULL };
  _cleanup_free_ char *path = xasprintf ("%s/" ESBX_DEFAULTS_CONF, store->root);
  uint64_t tmpfs_total;

  if (esbx_conf_read (path, false, set, &d, err) < 0)
    return esbx_error_wrap (err, "session create: the store's defaults");
  if (o->memory == 0)
    o->memory = d.memory;
  if (o->pids == 0)
    o->pids = d.pids;
  if (o->userns == NULL)
    o->userns = d.userns;
  if (o->isolation == NULL)
    o->isolation = d.isolation;
  if (o->tmpfs_size == 0)
    o->tmpfs_size = d.tmpfs_size ? d.tmpfs_size : share (o->memory, 8, ESBX_DEFAULT_TMPFS_SIZE);
  if (o->shm_size == 0)
    o->shm_size = d.shm_size ? d.shm_size : share (o->memory, 16, ESBX_DEFAULT_SHM_SIZE);
  /* What a session keeps on its tmpfs is charged to its memory cgroup
     and belongs to no process: tmpfs that could fill the limit would leave
     no memory to start a command in (every one, `rm` included, would meet
     the OOM killer) until the session stops.  A quarter stays for the
     processes.  */
  tmpfs_total = 4 * o->tmpfs_size + o->shm_size;
  if (o->memory && (o->tmpfs_size > o->memory || tmpfs_total > o->memory / 4 * 3))
    {
      _cleanup_free_ char *t = size_text (o->tmpfs_size), *m = size_text (o->shm_size);
      _cleanup_free_ char *l = size_text (o->memory);

      return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                   "session create: tmpfs of 4 x %s (/tmp, /run, /home, /root) and "
                                   "%s (/dev/shm) exceed 3/4 of the memory limit %s: lower "
                                   "--tmpfs-size or --shm-size, or raise --memory",
                                   t, m, l);
    }
  return 0;
}

int
esbx_parse_tmpfs_size (const char *what, const char *s, uint64_t *out, esbx_error_t *err)
{
  if (esbx_parse_size (s, out, err) < 0)
    return esbx_error_wrap (err, "%s", what);
  if (*out == 0)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "%s `%s`: expected a size above 0", what,
                                 s);
  return 0;
}
