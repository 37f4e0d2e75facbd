#include "holder.h"
#include "gvisor.h"
#include "cgroup.h"
#include "egress.h"
#include "events.h"
#include "fs.h"
#include "owner.h"
#include "proc.h"
#include "sync.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#define HOLDER_JSON   "holder.json"
#define HOLDER_LOCK   "holder.lock"
#define READY_TIMEOUT 30000 /* ms */
#define TERM_TIMEOUT  3000  /* ms before SIGKILL */

void
esbx_holder_info_free (struct esbx_holder_info *info)
{
  if (info == NULL)
    return;
  free (info->cgroup);
  info->cgroup = NULL;
  free (info->gvisor_id);
  free (info->gvisor_state);
  free (info->gvisor_runsc);
  info->gvisor_id = info->gvisor_state = info->gvisor_runsc = NULL;
}

/* holder.json as written by esbx-holder: pid, starttime, cgroup.  Returns
   0 with the record, < 0 with ENOENT when there is none.  */
static int
read_record (int dfd, struct esbx_holder_info *info, esbx_error_t *err)
{
  _cleanup_json_ json_t *j = NULL;
  int64_t pid = 0, start = 0;
  const char *cg;

  if (!esbx_exists_at (dfd, HOLDER_JSON))
    return esbx_make_error (err, ENOENT, "no holder record");
  j = json_parse_file_at (dfd, HOLDER_JSON, err);
  if (j == NULL)
    return -1;
  cg = json_get_string (j, "cgroup");
  if (!json_get_int (j, "pid", &pid) || !json_get_int (j, "starttime", &start) || cg == NULL
      || pid <= 0)
    return esbx_make_error (err, EINVAL, "malformed `%s`", HOLDER_JSON);
  info->pid = (pid_t)pid;
  info->starttime = (unsigned long long)start;
  info->cgroup = xstrdup (cg);
  {
    const json_t *u = json_get (j, "userns");
    int64_t uid = 0, count = 0;

    if (u && json_get_int (u, "uid", &uid) && json_get_int (u, "count", &count) && uid > 0
        && count > 0 && uid + count <= UINT32_MAX)
      {
        info->userns_uid = (uint32_t)uid;
        info->userns_count = (uint32_t)count;
      }
  }
  {
    const json_t *g = json_get (j, "gvisor");
    const char *id = json_get_string (g, "id"), *root = json_get_string (g, "root");
    const char *runsc = json_get_string (g, "runsc");

    if (g && (id == NULL || root == NULL || runsc == NULL))
      {
        esbx_holder_info_free (info);
        return esbx_make_error (err, EINVAL, "malformed `%s`", HOLDER_JSON);
      }
    if (g)
      {
        info->gvisor_id = xstrdup (id);
        info->gvisor_state = xstrdup (root);
        info->gvisor_runsc = xstrdup (runsc);
      }
  }
  return 0;
}

int
esbx_holder_get (esbx_store_t *store, const char *session, struct esbx_holder_info *info,
                 esbx_error_t *err)
{
  _cleanup_close_ int dfd = -1;
  esbx_error_t rerr = NULL;

  memset (info, 0, sizeof *info);
  dfd = esbx_session_open_dir (store, session, err);
  if (dfd < 0)
    return -1;
  if (read_record (dfd, info, &rerr) < 0)
    {
      esbx_error_free (&rerr);
      return esbx_make_error (err, ESRCH, "holder of session `%s`", session);
    }
  if (!esbx_proc_alive (info->pid, info->starttime))
    {
      esbx_holder_info_free (info);
      return esbx_make_error (err, ESRCH, "holder of session `%s`", session);
    }
  return 0;
}

static char *
holder_candidate (const char *dir, const char *rel)
{
  _cleanup_free_ char *p = xasprintf ("%s/%s", dir, rel);

  if (access (p, X_OK) == 0)
    return steal_pointer (&p);
  return NULL;
}

