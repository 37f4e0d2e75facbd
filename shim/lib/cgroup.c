#include "cgroup.h"
#include "devices.h"
#include "fs.h"
#include "hash.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

#define CGROUP_FS  "/sys/fs/cgroup"
#define CPU_PERIOD 100000
#define KILL_TRIES 200 /* of 25 ms: five seconds */
#define NO_VALUE   UINT64_MAX

/* The v1 controllers a session uses, in the order membership is written.
   The first one mounted is where the process list is read.  */
static const char *const v1_controllers[]
    = { "pids", "memory", "freezer", "cpu", "cpuacct", "devices" };

static bool
is_cgroup2 (const char *path)
{
  struct statfs sfs;

  return statfs (path, &sfs) == 0 && sfs.f_type == (typeof (sfs.f_type))CGROUP2_SUPER_MAGIC;
}

static bool
v1_mounted (const char *controller)
{
  _cleanup_free_ char *p = xasprintf (CGROUP_FS "/%s/cgroup.procs", controller);
  return access (p, F_OK) == 0;
}

static int
read_small (const char *path, char *buf, size_t size)
{
  _cleanup_close_ int fd = -1;
  ssize_t r;

  fd = TEMP_FAILURE_RETRY (open (path, O_RDONLY | O_CLOEXEC));
  if (fd < 0)
    return -1;
  r = TEMP_FAILURE_RETRY (read (fd, buf, size - 1));
  if (r < 0)
    return -1;
  buf[r] = '\0';
  return 0;
}

static int
write_str (const char *path, const char *value)
{
  _cleanup_close_ int fd = -1;

  fd = TEMP_FAILURE_RETRY (open (path, O_WRONLY | O_CLOEXEC));
  if (fd < 0)
    return -1;
  return esbx_write_all (fd, value, strlen (value));
}

/* The v2 root: /sys/fs/cgroup or /sys/fs/cgroup/unified; NULL on v1.  */
static const char *
v2_root (void)
{
  static const char *root;
  static bool done;
  char buf[256];

  if (done)
    return root;
  done = true;
  if (is_cgroup2 (CGROUP_FS))
    root = CGROUP_FS;
  else if (is_cgroup2 (CGROUP_FS "/unified")
           && read_small (CGROUP_FS "/unified/cgroup.controllers", buf, sizeof buf) == 0
           && strstr (buf, "memory") != NULL && strstr (buf, "pids") != NULL)
    root = CGROUP_FS "/unified";
  return root;
}

enum esbx_cgroup_version
esbx_cgroup_version (void)
{
  return v2_root () ? ESBX_CGROUP_V2 : ESBX_CGROUP_V1;
}

char *
esbx_cgroup_store_prefix (esbx_store_t *store)
{
  char hex[ESBX_SHA256_HEX_LEN + 1];

  if (strcmp (store->root, ESBX_DEFAULT_ROOT) == 0)
    return xstrdup ("");
  esbx_sha256_buf (store->root, strlen (store->root), hex);
  return xasprintf ("%.8s.", hex);
}

char *
esbx_cgroup_session_path (esbx_store_t *store, const char *session)
{
  _cleanup_free_ char *prefix = esbx_cgroup_store_prefix (store);
  return xasprintf ("esbx/%s%s", prefix, session);
}

/* Absolute directory of REL in one hierarchy (CONTROLLER NULL on v2).  */
static char *
dir_of (const char *controller, const char *rel)
{
  if (controller == NULL)
    return xasprintf ("%s/%s", v2_root (), rel);
  return xasprintf (CGROUP_FS "/%s/%s", controller, rel);
}

static int
set_value (const char *dir, const char *file, const char *value, esbx_error_t *err)
{
  _cleanup_free_ char *p = xasprintf ("%s/%s", dir, file);

  if (write_str (p, value) < 0)
    return esbx_make_error (err, errno, "cgroup: write `%s` to `%s`", value, p);
  return 0;
}

