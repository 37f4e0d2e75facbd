/* The store's egress proxy (shim/proxy/), started on demand.
 *
 * Whoever brings up an egress network, esbx or esbxd, calls
 * esbx_egress_proxy_ensure after taking its slot: under start.lock it
 * finds the proxy running (its `lock` is held) or starts one, which
 * outlives the caller (its own session, no parent but init) and ends by
 * itself once the store has had no slot for a few seconds (under
 * start.lock too, so that a caller never counts on a proxy that is going),
 * taking its directory with it.
 * Its files are in ESBX_EGRESS_RUN/proxy/KEY, KEY the first 16 hex digits
 * of the SHA-256 of the store's root.  It inherits the caller's
 * environment: ESBX_EGRESS_RANGE, ESBX_EGRESS_UPSTREAM (the resolver it
 * asks), ESBX_EGRESS_UPSTREAM_CA (CAs it trusts besides the host's).  */
#include "egress.h"
#include "fs.h"
#include "sync.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROXY_BINARY "esbx-proxy"

char *
esbx_egress_proxy_dir (esbx_store_t *store)
{
  char key[17];

  esbx_egress_store_key (store, key);
  return xasprintf (ESBX_EGRESS_RUN "/proxy/%s", key);
}

static char *
candidate (const char *dir, const char *rel)
{
  _cleanup_free_ char *p = xasprintf ("%s/%s", dir, rel);

  if (access (p, X_OK) == 0)
    return steal_pointer (&p);
  return NULL;
}

/* Beside the running program (or in the build tree's shim/), then
   $ESBX_PROXY, then PATH: as the holder is found.  */
static char *
find_binary (esbx_error_t *err)
{
  char self[PATH_MAX];
  const char *env = getenv ("ESBX_PROXY"), *path = getenv ("PATH");
  ssize_t n = readlink ("/proc/self/exe", self, sizeof self - 1);
  char *found;

  if (n > 0)
    {
      self[n] = '\0';
      *strrchr (self, '/') = '\0';
      if ((found = candidate (self, PROXY_BINARY)) != NULL
          || (found = candidate (self, "../shim/" PROXY_BINARY)) != NULL
          || (found = candidate (self, "../../shim/" PROXY_BINARY)) != NULL)
        return found;
    }
  if (env && *env && access (env, X_OK) == 0)
    return xstrdup (env);
  {
    _cleanup_free_ char *copy = xstrdup (path ? path : "/usr/local/bin:/usr/bin:/bin");
    char *save = NULL, *d;

    for (d = strtok_r (copy, ":", &save); d; d = strtok_r (NULL, ":", &save))
      if ((found = candidate (d, PROXY_BINARY)) != NULL)
        return found;
  }
  return esbx_make_error_kind (err, ESBX_ERR_EXEC_NOT_FOUND, ENOENT,
                               "the egress proxy `" PROXY_BINARY "` is not installed"),
         NULL;
}

static int
read_ports (int dfd, const char *dir, struct esbx_egress_proxy *out, esbx_error_t *err)
{
  _cleanup_json_ json_t *j = json_parse_file_at (dfd, "ports.json", err);
  int64_t http = 0, dns = 0;

  if (j == NULL || !json_get_int (j, "http", &http) || !json_get_int (j, "dns", &dns))
    return esbx_error_wrap (err, "the egress proxy's ports (`%s/ports.json`)", dir);
  out->http_port = (int)http;
  out->dns_port = (int)dns;
  free (out->ca_bundle);
  out->ca_bundle = xasprintf ("%s/bundle.pem", dir);
  return 0;
}