/* See holder.h for the search order.  */
static char *
find_holder_binary (esbx_error_t *err)
{
  char self[PATH_MAX];
  const char *env, *path;
  ssize_t n;
  char *found;

  n = readlink ("/proc/self/exe", self, sizeof self - 1);
  if (n > 0)
    {
      self[n] = '\0';
      *strrchr (self, '/') = '\0';
      if ((found = holder_candidate (self, "esbx-holder")) != NULL
          || (found = holder_candidate (self, "../shim/esbx-holder")) != NULL
          || (found = holder_candidate (self, "../../shim/esbx-holder")) != NULL)
        return found;
    }
  env = getenv ("ESBX_HOLDER");
  if (env && *env && access (env, X_OK) == 0)
    return xstrdup (env);
  path = getenv ("PATH");
  if (path == NULL)
    path = "/usr/local/bin:/usr/bin:/bin";
  {
    _cleanup_free_ char *copy = xstrdup (path);
    char *save = NULL, *d;

    for (d = strtok_r (copy, ":", &save); d; d = strtok_r (NULL, ":", &save))
      if ((found = holder_candidate (d, "esbx-holder")) != NULL)
        return found;
  }
  return esbx_make_error (err, ENOENT,
                          "esbx-holder not found next to the program, in $ESBX_HOLDER or in $PATH"),
         NULL;
}

/* Runs in the child between fork and exec: only async-signal-safe calls.  */
static void __attribute__ ((noreturn)) exec_holder (int ready, char *const *argv)
{
  sigset_t none;
  int null = open ("/dev/null", O_RDWR | O_CLOEXEC);

  sigemptyset (&none);
  sigprocmask (SIG_SETMASK, &none, NULL);
  if (null < 0 || dup2 (ready, 3) < 0 || dup2 (null, 0) < 0 || dup2 (null, 1) < 0
      || dup2 (null, 2) < 0)
    _exit (127);
  syscall (SYS_close_range, 4, ~0U, 0);
  /* A session of its own: the terminal and process group of the CLI that
     started it are not the holder's.  */
  setsid ();
  execv (argv[0], argv);
  _exit (127);
}

/* What the holder reports on its ready pipe: ESBX_HOLDER_READY when its
   namespaces are set up, or why it failed.  */
static int
wait_ready (int fd, const char *session, esbx_error_t *err)
{
  struct pollfd p = { .fd = fd, .events = POLLIN };
  struct esbx_sync_msg msg;
  esbx_error_t remote = NULL;
  int pr, r;

  pr = TEMP_FAILURE_RETRY (poll (&p, 1, READY_TIMEOUT));
  if (pr == 0)
    return esbx_make_error (err, ETIMEDOUT, "start holder of session `%s`", session);
  if (pr < 0)
    return esbx_make_error (err, errno, "start holder of session `%s`: poll", session);
  r = esbx_sync_recv (fd, &msg, &remote, err);
  esbx_sync_msg_clear (&msg);
  if (r < 0)
    return esbx_error_wrap (err, "start holder of session `%s`", session);
  if (remote)
    {
      *err = steal_pointer (&remote);
      return esbx_error_wrap (err, "start holder of session `%s`", session);
    }
  if (r == 0 || msg.type != ESBX_HOLDER_READY)
    return esbx_make_error (err, 0, "start holder of session `%s`: it exited during setup",
                            session);
  return 0;
}

static void
discard_record (int dfd)
{
  unlinkat (dfd, HOLDER_JSON, 0);
}

/* Kill the holder of INFO (SIGTERM, then SIGKILL) and wait until it is gone.  */
static void
end_holder (const struct esbx_holder_info *info)
{
  _cleanup_close_ int pidfd = -1;
  struct pollfd p;

  pidfd = pidfd_open (info->pid, 0);
  if (pidfd < 0)
    return;
  /* The pidfd pins the process: check it is still the recorded one.  */
  if (!esbx_proc_alive (info->pid, info->starttime))
    return;
  pidfd_send_signal (pidfd, SIGTERM, NULL, 0);
  p.fd = pidfd;
  p.events = POLLIN;
  if (TEMP_FAILURE_RETRY (poll (&p, 1, TERM_TIMEOUT)) > 0)
    return;
  pidfd_send_signal (pidfd, SIGKILL, NULL, 0);
  p.revents = 0;
  TEMP_FAILURE_RETRY (poll (&p, 1, TERM_TIMEOUT));
}