static int
cpu_quota (const char *cpus, long long *quota, esbx_error_t *err)
{
  char *end = NULL;
  double v;

  errno = 0;
  v = strtod (cpus, &end);
  if (errno != 0 || end == cpus || *end != '\0' || !(v > 0) || v > 4096)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "invalid cpus `%s`: expected a positive number such as 1.5", cpus);
  *quota = (long long)(v * CPU_PERIOD + 0.5);
  if (*quota < 1000)
    *quota = 1000;
  return 0;
}

static void
enable_v2_controllers (const char *dir)
{
  static const char *const ctl[] = { "+memory", "+pids", "+cpu" };
  _cleanup_free_ char *p = xasprintf ("%s/cgroup.subtree_control", dir);
  size_t i;

  /* One at a time: a controller the kernel lacks must not stop the others.  */
  for (i = 0; i < ARRAY_SIZE (ctl); i++)
    write_str (p, ctl[i]);
}

static int
create_v2 (const char *rel, const struct esbx_cgroup_limits *l, esbx_error_t *err)
{
  _cleanup_free_ char *dir = dir_of (NULL, rel);
  _cleanup_free_ char *parent = xstrdup (dir);
  char buf[64];
  long long quota = 0;

  *strrchr (parent, '/') = '\0';
  if (esbx_mkdir_p (parent, 0755, err) < 0)
    return -1;
  enable_v2_controllers (v2_root ());
  enable_v2_controllers (parent);
  if (esbx_mkdir_p (dir, 0755, err) < 0)
    return -1;
  if (esbx_devices_apply_v2 (dir, err) < 0)
    return -1;
  if (l->memory)
    {
      snprintf (buf, sizeof buf, "%" PRIu64, l->memory);
      if (set_value (dir, "memory.max", buf, err) < 0)
        return -1;
      /* Over the limit means OOM, not a slow crawl through swap.  */
      set_value (dir, "memory.swap.max", "0", NULL);
    }
  if (l->pids)
    {
      snprintf (buf, sizeof buf, "%" PRIu64, l->pids);
      if (set_value (dir, "pids.max", buf, err) < 0)
        return -1;
    }
  if (l->cpus)
    {
      if (cpu_quota (l->cpus, &quota, err) < 0)
        return -1;
      snprintf (buf, sizeof buf, "%lld %d", quota, CPU_PERIOD);
      if (set_value (dir, "cpu.max", buf, err) < 0)
        return -1;
    }
  return 0;
}

static int
create_v1 (const char *rel, const struct esbx_cgroup_limits *l, esbx_error_t *err)
{
  char buf[64];
  long long quota = 0;
  size_t i;

  for (i = 0; i < ARRAY_SIZE (v1_controllers); i++)
    {
      _cleanup_free_ char *dir = NULL;

      if (!v1_mounted (v1_controllers[i]))
        continue;
      dir = dir_of (v1_controllers[i], rel);
      if (esbx_mkdir_p (dir, 0755, err) < 0)
        return -1;
      if (strcmp (v1_controllers[i], "memory") == 0 && l->memory)
        {
          snprintf (buf, sizeof buf, "%" PRIu64, l->memory);
          if (set_value (dir, "memory.limit_in_bytes", buf, err) < 0)
            return -1;
          /* Absent without swap accounting; where present, the same cap keeps
             an over-limit command from swapping instead of being killed.  */
          set_value (dir, "memory.memsw.limit_in_bytes", buf, NULL);
        }
      else if (strcmp (v1_controllers[i], "pids") == 0 && l->pids)
        {
          snprintf (buf, sizeof buf, "%" PRIu64, l->pids);
          if (set_value (dir, "pids.max", buf, err) < 0)
            return -1;
        }
      else if (strcmp (v1_controllers[i], "devices") == 0)
        {
          if (esbx_devices_apply_v1 (dir, err) < 0)
            return -1;
        }
      else if (strcmp (v1_controllers[i], "cpu") == 0 && l->cpus)
        {
          if (cpu_quota (l->cpus, &quota, err) < 0)
            return -1;
          snprintf (buf, sizeof buf, "%d", CPU_PERIOD);
          if (set_value (dir, "cpu.cfs_period_us", buf, err) < 0)
            return -1;
          snprintf (buf, sizeof buf, "%lld", quota);
          if (set_value (dir, "cpu.cfs_quota_us", buf, err) < 0)
            return -1;
        }
    }
  return 0;
}

