/* The gVisor tier's holder: a runsc sandbox, standalone (no Docker, no
 * containerd), one per session, over the session's merged view.
 *
 *   ROOT/sessions/S/gvisor/root      the sandbox's root: mount points only
 *   ROOT/sessions/S/gvisor/bundle    its OCI bundle (gvisor_spec.c)
 *   ROOT/sessions/S/gvisor/state     runsc's --root for it
 *   ROOT/sessions/S/gvisor/runsc.log what runsc said at start
 *
 * runsc is started from a child that joined the session cgroup first, so
 * the sandbox, its gofer and everything gVisor runs count in the session's
 * memory and pids limits; the sandbox process is recorded in holder.json as
 * the holder is (its pid and start time), with the container id, and
 * ends as a holder does (SIGTERM, SIGKILL, the cgroup emptied).  Its
 * container's init is `sleep infinity`; commands are `runsc exec` of a
 * process.json handed over in a memfd, so that the command's environment
 * (secrets included) is in no argv on the host.
 *
 * Platform: $ESBX_RUNSC_PLATFORM, else ptrace (Debian 12's runsc,
 * 20221219, has no systrap; kvm is not chosen by itself: a /dev/kvm that
 * opens inside a VM without nested virtualisation left the sandbox
 * spinning at start here).
 *
 * Network: none is gVisor's netstack with loopback only; host is runsc's
 * hostinet in the host's net namespace (the spec names none).  egress is
 * the other tiers' network (shim/lib/egress.h): a net namespace made here
 * by a child that waits in it (the keeper) gets the slot's veth, address
 * and route (esbx_egress_link), the spec names it, and runsc --network
 * sandbox hands its interfaces to gVisor's netstack, which sends through
 * the veth (an AF_PACKET socket) past the slot's nftables table as a
 * holder's packets go; the sandbox keeps the namespace once the keeper
 * exits.  Before it takes over a namespace's interfaces, runsc checks
 * that it is not the host's: that /proc/sys/net/core/rmem_default is
 * missing there, which is true of no net namespace on kernels that have
 * those sysctls in every namespace (6.18 here), so Debian's runsc refuses
 * ("cannot run with network enabled in root network namespace").  runsc
 * is started in a mount namespace of its own (a slave of the host's)
 * where /proc/sys/net is an empty tmpfs: the check passes, the namespace
 * being the one made here and never the host's; nothing else changes
 * (the sandbox and the gofer mount their own /proc, the session sees
 * gVisor's).  */
#include "gvisor.h"
#include "confine.h"
#include "cgroup.h"
#include "fs.h"
#include "json.h"
#include "layerstore.h"
#include "nskeeper.h"
#include "proc.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define GVISOR_DIR "gvisor"

bool
esbx_gvisor_wanted (const struct esbx_session *s)
{
  const char *iso = json_get_string (s->record, "isolation");
  return iso && strcmp (iso, "gvisor") == 0;
}

char *
esbx_gvisor_runsc (void)
{
  static const char *const dirs[]
      = { "/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin" };
  const char *env = getenv ("ESBX_RUNSC");
  size_t i;

  if (env && env[0])
    return access (env, X_OK) == 0 ? xstrdup (env) : NULL;
  for (i = 0; i < ARRAY_SIZE (dirs); i++)
    {
      _cleanup_free_ char *p = xasprintf ("%s/runsc", dirs[i]);
      if (access (p, X_OK) == 0)
        return steal_pointer (&p);
    }
  return NULL;
}

static const char *
platform (void)
{
  const char *env = getenv ("ESBX_RUNSC_PLATFORM");

  return env && env[0] ? env : "ptrace";
}

/* The last line runsc wrote in LOG, for an error message.  */
static char *
last_line (int dfd, const char *log)
{
  _cleanup_free_ char *buf = NULL;
  esbx_error_t ignored = NULL;
  size_t len;
  char *p;

  if (esbx_read_file_at (dfd, log, 1u << 20, &buf, &len, &ignored) < 0 || len == 0)
    {
      esbx_error_free (&ignored);
      return xstrdup ("(no output)");
    }
  while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == ' '))
    buf[--len] = '\0';
  p = strrchr (buf, '\n');
  return xstrdup (p ? p + 1 : buf);
}

/* In the child that becomes runsc (system calls only): a mount namespace
   of its own, where /proc/sys/net is empty and passes runsc's check of a
   net namespace that is not the host's (see the top of this file).  */