/* The holder's ipc namespace, pinned by the fd: containers outside the
   session cgroup are found by it once the holder is gone.  -1 when the
   holder of INFO is no longer the recorded one.  */
static int
open_ipc_ns (const struct esbx_holder_info *info)
{
  _cleanup_free_ char *path = xasprintf ("/proc/%d/ns/ipc", (int)info->pid);
  _cleanup_close_ int fd = TEMP_FAILURE_RETRY (open (path, O_RDONLY | O_CLOEXEC));

  if (fd < 0 || !esbx_proc_alive (info->pid, info->starttime))
    return -1;
  return take_fd (&fd);
}

/* --secret ROOT/secrets/NAME:FILE for each secret the session holds as a
   file: the holder reads the values itself, so that they pass through no
   pipe nor argument.  */
static void
secret_args (const struct esbx_sandbox_session *ss, struct strv *argv)
{
  const json_t *secrets = json_get (ss->rec->record, "secrets"), *a;
  size_t i;

  json_array_foreach (secrets, i, a)
    {
      const char *name = json_get_string (a, "name"), *file = json_get_string (a, "file");
      _cleanup_free_ char *src = NULL;

      if (name == NULL || file == NULL || !esbx_name_valid (name))
        continue;
      /* Injected by the egress proxy: the session holds a placeholder.  */
      if (json_get_bool (a, "inject", false) && json_get_string (a, "placeholder"))
        {
          strv_push (argv, xstrdup ("--placeholder"));
          strv_push (argv, xasprintf ("%s:%s", json_get_string (a, "placeholder"), file));
          continue;
        }
      src = esbx_secret_path (ss->store, name);
      strv_push (argv, xstrdup ("--secret"));
      strv_push (argv, xasprintf ("%s:%s", src, file));
    }
}