int
esbx_cgroup_create (const char *rel, const struct esbx_cgroup_limits *limits, esbx_error_t *err)
{
  int ret;

  if (v2_root ())
    ret = create_v2 (rel, limits, err);
  else
    ret = create_v1 (rel, limits, err);
  if (ret < 0)
    return esbx_error_wrap (err, "create cgroup `%s`", rel);
  return 0;
}

/* The hierarchy whose cgroup.procs lists the session's processes.  */
static const char *
v1_primary (void)
{
  size_t i;

  for (i = 0; i < ARRAY_SIZE (v1_controllers); i++)
    if (v1_mounted (v1_controllers[i]))
      return v1_controllers[i];
  return NULL;
}

bool
esbx_cgroup_exists (const char *rel)
{
  size_t i;

  if (v2_root ())
    {
      _cleanup_free_ char *dir = dir_of (NULL, rel);
      return access (dir, F_OK) == 0;
    }
  for (i = 0; i < ARRAY_SIZE (v1_controllers); i++)
    {
      _cleanup_free_ char *dir = dir_of (v1_controllers[i], rel);
      if (access (dir, F_OK) == 0)
        return true;
    }
  return false;
}

int
esbx_cgroup_enter (const char *rel, pid_t pid, esbx_error_t *err)
{
  const char *file = pid ? "cgroup.procs" : "tasks";
  char buf[32];
  size_t i;

  snprintf (buf, sizeof buf, "%d", pid ? (int)pid : (int)getpid ());
  if (v2_root ())
    {
      _cleanup_free_ char *dir = dir_of (NULL, rel);
      return set_value (dir, "cgroup.procs", buf, err);
    }
  if (pid == 0)
    strcpy (buf, "0");
  for (i = 0; i < ARRAY_SIZE (v1_controllers); i++)
    {
      _cleanup_free_ char *dir = NULL;

      if (!v1_mounted (v1_controllers[i]))
        continue;
      dir = dir_of (v1_controllers[i], rel);
      if (set_value (dir, file, buf, err) < 0)
        return -1;
    }
  return 0;
}

static void
collect_pids (const char *dir, pid_t **pids, size_t *n, size_t *cap)
{
  _cleanup_free_ char *procs = xasprintf ("%s/cgroup.procs", dir);
  _cleanup_file_ FILE *f = NULL;
  _cleanup_dir_ DIR *d = NULL;
  struct dirent *de;
  int pid;

  f = fopen (procs, "re");
  if (f != NULL)
    while (fscanf (f, "%d", &pid) == 1)
      {
        if (*n == *cap)
          {
            *cap = *cap ? *cap * 2 : 16;
            *pids = xrealloc (*pids, *cap * sizeof (pid_t));
          }
        (*pids)[(*n)++] = pid;
      }
  d = opendir (dir);
  if (d == NULL)
    return;
  while ((de = readdir (d)) != NULL)
    {
      _cleanup_free_ char *sub = NULL;

      if (de->d_type != DT_DIR || de->d_name[0] == '.')
        continue;
      sub = xasprintf ("%s/%s", dir, de->d_name);
      collect_pids (sub, pids, n, cap);
    }
}