static int
start (esbx_store_t *store, const char *dir, esbx_error_t *err)
{
  _cleanup_free_ char *binary = find_binary (err);
  _cleanup_free_ char *log = xasprintf ("%s/proxy.log", dir);
  struct esbx_sync_msg msg = { 0 };
  esbx_error_t remote = NULL;
  int fds[2], status, r;
  pid_t child;

  if (binary == NULL)
    return -1;
  if (pipe2 (fds, O_CLOEXEC) < 0)
    return esbx_make_error (err, errno, "pipe");
  child = fork ();
  if (child < 0)
    {
      close (fds[0]);
      close (fds[1]);
      return esbx_make_error (err, errno, "fork");
    }
  if (child == 0)
    {
      /* A session of its own, and a grandchild: nobody's child but
         init's, it outlives whoever started it.  */
      int null = open ("/dev/null", O_RDWR | O_CLOEXEC);
      int logfd = open (log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);

      setsid ();
      if (fork () != 0)
        _exit (0);
      if (null < 0 || dup2 (null, 0) < 0 || dup2 (null, 1) < 0
          || dup2 (logfd >= 0 ? logfd : null, 2) < 0 || dup2 (fds[1], 3) < 0)
        _exit (127);
      esbx_close_fds_from (4);
      signal (SIGPIPE, SIG_DFL);
      execl (binary, binary, "--store", store->root, "--dir", dir, "--ready-fd", "3", (char *)NULL);
      _exit (127);
    }
  close (fds[1]);
  TEMP_FAILURE_RETRY (waitpid (child, &status, 0));
  r = esbx_sync_recv (fds[0], &msg, &remote, err);
  close (fds[0]);
  if (r < 0)
    return -1;
  if (r == 0)
    return esbx_make_error (err, 0, "the egress proxy (%s) did not start (see %s/proxy.log)",
                            binary, dir);
  if (msg.type == ESBX_SYNC_ERROR)
    {
      esbx_sync_msg_clear (&msg);
      *err = remote;
      return esbx_error_wrap (err, "the egress proxy");
    }
  esbx_sync_msg_clear (&msg);
  return 0;
}

int
esbx_egress_proxy_ensure (esbx_store_t *store, struct esbx_egress_proxy *out, esbx_error_t *err)
{
  _cleanup_free_ char *dir = esbx_egress_proxy_dir (store);
  _cleanup_close_ int dfd = -1, startlock = -1, probe = -1;
  esbx_error_t busy = NULL;
  struct stat st;
  int tries;

  /* A proxy that ends removes its directory, start.lock last but for the
     directory, while holding it: a start.lock got that has no name any
     more (or a directory gone under us) is tried again.  */
  for (tries = 0;; tries++)
    {
      if (esbx_mkdir_p (dir, 0700, err) < 0)
        return -1;
      dfd = esbx_open_dir_at (AT_FDCWD, dir, err);
      if (dfd >= 0)
        startlock = esbx_lock_at (dfd, "start.lock", true, true, err);
      if (startlock >= 0 && fstat (startlock, &st) == 0 && st.st_nlink > 0)
        break;
      if (startlock < 0 && (*err)->status != ENOENT)
        return -1;
      if (tries >= 100)
        return *err ? -1 : esbx_make_error (err, 0, "`%s` went away as it was locked", dir);
      esbx_error_free (err);
      if (startlock >= 0)
        close (take_fd (&startlock));
      if (dfd >= 0)
        close (take_fd (&dfd));
    }
  /* Held: it runs.  */
  probe = esbx_lock_at (dfd, "lock", true, false, &busy);
  if (probe >= 0)
    {
      close (take_fd (&probe));
      if (start (store, dir, err) < 0)
        return -1;
    }
  esbx_error_free (&busy);
  return read_ports (dfd, dir, out, err);
}

void
esbx_egress_proxy_clear (struct esbx_egress_proxy *p)
{
  free (p->ca_bundle);
  p->ca_bundle = NULL;
}

pid_t
esbx_egress_proxy_pid (esbx_store_t *store)
{
  _cleanup_free_ char *dir = esbx_egress_proxy_dir (store);
  _cleanup_close_ int dfd = -1, probe = -1;
  _cleanup_json_ json_t *j = NULL;
  esbx_error_t e = NULL;
  int64_t pid = 0;

  dfd = TEMP_FAILURE_RETRY (open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dfd < 0)
    return 0;
  /* Not made when missing: an ending proxy removes its directory.  */
  probe = TEMP_FAILURE_RETRY (openat (dfd, "lock", O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (probe < 0 || !esbx_lock_is_held (probe))
    return 0;
  j = json_parse_file_at (dfd, "ports.json", &e);
  esbx_error_free (&e);
  if (j == NULL || !json_get_int (j, "pid", &pid))
    return 0;
  return (pid_t)pid;
}