static int
hide_net_sysctls (void)
{
  static const char msg[] = "esbx: cannot hide /proc/sys/net from runsc\n";

  if (unshare (CLONE_NEWNS) < 0 || mount (NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0
      || mount ("esbx-runsc", "/proc/sys/net", "tmpfs",
                MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0555")
             < 0)
    {
      ssize_t n = write (STDERR_FILENO, msg, sizeof msg - 1);

      (void)n;
      return -1;
    }
  return 0;
}

/* Run ARGV (runsc) with stdout into OUT (-1: /dev/null) and stderr into
   LOG in DFD, in the session cgroup CGROUP when not NULL, with
   /proc/sys/net hidden when HIDE_NET; its exit status in *STATUS.  */
static int
run_runsc (char *const *argv, int dfd, const char *log, const char *cgroup, bool hide_net, int out,
           int *status, esbx_error_t *err)
{
  _cleanup_close_ int logfd = -1, null = -1;
  int go[2];
  pid_t pid = 0;
  char byte = 'g';

  logfd = TEMP_FAILURE_RETRY (
      openat (dfd, log, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600));
  null = TEMP_FAILURE_RETRY (open ("/dev/null", O_RDWR | O_CLOEXEC));
  if (logfd < 0 || null < 0)
    return esbx_make_error (err, errno, "open `%s`", log);
  if (pipe2 (go, O_CLOEXEC) < 0)
    return esbx_make_error (err, errno, "pipe");
  pid = fork ();
  if (pid < 0)
    {
      int saved = errno;
      close (go[0]);
      close (go[1]);
      return esbx_make_error (err, saved, "fork");
    }
  if (pid == 0)
    {
      sigset_t none;

      /* Only async-signal-safe steps: the parent may be threaded.  */
      sigemptyset (&none);
      sigprocmask (SIG_SETMASK, &none, NULL);
      close (go[1]);
      if (read (go[0], &byte, 1) != 1)
        _exit (126);
      if (dup2 (null, 0) < 0 || dup2 (out >= 0 ? out : null, 1) < 0 || dup2 (logfd, 2) < 0)
        _exit (126);
      if (hide_net && hide_net_sysctls () < 0)
        _exit (126);
      esbx_close_fds_from (3);
      execv (argv[0], argv);
      _exit (127);
    }
  close (go[0]);
  /* In the session cgroup before it runs: the sandbox and the gofer it
     forks are born there.  */
  if (cgroup && esbx_cgroup_enter (cgroup, pid, err) < 0)
    {
      close (go[1]);
      kill (pid, SIGKILL);
      TEMP_FAILURE_RETRY (waitpid (pid, NULL, 0));
      return -1;
    }
  if (write (go[1], &byte, 1) != 1)
    {
      int saved = errno;
      close (go[1]);
      kill (pid, SIGKILL);
      TEMP_FAILURE_RETRY (waitpid (pid, NULL, 0));
      return esbx_make_error (err, saved, "start runsc");
    }
  close (go[1]);
  if (TEMP_FAILURE_RETRY (waitpid (pid, status, 0)) < 0)
    return esbx_make_error (err, errno, "waitpid");
  return 0;
}

static int
write_record (struct esbx_sandbox_session *ss, const char *cgroup, pid_t pid, const char *id,
              const char *state, const char *runsc, esbx_error_t *err)
{
  _cleanup_json_ json_t *rec = json_new (JSON_OBJECT);
  _cleanup_free_ char *now = esbx_rfc3339_now ();
  _cleanup_free_ char *data = NULL;
  json_t *g = json_new (JSON_OBJECT);
  unsigned long long start;
  size_t len;

  if (esbx_proc_starttime (pid, &start) < 0)
    return esbx_make_error (err, errno, "read the start time of the sandbox (pid %d)", (int)pid);
  json_set_int (rec, "pid", pid);
  json_set_int (rec, "starttime", (int64_t)start);
  json_set_string (rec, "cgroup", cgroup);
  json_set_string (rec, "network", ss->rec->network ? ss->rec->network : "none");
  json_set_string (rec, "workspace", ss->rec->workspace ? ss->rec->workspace : "/workspace");
  json_set_string (rec, "started", now);
  json_set_string (g, "id", id);
  json_set_string (g, "root", state);
  json_set_string (g, "runsc", runsc);
  json_set_string (g, "platform", platform ());
  json_set (rec, "gvisor", g);
  data = json_serialize (rec, true, &len);
  return esbx_write_file_atomic_at (ss->dfd, "holder.json", data, len, 0644, err);
}

/* The sandbox's pid from `runsc state ID`.  */
static int
sandbox_pid (char *const *argv, int gdfd, pid_t *pid, esbx_error_t *err)
{
  _cleanup_close_ int out = -1;
  _cleanup_json_ json_t *j = NULL;
  _cleanup_free_ char *buf = NULL;
  int status;
  int64_t v = 0;
  size_t len;

  out = TEMP_FAILURE_RETRY (
      openat (gdfd, "state.json", O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (out < 0)
    return esbx_make_error (err, errno, "open `state.json`");
  if (run_runsc (argv, gdfd, "runsc-state.log", NULL, false, out, &status, err) < 0)
    return -1;
  if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
    {
      _cleanup_free_ char *why = last_line (gdfd, "runsc-state.log");
      return esbx_make_error (err, 0, "runsc state: %s", why);
    }
  if (esbx_read_file_at (gdfd, "state.json", 1u << 20, &buf, &len, err) < 0)
    return -1;
  j = json_parse (buf, len, err);
  if (j == NULL)
    return esbx_error_wrap (err, "runsc state");
  if (!json_get_int (j, "pid", &v) || v <= 0)
    return esbx_make_error (err, EINVAL, "runsc state: no sandbox pid");
  *pid = (pid_t)v;
  return 0;
}

static int
start_sandbox (struct esbx_sandbox_session *ss, const char *cgroup,
               const struct esbx_gvisor_net *net, esbx_error_t *err)
{
  _cleanup_free_ char *runsc = esbx_gvisor_runsc ();
  _cleanup_free_ char *sdir = esbx_session_dir (ss->store, ss->name);
  _cleanup_free_ char *gdir = NULL, *root = NULL, *bundle = NULL, *state = NULL, *id = NULL;
  _cleanup_free_ char *data = NULL, *suffix = esbx_random_hex (4);
  _cleanup_json_ json_t *spec = NULL;
  _cleanup_close_ int gdfd = -1, bdfd = -1;
  const char *sid = json_get_string (ss->rec->record, "id");
  int status;
  pid_t pid = 0;
  size_t len;

  if (runsc == NULL)
    return esbx_make_error (err, ENOENT,
                            "session `%s`: --isolation gvisor needs runsc (Debian's package "
                            "`runsc`, or $ESBX_RUNSC)",
                            ss->name);
  gdir = xasprintf ("%s/" GVISOR_DIR, sdir);
  root = xasprintf ("%s/root", gdir);
  bundle = xasprintf ("%s/bundle", gdir);
  state = xasprintf ("%s/state", gdir);
  /* Sandbox ids are host-wide (runsc's control sockets are abstract):
     the session's id, and a new suffix for each start.  */
  id = xasprintf ("esbx-%.32s-%s", sid ? sid : ss->name, suffix);
  if (mkdirat (ss->dfd, GVISOR_DIR, 0700) < 0 && errno != EEXIST)
    return esbx_make_error (err, errno, "mkdir `%s`", gdir);
  gdfd = esbx_open_dir_at (ss->dfd, GVISOR_DIR, err);
  if (gdfd < 0)
    return -1;
  /* What a sandbox killed earlier left of runsc's state.  */
  if (esbx_rm_rf_at (gdfd, "state", err) < 0)
    return -1;
  if (mkdirat (gdfd, "bundle", 0700) < 0 && errno != EEXIST)
    return esbx_make_error (err, errno, "mkdir `%s`", bundle);
  bdfd = esbx_open_dir_at (gdfd, "bundle", err);
  if (bdfd < 0 || esbx_gvisor_root_prepare (ss, root, err) < 0)
    return -1;
  spec = esbx_gvisor_spec (ss, root, net, err);
  if (spec == NULL)
    return -1;
  data = json_serialize (spec, true, &len);
  if (esbx_replace_file_at (bdfd, "config.json", data, len, 0600, err) < 0)
    return -1;
  {
    /* --ignore-cgroups: runsc would move the sandbox into a cgroup of its
       own, out of the session's and its limits.  */
    char *run_argv[] = { runsc,
                         (char *)"--root",
                         state,
                         (char *)"--platform",
                         (char *)platform (),
                         (char *)"--network",
                         (char *)(net->host    ? "host"
                                  : net->netns ? "sandbox"
                                               : "none"),
                         (char *)"--ignore-cgroups",
                         (char *)"run",
                         (char *)"--detach",
                         (char *)"--bundle",
                         bundle,
                         id,
                         NULL };
    if (run_runsc (run_argv, gdfd, "runsc.log", cgroup, net->netns != NULL, -1, &status, err) < 0)
      return esbx_error_wrap (err, "session `%s`: start its gVisor sandbox", ss->name);
    if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
      {
        _cleanup_free_ char *why = last_line (gdfd, "runsc.log");
        return esbx_make_error (err, 0, "session `%s`: start its gVisor sandbox: runsc: %s",
                                ss->name, why);
      }
  }
  {
    char *state_argv[] = { runsc, (char *)"--root", state, (char *)"state", id, NULL };
    if (sandbox_pid (state_argv, gdfd, &pid, err) < 0
        || write_record (ss, cgroup, pid, id, state, runsc, err) < 0)
      {
        char *kill_argv[]
            = { runsc, (char *)"--root", state, (char *)"delete", (char *)"--force", id, NULL };
        esbx_error_t ignored = NULL;

        run_runsc (kill_argv, gdfd, "runsc-delete.log", NULL, false, -1, &status, &ignored);
        esbx_error_free (&ignored);
        return esbx_error_wrap (err, "session `%s`: start its gVisor sandbox", ss->name);
      }
  }
  return 0;
}

int
esbx_gvisor_start (struct esbx_sandbox_session *ss, const char *cgroup,
                   const struct esbx_egress *net, esbx_error_t *err)
{
  struct esbx_gvisor_net gnet
      = { .host = ss->rec->network && strcmp (ss->rec->network, "host") == 0 };
  _cleanup_free_ char *netns = NULL;
  pid_t keeper = 0;
  int ret;

  if (net == NULL || net->slot < 0)
    return start_sandbox (ss, cgroup, &gnet, err);
  keeper = esbx_nskeeper_start (CLONE_NEWNET, err);
  if (keeper < 0)
    return esbx_error_wrap (err, "session `%s`: start its gVisor sandbox: a net namespace",
                            ss->name);
  netns = xasprintf ("/proc/%d/ns/net", (int)keeper);
  gnet.netns = netns;
  gnet.resolv_conf = net->resolv_conf;
  gnet.ca_bundle = net->proxy.ca_bundle;
  /* The link before runsc starts: it takes the interfaces it finds.  */
  ret = esbx_egress_link (ss->rec, net, keeper, err);
  if (ret == 0)
    ret = start_sandbox (ss, cgroup, &gnet, err);
  /* The sandbox holds the namespace now (or nothing does).  */
  esbx_nskeeper_stop (keeper);
  return ret;
}

/* A memfd holding the process.json of a command: ARGV as UID:GID in CWD
   with ENV; -1 on failure.  Left open across execve: runsc reads it
   through /proc/self/fd.  */
static int
process_fd (const char *cwd, uid_t uid, gid_t gid, char *const *env, char *const *argv)
{
  _cleanup_json_ json_t *p = json_new (JSON_OBJECT);
  json_t *user = json_new (JSON_OBJECT), *a = json_new (JSON_ARRAY), *e = json_new (JSON_ARRAY);
  json_t *caps = json_new (JSON_OBJECT);
  _cleanup_free_ char *data = NULL;
  size_t len, i;
  int fd;

  for (i = 0; argv[i]; i++)
    json_append (a, json_new_string (argv[i]));
  for (i = 0; env && env[i]; i++)
    json_append (e, json_new_string (env[i]));
  json_set_int (user, "uid", uid);
  json_set_int (user, "gid", gid);
  json_set (p, "user", user);
  json_set (p, "args", a);
  json_set (p, "env", e);
  json_set_string (p, "cwd", cwd);
  /* Docker's: root keeps its set, any other user none but the bounding.  */
  json_set (caps, "bounding", esbx_gvisor_caps (true));
  json_set (caps, "effective", esbx_gvisor_caps (uid == 0));
  json_set (caps, "permitted", esbx_gvisor_caps (uid == 0));
  json_set (p, "capabilities", caps);
  json_set (p, "noNewPrivileges", json_new_bool (true));
  data = json_serialize (p, false, &len);
  fd = memfd_create ("esbx-process", 0);
  if (fd < 0)
    return -1;
  if (esbx_write_all (fd, data, len) < 0)
    {
      close (fd);
      return -1;
    }
  return fd;
}

char **
esbx_gvisor_exec_argv (const struct esbx_holder_info *info, const char *cwd, uid_t uid, gid_t gid,
                       char *const *env, char *const *argv)
{
  struct strv v = { 0 };
  int fd = process_fd (cwd, uid, gid, env, argv);

  if (fd < 0)
    return NULL;
  strv_push (&v, xstrdup (info->gvisor_runsc));
  strv_push (&v, xstrdup ("--root"));
  strv_push (&v, xstrdup (info->gvisor_state));
  strv_push (&v, xstrdup ("exec"));
  strv_push (&v, xstrdup ("--process"));
  strv_push (&v, xasprintf ("/proc/self/fd/%d", fd));
  strv_push (&v, xstrdup (info->gvisor_id));
  return v.v;
}