int
esbx_cgroup_pids (const char *rel, pid_t **pids, size_t *n, esbx_error_t *err)
{
  _cleanup_free_ char *dir = NULL;
  size_t cap = 0;
  const char *primary = NULL;

  *pids = NULL;
  *n = 0;
  if (!v2_root ())
    {
      primary = v1_primary ();
      if (primary == NULL)
        return esbx_make_error (err, ENOENT, "no cgroup hierarchy mounted under " CGROUP_FS);
    }
  dir = dir_of (primary, rel);
  if (access (dir, F_OK) < 0)
    return esbx_make_error (err, errno, "cgroup `%s`", rel);
  collect_pids (dir, pids, n, &cap);
  return 0;
}

static uint64_t
read_u64 (const char *dir, const char *file)
{
  _cleanup_free_ char *p = xasprintf ("%s/%s", dir, file);
  char buf[64];
  char *end;
  uint64_t v;

  if (read_small (p, buf, sizeof buf) < 0)
    return NO_VALUE;
  if (strncmp (buf, "max", 3) == 0)
    return NO_VALUE;
  errno = 0;
  v = strtoull (buf, &end, 10);
  if (errno != 0 || end == buf)
    return NO_VALUE;
  return v;
}

/* The value of "KEY N" in a flat-keyed file such as memory.events.  */
static uint64_t
read_key (const char *dir, const char *file, const char *key)
{
  _cleanup_free_ char *p = xasprintf ("%s/%s", dir, file);
  _cleanup_file_ FILE *f = NULL;
  char name[64];
  unsigned long long v;

  f = fopen (p, "re");
  if (f == NULL)
    return NO_VALUE;
  while (fscanf (f, "%63s %llu", name, &v) == 2)
    if (strcmp (name, key) == 0)
      return v;
  return NO_VALUE;
}

int
esbx_cgroup_usage (const char *rel, struct esbx_cgroup_usage *u, esbx_error_t *err)
{
  memset (u, 0xff, sizeof *u);
  if (!esbx_cgroup_exists (rel))
    return esbx_make_error (err, ENOENT, "cgroup `%s`", rel);
  if (v2_root ())
    {
      _cleanup_free_ char *dir = dir_of (NULL, rel);
      uint64_t usec = read_key (dir, "cpu.stat", "usage_usec");

      u->memory = read_u64 (dir, "memory.current");
      u->memory_peak = read_u64 (dir, "memory.peak");
      u->memory_limit = read_u64 (dir, "memory.max");
      u->cpu_usec = usec;
      u->pids = read_u64 (dir, "pids.current");
      u->pids_limit = read_u64 (dir, "pids.max");
      u->oom_kills = read_key (dir, "memory.events", "oom_kill");
      u->pids_denied = read_key (dir, "pids.events", "max");
      return 0;
    }
  {
    _cleanup_free_ char *mem = dir_of ("memory", rel);
    _cleanup_free_ char *pids = dir_of ("pids", rel);
    _cleanup_free_ char *acct = dir_of ("cpuacct", rel);
    uint64_t ns = read_u64 (acct, "cpuacct.usage");

    u->memory = read_u64 (mem, "memory.usage_in_bytes");
    u->memory_peak = read_u64 (mem, "memory.max_usage_in_bytes");
    u->memory_limit = read_u64 (mem, "memory.limit_in_bytes");
    /* v1 reports "unlimited" as a huge page-rounded number.  */
    if (u->memory_limit != NO_VALUE && u->memory_limit >= (UINT64_MAX >> 2))
      u->memory_limit = NO_VALUE;
    u->cpu_usec = ns == NO_VALUE ? NO_VALUE : ns / 1000;
    u->pids = read_u64 (pids, "pids.current");
    u->pids_limit = read_u64 (pids, "pids.max");
    u->oom_kills = read_key (mem, "memory.oom_control", "oom_kill");
    u->pids_denied = read_key (pids, "pids.events", "max");
  }
  return 0;
}

static void
sleep_us (long us)
{
  struct timespec ts = { us / 1000000, (us % 1000000) * 1000L };
  while (nanosleep (&ts, &ts) < 0 && errno == EINTR)
    ;
}

