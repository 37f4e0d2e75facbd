/* esbx-holder: one per session.  See shim/lib/holder.h for how it is found
 * and started, shim/holder/rootfs.c for the filesystem it builds.
 *
 * The process started by the library (the "launcher") joins the session
 * cgroup, unshares the namespaces and forks the holder proper, which becomes
 * PID 1 of the new pid namespace.  The launcher records the holder in
 * holder.json and exits, so the holder is nobody's child in the CLI's process
 * tree and survives it.  Both report on the ready pipe (common/sync.h): an
 * error, or ESBX_HOLDER_READY from the holder once the namespaces are ready.
 *
 * Like catatonit, the holder then only blocks signals, reads them from a
 * signalfd and reaps children.  SIGTERM (or SIGINT, SIGHUP, SIGQUIT) ends
 * it: it SIGKILLs every process of its pid namespace, reaps, exits.  */
#include "root.h"
#include "holder.h"
#include "cgroup.h"
#include "layerstore.h"
#include "fs.h"
#include "json.h"
#include "proc.h"
#include "sync.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <malloc.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>

#define HOSTNAME_MAX 64

static int ready_fd = -1;

static void __attribute__ ((noreturn)) fail (esbx_error_t *err)
{
  if (ready_fd >= 0)
    esbx_error_send (ready_fd, err);
  _exit (1);
}