static int
start_holder (struct esbx_sandbox_session *ss, esbx_error_t *err)
{
  _cleanup_free_ char *binary = NULL, *dir = NULL, *merged = NULL, *cg = NULL, *rootfs = NULL;
  const struct esbx_session *s = ss->rec;
  struct esbx_cgroup_limits limits = { 0 };
  struct esbx_egress net = { .slot = -1 };
  bool egress = s->network && strcmp (s->network, "egress") == 0;
  _cleanup_close_ int rd = -1, wr = -1;
  esbx_error_t neterr = NULL;
  int fds[2], status, ret, netret = 0;
  bool launched;
  pid_t child;

  binary = find_holder_binary (err);
  if (binary == NULL)
    return -1;
  if (esbx_session_mount_record (ss->store, s, err) < 0)
    return -1;
  cg = esbx_cgroup_session_path (ss->store, ss->name);
  limits.memory = s->memory;
  limits.pids = s->pids;
  limits.cpus = s->cpus;
  if (esbx_cgroup_create (cg, &limits, err) < 0)
    return -1;
  /* A holder killed with -9 left its network: recorded and removed.  */
  if (egress)
    esbx_egress_down (ss->store, ss->name);
  if (egress && esbx_egress_prepare (ss->store, s, &net, err) < 0)
    {
      esbx_egress_clear (&net);
      esbx_egress_down (ss->store, ss->name);
      esbx_cgroup_remove (cg, NULL);
      return -1;
    }
  if (esbx_gvisor_wanted (s))
    {
      /* The table first: runsc takes the link as it starts.  */
      ret = egress ? esbx_egress_rules (s, &net, err) : 0;
      if (ret == 0)
        ret = esbx_gvisor_start (ss, cg, egress ? &net : NULL, err);
      esbx_egress_clear (&net);
      if (ret < 0)
        {
          esbx_egress_down (ss->store, ss->name);
          esbx_cgroup_remove (cg, NULL);
        }
      return ret;
    }
  dir = esbx_session_dir (ss->store, ss->name);
  merged = esbx_session_merged (ss->store, ss->name);
  if (pipe2 (fds, O_CLOEXEC) < 0)
    return esbx_make_error (err, errno, "pipe");
  rd = fds[0];
  wr = fds[1];
  {
    char *fixed[] = { binary,
                      (char *)"--session",
                      ss->name,
                      (char *)"--session-dir",
                      dir,
                      (char *)"--merged",
                      merged,
                      (char *)"--workspace",
                      s->workspace ? s->workspace : (char *)"/workspace",
                      (char *)"--network",
                      s->network ? s->network : (char *)"none",
                      (char *)"--cgroup",
                      cg,
                      (char *)"--hide",
                      ss->store->root,
                      (char *)"--ready-fd",
                      (char *)"3" };
    struct strv argv = { 0 };
    size_t i;

    for (i = 0; i < ARRAY_SIZE (fixed); i++)
      strv_push (&argv, xstrdup (fixed[i]));
    strv_push (&argv, xstrdup ("--tmpfs-size"));
    strv_push (&argv, xasprintf ("%" PRIu64, s->tmpfs_size ? s->tmpfs_size
                                                           : (uint64_t)ESBX_DEFAULT_TMPFS_SIZE));
    strv_push (&argv, xstrdup ("--shm-size"));
    strv_push (&argv,
               xasprintf ("%" PRIu64, s->shm_size ? s->shm_size : (uint64_t)ESBX_DEFAULT_SHM_SIZE));
    if (s->rootfs)
      {
        rootfs = esbx_rootfs_dir (ss->store, s->rootfs);
        strv_push (&argv, xstrdup ("--rootfs"));
        strv_push (&argv, xstrdup (rootfs));
      }
    if (net.resolv_conf)
      {
        strv_push (&argv, xstrdup ("--resolv-conf"));
        strv_push (&argv, xstrdup (net.resolv_conf));
      }
    if (net.proxy.ca_bundle)
      {
        strv_push (&argv, xstrdup ("--ca-bundle"));
        strv_push (&argv, xstrdup (net.proxy.ca_bundle));
      }
    secret_args (ss, &argv);
    {
      struct esbx_userns u;

      /* Mounted just now: the record says which range its layers show.  */
      if (esbx_userns_load (ss->store, ss->name, &u, err) < 0)
        {
          strv_free (&argv);
          return -1;
        }
      if (u.on)
        {
          strv_push (&argv, xstrdup ("--userns"));
          strv_push (&argv, xasprintf ("%" PRIu32 ":%" PRIu32, u.uid, u.count));
        }
      esbx_userns_clear (&u);
    }

    child = fork ();
    if (child < 0)
      {
        strv_free (&argv);
        return esbx_make_error (err, errno, "fork");
      }
    if (child == 0)
      exec_holder (wr, argv.v);
    strv_free (&argv);
  }
  close (take_fd (&wr));
  /* An egress network is built while the holder sets up its mounts: the
     table at once, the link once the launcher has exited (the holder's
     namespaces and record exist then).  The holder's own error, if any,
     is the one reported.  */
  if (egress)
    netret = esbx_egress_rules (s, &net, &neterr);
  TEMP_FAILURE_RETRY (waitpid (child, &status, 0));
  launched = WIFEXITED (status) && WEXITSTATUS (status) == 0;
  if (egress && netret == 0 && launched)
    {
      struct esbx_holder_info info = { 0 };

      netret = read_record (ss->dfd, &info, &neterr);
      if (netret == 0)
        netret = esbx_egress_link (s, &net, info.pid, &neterr);
      esbx_holder_info_free (&info);
    }
  ret = wait_ready (rd, ss->name, err);
  if (ret == 0 && !launched)
    ret = esbx_make_error (err, 0, "start holder of session `%s`: esbx-holder (%s) failed",
                           ss->name, binary);
  if (ret == 0 && netret < 0)
    {
      *err = steal_pointer (&neterr);
      ret = -1;
    }
  esbx_error_free (&neterr);
  esbx_egress_clear (&net);
  if (ret < 0)
    {
      struct esbx_holder_info info = { 0 };
      esbx_error_t rerr = NULL;

      if (read_record (ss->dfd, &info, &rerr) == 0)
        end_holder (&info);
      esbx_error_free (&rerr);
      esbx_holder_info_free (&info);
      discard_record (ss->dfd);
      esbx_egress_down (ss->store, ss->name);
      esbx_cgroup_remove (cg, NULL);
      return -1;
    }
  return 0;
}