static void
sleep_ms (long ms)
{
  struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
  while (nanosleep (&ts, &ts) < 0 && errno == EINTR)
    ;
}

int
esbx_cgroup_kill (const char *rel, esbx_error_t *err)
{
  _cleanup_free_ char *freezer = NULL;
  int tries;

  if (!esbx_cgroup_exists (rel))
    return 0;
  if (v2_root ())
    {
      _cleanup_free_ char *dir = dir_of (NULL, rel);
      _cleanup_free_ char *killf = xasprintf ("%s/cgroup.kill", dir);
      write_str (killf, "1");
    }
  else if (v1_mounted ("freezer"))
    freezer = dir_of ("freezer", rel);

  for (tries = 0; tries < KILL_TRIES; tries++)
    {
      _cleanup_free_ pid_t *pids = NULL;
      size_t n = 0, i;

      if (esbx_cgroup_pids (rel, &pids, &n, NULL) < 0 || n == 0)
        return 0;
      /* Frozen, a fork bomb cannot outrun the kill loop.  */
      if (freezer)
        set_value (freezer, "freezer.state", "FROZEN", NULL);
      for (i = 0; i < n; i++)
        kill (pids[i], SIGKILL);
      if (freezer)
        set_value (freezer, "freezer.state", "THAWED", NULL);
      sleep_ms (25);
    }
  return esbx_make_error (err, EBUSY, "cgroup `%s`: processes survive SIGKILL", rel);
}

/* The freezer state of REL reached FROZEN (or THAWED): 1, 0 not yet.  */
static int
freeze_reached (const char *rel, bool frozen)
{
  char buf[256];

  if (v2_root ())
    {
      _cleanup_free_ char *ev = xasprintf ("%s/%s/cgroup.events", v2_root (), rel);
      if (read_small (ev, buf, sizeof buf) < 0)
        return 1;
      return (strstr (buf, frozen ? "frozen 1" : "frozen 0") != NULL);
    }
  {
    _cleanup_free_ char *st = xasprintf (CGROUP_FS "/freezer/%s/freezer.state", rel);
    if (read_small (st, buf, sizeof buf) < 0)
      return 1;
    return strncmp (buf, frozen ? "FROZEN" : "THAWED", 6) == 0;
  }
}

int
esbx_cgroup_freeze (const char *rel, bool frozen, esbx_error_t *err)
{
  _cleanup_free_ char *dir = NULL;
  const char *file, *value;
  int tries;

  if (!esbx_cgroup_exists (rel))
    return 0;
  if (v2_root ())
    {
      dir = dir_of (NULL, rel);
      file = "cgroup.freeze";
      value = frozen ? "1" : "0";
    }
  else if (v1_mounted ("freezer"))
    {
      dir = dir_of ("freezer", rel);
      file = "freezer.state";
      value = frozen ? "FROZEN" : "THAWED";
    }
  else
    return esbx_make_error (err, ENOTSUP, "cgroup `%s`: no freezer", rel);
  if (set_value (dir, file, value, err) < 0)
    return -1;
  /* An idle session freezes in well under a millisecond: look again soon,
     then every 5 ms (a snapshot waits for this).  */
  for (tries = 0; tries < KILL_TRIES; tries++)
    {
      if (freeze_reached (rel, frozen))
        return 0;
      if (tries < 6)
        sleep_us (100L << tries);
      else
        sleep_ms (5);
      /* v1 retries a freeze that stopped half-way (FREEZING).  */
      if (!v2_root ())
        set_value (dir, file, value, NULL);
    }
  return esbx_make_error (err, EBUSY, "cgroup `%s`: %s did not complete", rel,
                          frozen ? "freeze" : "thaw");
}