int
holder_loopback_up (esbx_error_t *err)
{
  _cleanup_close_ int sock = -1;
  struct ifreq ifr = { 0 };

  sock = socket (AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (sock < 0)
    return esbx_make_error (err, errno, "socket");
  strcpy (ifr.ifr_name, "lo");
  if (ioctl (sock, SIOCGIFFLAGS, &ifr) < 0)
    return esbx_make_error (err, errno, "read flags of `lo`");
  ifr.ifr_flags |= IFF_UP;
  if (ioctl (sock, SIOCSIFFLAGS, &ifr) < 0)
    return esbx_make_error (err, errno, "bring up `lo`");
  return 0;
}

static void
reap (void)
{
  while (TEMP_FAILURE_RETRY (waitpid (-1, NULL, WNOHANG)) > 0)
    ;
}

static void __attribute__ ((noreturn)) shutdown_session (void)
{
  /* As PID 1 of the namespace, -1 reaches every other process in it.  */
  kill (-1, SIGKILL);
  while (TEMP_FAILURE_RETRY (waitpid (-1, NULL, 0)) > 0 || errno == EINTR)
    ;
  _exit (0);
}

static void __attribute__ ((noreturn))
run_holder (const struct holder_config *cfg, const sigset_t *signals)
{
  esbx_error_t err = NULL;
  size_t hlen = strlen (cfg->session);
  _cleanup_close_ int sfd = -1;

  if (sethostname (cfg->session, hlen > HOSTNAME_MAX ? HOSTNAME_MAX : hlen) < 0)
    {
      esbx_make_error (&err, errno, "sethostname");
      fail (&err);
    }
  if (strcmp (cfg->network, "host") != 0 && holder_loopback_up (&err) < 0)
    fail (&err);
  if (holder_userns_net (cfg, &err) < 0 || holder_setup_root (cfg, &err) < 0
      || holder_userns_enter (cfg, &err) < 0)
    fail (&err);
  sfd = signalfd (-1, signals, SFD_CLOEXEC);
  if (sfd < 0)
    {
      esbx_make_error (&err, errno, "signalfd");
      fail (&err);
    }
  if (esbx_sync_send (ready_fd, ESBX_HOLDER_READY, 0, NULL) < 0)
    _exit (1);
  close (ready_fd);
  ready_fd = -1;
  malloc_trim (0);

  for (;;)
    {
      struct signalfd_siginfo si;
      ssize_t r = TEMP_FAILURE_RETRY (read (sfd, &si, sizeof si));

      if (r != sizeof si)
        continue;
      switch (si.ssi_signo)
        {
        case SIGCHLD:
          reap ();
          break;
        case SIGTERM:
        case SIGINT:
        case SIGHUP:
        case SIGQUIT:
          shutdown_session ();
        default:
          break;
        }
    }
}

static int
write_record (const struct holder_config *cfg, int dfd, pid_t pid, esbx_error_t *err)
{
  _cleanup_json_ json_t *rec = json_new (JSON_OBJECT);
  _cleanup_free_ char *now = esbx_rfc3339_now ();
  _cleanup_free_ char *data = NULL;
  unsigned long long start;
  size_t len;

  if (esbx_proc_starttime (pid, &start) < 0)
    return esbx_make_error (err, errno, "read the start time of the holder (pid %d)", (int)pid);
  json_set_int (rec, "pid", pid);
  json_set_int (rec, "starttime", (int64_t)start);
  json_set_string (rec, "cgroup", cfg->cgroup);
  json_set_string (rec, "network", cfg->network);
  json_set_string (rec, "workspace", cfg->workspace);
  json_set_string (rec, "started", now);
  if (cfg->userns_uid)
    {
      json_t *u = json_new (JSON_OBJECT);

      json_set_int (u, "uid", cfg->userns_uid);
      json_set_int (u, "count", cfg->userns_count);
      json_set (rec, "userns", u);
    }
  data = json_serialize (rec, true, &len);
  return esbx_write_file_atomic_at (dfd, "holder.json", data, len, 0644, err);
}

static void
usage (void)
{
  fputs (
      "usage: esbx-holder --session S --session-dir DIR --merged DIR --workspace PATH "
      "--network none|host|egress --cgroup REL --hide DIR [--rootfs DIR] "
      "[--resolv-conf FILE] [--ca-bundle FILE] [--secret SRC:FILE]... [--placeholder TEXT:FILE]... "
      "[--tmpfs-size BYTES] [--shm-size BYTES] [--userns UID:COUNT] "
      "--ready-fd N\n"
      "esbx-holder is started by esbx; it is not meant to be run by hand.\n",
      stderr);
  exit (2);
}

int
main (int argc, char **argv)
{
  static const struct option opts[] = {
    { "session", required_argument, NULL, 's' },
    { "session-dir", required_argument, NULL, 'd' },
    { "merged", required_argument, NULL, 'm' },
    { "workspace", required_argument, NULL, 'w' },
    { "network", required_argument, NULL, 'n' },
    { "cgroup", required_argument, NULL, 'c' },
    { "hide", required_argument, NULL, 'h' },
    { "rootfs", required_argument, NULL, 'f' },
    { "ready-fd", required_argument, NULL, 'r' },
    { "resolv-conf", required_argument, NULL, 'R' },
    { "secret", required_argument, NULL, 'S' },
    { "tmpfs-size", required_argument, NULL, 't' },
    { "shm-size", required_argument, NULL, 'M' },
    { "ca-bundle", required_argument, NULL, 'C' },
    { "placeholder", required_argument, NULL, 'P' },
    { "userns", required_argument, NULL, 'u' },
    { NULL, 0, NULL, 0 },
  };
  struct holder_config cfg = { .workspace = "/workspace",
                               .network = "none",
                               .hide = "",
                               .tmpfs_size = ESBX_DEFAULT_TMPFS_SIZE,
                               .shm_size = ESBX_DEFAULT_SHM_SIZE,
                               .userns_fd = -1 };
  esbx_error_t err = NULL;
  sigset_t all;
  int c, flags, dfd, go[2];
  pid_t pid;

  while ((c = getopt_long (argc, argv, "", opts, NULL)) != -1)
    switch (c)
      {
      case 's':
        cfg.session = optarg;
        break;
      case 'd':
        cfg.session_dir = optarg;
        break;
      case 'm':
        cfg.merged = optarg;
        break;
      case 'w':
        cfg.workspace = optarg;
        break;
      case 'n':
        cfg.network = optarg;
        break;
      case 'c':
        cfg.cgroup = optarg;
        break;
      case 'h':
        cfg.hide = optarg;
        break;
      case 'f':
        cfg.rootfs = optarg;
        break;
      case 'r':
        ready_fd = atoi (optarg);
        break;
      case 'R':
        cfg.resolv_conf = optarg;
        break;
      case 'C':
        cfg.ca_bundle = optarg;
        break;
      case 'P':
        if (err == NULL)
          holder_placeholder_add (&cfg, optarg, &err);
        break;
      case 't':
      case 'M':
        {
          char *end;
          unsigned long long v = strtoull (optarg, &end, 10);

          if (*end != '\0' || v == 0)
            usage ();
          *(c == 't' ? &cfg.tmpfs_size : &cfg.shm_size) = v;
        }
        break;
      case 'u':
        {
          char *end;
          unsigned long long uid = strtoull (optarg, &end, 10), count;

          if (*end != ':' || uid == 0)
            usage ();
          count = strtoull (end + 1, &end, 10);
          if (*end != '\0' || count == 0 || uid + count > UINT32_MAX)
            usage ();
          cfg.userns_uid = (uint32_t)uid;
          cfg.userns_count = (uint32_t)count;
        }
        break;
      case 'S':
        /* Reported once the ready pipe is known.  */
        if (err == NULL)
          holder_secrets_add (&cfg, optarg, &err);
        break;
      default:
        usage ();
      }
  if (!cfg.session || !cfg.session_dir || !cfg.merged || !cfg.cgroup || ready_fd < 3
      || optind != argc || fcntl (ready_fd, F_GETFD) < 0)
    usage ();
  cfg.ready_fd = ready_fd;
  if (err)
    fail (&err);

  /* Signals are read from a signalfd; none may run a default action.  */
  sigfillset (&all);
  sigprocmask (SIG_BLOCK, &all, NULL);
  esbx_close_fds_except (ready_fd, -1);
  if (chdir ("/") < 0)
    {
      esbx_make_error (&err, errno, "chdir `/`");
      fail (&err);
    }
  if (esbx_cgroup_enter (cfg.cgroup, 0, &err) < 0)
    fail (&err);
  /* Pages a session writes to its tmpfs count in its memory limit but
     belong to no process: at the limit the cgroup's OOM killer picks a
     process of the session, and the holder is the one it must not pick
     (PID 1: the whole session, its tmpfs contents included, would go
     with it).  Inherited by the holder, which forks nothing else.
     Lowering it needs CAP_SYS_RESOURCE, which a host inside a container
     may lack: then the commands raise theirs instead (exec_child.c).  */
  {
    _cleanup_close_ int oom
        = TEMP_FAILURE_RETRY (open ("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC));

    if (oom < 0 || (esbx_write_all (oom, "-1000", 5) < 0 && errno != EACCES && errno != EPERM))
      {
        esbx_make_error (&err, errno, "write `/proc/self/oom_score_adj`");
        fail (&err);
      }
  }
  /* Opened now: the holder soon covers /tmp and pivots the root of the
     mount namespace this process shares with it.  */
  dfd = esbx_open_dir_at (AT_FDCWD, cfg.session_dir, &err);
  if (dfd < 0)
    fail (&err);
  /* Made before the pid namespace: the child that carries it while its
     maps are written must not become that namespace's init.  */
  if (cfg.userns_uid)
    {
      cfg.userns_fd = esbx_userns_open (cfg.userns_uid, cfg.userns_count, &err);
      if (cfg.userns_fd < 0)
        fail (&err);
    }
  flags = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWPID;
  if (strcmp (cfg.network, "host") != 0)
    flags |= CLONE_NEWNET;
  if (unshare (flags) < 0)
    {
      esbx_make_error (&err, errno, "unshare the session namespaces");
      fail (&err);
    }
  /* The holder shares this mount namespace and soon pivots its root and
     mounts the session's /proc there, which would hide the holder's pid
     from the /proc/PID/stat read that records its start time.  It starts
     only once that record is written.  */
  if (pipe2 (go, O_CLOEXEC) < 0)
    {
      esbx_make_error (&err, errno, "pipe");
      fail (&err);
    }
  pid = fork ();
  if (pid < 0)
    {
      esbx_make_error (&err, errno, "fork");
      fail (&err);
    }
  if (pid == 0)
    {
      char byte;

      close (dfd);
      close (go[1]);
      if (TEMP_FAILURE_RETRY (read (go[0], &byte, 1)) != 1)
        _exit (1);
      close (go[0]);
      run_holder (&cfg, &all);
    }
  close (go[0]);
  if (write_record (&cfg, dfd, pid, &err) < 0)
    {
      kill (pid, SIGKILL);
      fail (&err);
    }
  if (esbx_write_all (go[1], "g", 1) < 0)
    {
      esbx_make_error (&err, errno, "start the holder");
      kill (pid, SIGKILL);
      fail (&err);
    }
  /* No exit handlers in a process whose pid namespace for children is no
     longer its own (LeakSanitizer's tracer, for one, cannot work there).  */
  _exit (0);
}