int
esbx_holder_ensure (struct esbx_sandbox_session *ss, struct esbx_holder_info *info,
                    esbx_error_t *err)
{
  _cleanup_close_ int lock = -1;
  esbx_error_t rerr = NULL;
  json_t *fields;
  int ret;

  memset (info, 0, sizeof *info);
  lock = esbx_lock_at (ss->dfd, HOLDER_LOCK, true, true, err);
  if (lock < 0)
    return -1;
  if (read_record (ss->dfd, info, &rerr) == 0)
    {
      if (esbx_proc_alive (info->pid, info->starttime))
        return 0;
      /* It died without esbx_holder_stop: whatever it left goes with it.  */
      esbx_cgroup_remove (info->cgroup, NULL);
      esbx_holder_info_free (info);
      discard_record (ss->dfd);
      fields = json_new (JSON_OBJECT);
      json_set_string (fields, "reason", "holder died");
      esbx_event_append_to (ss, "holder.lost", fields, NULL);
    }
  esbx_error_free (&rerr);

  if (esbx_owner_begin (ss, err) < 0)
    return -1;
  ret = start_holder (ss, err);
  if (ret == 0)
    ret = read_record (ss->dfd, info, err);
  if (ret == 0)
    {
      fields = json_new (JSON_OBJECT);
      json_set_int (fields, "pid", info->pid);
      json_set_string (fields, "cgroup", info->cgroup);
      esbx_event_append_to (ss, "holder.start", fields, NULL);
    }
  esbx_owner_end (ss);
  return ret;
}

int
esbx_holder_stop (esbx_store_t *store, const char *session, esbx_error_t *err)
{
  struct esbx_holder_info info = { 0 };
  _cleanup_close_ int dfd = -1;
  _cleanup_close_ int lock = -1;
  _cleanup_free_ char *cg = NULL;
  esbx_error_t rerr = NULL;
  bool was_running = false;
  int ret;

  cg = esbx_cgroup_session_path (store, session);
  dfd = esbx_session_open_dir (store, session, &rerr);
  if (dfd < 0)
    {
      /* No session: only a stray cgroup or network can be left.  */
      esbx_error_free (&rerr);
      esbx_egress_down (store, session);
      return esbx_cgroup_remove (cg, err);
    }
  lock = esbx_lock_at (dfd, HOLDER_LOCK, true, true, err);
  if (lock < 0)
    return -1;
  if (read_record (dfd, &info, &rerr) == 0)
    {
      _cleanup_close_ int ipcfd = -1;

      was_running = esbx_proc_alive (info.pid, info.starttime);
      if (was_running && esbx_exists_at (dfd, ESBX_HOLDER_OUTSIDE_CGROUP))
        ipcfd = open_ipc_ns (&info);
      if (was_running)
        end_holder (&info);
      if (ipcfd >= 0 && esbx_proc_kill_ns (ipcfd, "ipc") < 0)
        {
          esbx_error_free (&rerr);
          return esbx_make_error (err, errno, "session `%s`: end its containers", session);
        }
      if (strcmp (info.cgroup, cg) != 0)
        esbx_cgroup_remove (info.cgroup, NULL);
    }
  esbx_error_free (&rerr);
  /* After the holder: its processes never see the network half gone.  */
  esbx_egress_down (store, session);
  ret = esbx_cgroup_remove (cg, err);
  if (ret == 0)
    {
      discard_record (dfd);
      unlinkat (dfd, ESBX_HOLDER_OUTSIDE_CGROUP, 0);
    }
  if (ret == 0 && was_running)
    {
      json_t *fields = json_new (JSON_OBJECT);
      json_set_int (fields, "pid", info.pid);
      esbx_event_append (store, session, "holder.stop", fields, NULL);
    }
  esbx_holder_info_free (&info);
  if (ret < 0)
    return esbx_error_wrap (err, "stop holder of session `%s`", session);
  return 0;
}