bool
esbx_cgroup_frozen (const char *rel)
{
  _cleanup_free_ char *state = NULL;
  char buf[256];

  /* One read, which fails when there is no such cgroup: gc asks this of
     every session.  */
  if (v2_root ())
    {
      state = xasprintf ("%s/%s/cgroup.events", v2_root (), rel);
      return read_small (state, buf, sizeof buf) == 0 && strstr (buf, "frozen 1") != NULL;
    }
  if (!v1_mounted ("freezer"))
    return false;
  state = xasprintf (CGROUP_FS "/freezer/%s/freezer.state", rel);
  return read_small (state, buf, sizeof buf) == 0 && strncmp (buf, "FROZEN", 6) == 0;
}

static int
rmdir_tree (const char *dir)
{
  _cleanup_dir_ DIR *d = opendir (dir);
  struct dirent *de;

  if (d == NULL)
    return errno == ENOENT ? 0 : -1;
  while ((de = readdir (d)) != NULL)
    {
      _cleanup_free_ char *sub = NULL;

      if (de->d_type != DT_DIR || de->d_name[0] == '.')
        continue;
      sub = xasprintf ("%s/%s", dir, de->d_name);
      if (rmdir_tree (sub) < 0)
        return -1;
    }
  if (rmdir (dir) < 0 && errno != ENOENT)
    return -1;
  return 0;
}

static int
remove_one (const char *dir, esbx_error_t *err)
{
  int tries;

  /* Exiting tasks leave the cgroup a moment after SIGKILL.  */
  for (tries = 0; tries < KILL_TRIES; tries++)
    {
      if (rmdir_tree (dir) == 0)
        return 0;
      if (errno != EBUSY)
        break;
      sleep_ms (25);
    }
  return esbx_make_error (err, errno, "rmdir `%s`", dir);
}

/* Every v1 hierarchy mounted under /sys/fs/cgroup, not only ours: runc
   puts a container of the session under REL in all of them.  */
static char **
v1_hierarchies (void)
{
  struct strv names = { 0 };
  _cleanup_dir_ DIR *d = opendir (CGROUP_FS);
  struct dirent *de;

  while (d && (de = readdir (d)) != NULL)
    {
      if (de->d_name[0] == '.' || de->d_type != DT_DIR)
        continue;
      if (v1_mounted (de->d_name))
        strv_push (&names, xstrdup (de->d_name));
    }
  if (names.v == NULL)
    return xmalloc0 (sizeof (char *));
  return names.v;
}

int
esbx_cgroup_remove (const char *rel, esbx_error_t *err)
{
  _cleanup_strv_ char **hier = NULL;
  char **h;

  if (esbx_cgroup_kill (rel, err) < 0)
    return -1;
  if (v2_root ())
    {
      _cleanup_free_ char *dir = dir_of (NULL, rel);
      return remove_one (dir, err);
    }
  hier = v1_hierarchies ();
  for (h = hier; *h; h++)
    {
      _cleanup_free_ char *dir = dir_of (*h, rel);

      if (access (dir, F_OK) < 0)
        continue;
      if (remove_one (dir, err) < 0)
        return -1;
    }
  return 0;
}

char **
esbx_cgroup_list_esbx (esbx_error_t *err)
{
  struct strv names = { 0 };
  _cleanup_strv_ char **hier = v2_root () ? NULL : v1_hierarchies ();
  size_t i, k, nh = v2_root () ? 1 : strv_len (hier);

  for (i = 0; i < nh; i++)
    {
      _cleanup_free_ char *dir = dir_of (v2_root () ? NULL : hier[i], "esbx");
      _cleanup_dir_ DIR *d = opendir (dir);
      struct dirent *de;

      if (d == NULL)
        continue;
      while ((de = readdir (d)) != NULL)
        {
          bool seen = false;

          if (de->d_type != DT_DIR || de->d_name[0] == '.')
            continue;
          for (k = 0; k < names.n; k++)
            seen = seen || strcmp (names.v[k], de->d_name) == 0;
          if (!seen)
            strv_push (&names, xstrdup (de->d_name));
        }
    }
  if (names.v == NULL)
    return xmalloc0 (sizeof (char *));
  return names.v;
}
