/* Unit tests of shim/lib: the session cgroup (create with limits, enter,
   usage, kill, remove) on whatever hierarchy this host has, process
   identity from /proc, the event log.  The cgroup tests need root and skip
   without it.  */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup.h"
#include "events.h"
#include "fs.h"
#include "proc.h"
#include "text.h"
#include "utils.h"

static char *
test_cgroup_name (void)
{
  return xasprintf ("esbx/unit-test-%d", (int)getpid ());
}

static void
test_cgroup_lifecycle (void **state)
{
  _cleanup_free_ char *rel = test_cgroup_name ();
  struct esbx_cgroup_limits limits = { .memory = 64 << 20, .pids = 16, .cpus = "0.5" };
  struct esbx_cgroup_usage u;
  esbx_error_t err = NULL;
  _cleanup_free_ pid_t *pids = NULL;
  size_t n = 0;
  pid_t child;
  int status;

  if (geteuid () != 0)
    skip ();
  assert_int_equal (esbx_cgroup_create (rel, &limits, &err), 0);
  assert_true (esbx_cgroup_exists (rel));
  /* Idempotent.  */
  assert_int_equal (esbx_cgroup_create (rel, &limits, &err), 0);

  child = fork ();
  assert_true (child >= 0);
  if (child == 0)
    {
      pause ();
      _exit (0);
    }
  assert_int_equal (esbx_cgroup_enter (rel, child, &err), 0);
  assert_int_equal (esbx_cgroup_pids (rel, &pids, &n, &err), 0);
  assert_int_equal (n, 1);
  assert_int_equal (pids[0], child);

  assert_int_equal (esbx_cgroup_usage (rel, &u, &err), 0);
  assert_int_equal (u.memory_limit, 64 << 20);
  assert_int_equal (u.pids_limit, 16);
  assert_int_equal (u.pids, 1);
  assert_true (u.memory != UINT64_MAX);

  assert_int_equal (esbx_cgroup_kill (rel, &err), 0);
  assert_int_equal (waitpid (child, &status, 0), child);
  assert_true (WIFSIGNALED (status) && WTERMSIG (status) == SIGKILL);
  assert_int_equal (esbx_cgroup_remove (rel, &err), 0);
  assert_false (esbx_cgroup_exists (rel));
  /* Missing is not an error.  */
  assert_int_equal (esbx_cgroup_remove (rel, &err), 0);
  assert_null (err);
}

static void
test_cgroup_bad_cpus (void **state)
{
  _cleanup_free_ char *rel = test_cgroup_name ();
  struct esbx_cgroup_limits limits = { .cpus = "lots" };
  esbx_error_t err = NULL;

  if (geteuid () != 0)
    skip ();
  assert_int_equal (esbx_cgroup_create (rel, &limits, &err), -1);
  assert_non_null (err);
  assert_int_equal (esbx_error_exit_status (err), ESBX_EXIT_USAGE);
  assert_non_null (strstr (err->msg, "invalid cpus `lots`"));
  esbx_error_free (&err);
  assert_int_equal (esbx_cgroup_remove (rel, &err), 0);
}

static void
test_cgroup_paths (void **state)
{
  esbx_store_t def = { .root = (char *)"/var/lib/esbx", .rootfd = -1 };
  esbx_store_t other = { .root = (char *)"/tmp/x", .rootfd = -1 };
  _cleanup_free_ char *a = esbx_cgroup_session_path (&def, "s1");
  _cleanup_free_ char *b = esbx_cgroup_session_path (&other, "s1");

  assert_string_equal (a, "esbx/s1");
  assert_true (esbx_has_prefix (b, "esbx/"));
  assert_int_equal (strlen (b), strlen ("esbx/12345678.s1"));
  assert_string_equal (b + 14, "s1");
}

static void
test_proc_identity (void **state)
{
  unsigned long long start, again;
  pid_t child;
  int status;

  assert_int_equal (esbx_proc_starttime (getpid (), &start), 0);
  assert_true (esbx_proc_alive (getpid (), start));
  assert_false (esbx_proc_alive (getpid (), start + 1));
  assert_int_equal (esbx_proc_ns_pid (getpid ()), getpid ());

  /* A zombie is not alive.  */
  child = fork ();
  if (child == 0)
    _exit (0);
  usleep (100000);
  assert_int_equal (esbx_proc_starttime (child, &again), -1);
  waitpid (child, &status, 0);
  assert_int_equal (esbx_proc_starttime (child, &again), -1);
}

static void
test_proc_cmdline (void **state)
{
  _cleanup_free_ char *cmd = esbx_proc_cmdline (getpid ());

  assert_non_null (cmd);
  assert_non_null (strstr (cmd, "test_cgroup"));
}

static int
count_events (const json_t *ev, void *data)
{
  int *n = data;
  const char *type = json_get_string (ev, "type");

  assert_non_null (json_get_string (ev, "time"));
  assert_string_equal (type, *n == 0 ? "one" : "two");
  (*n)++;
  return 0;
}

static void
test_events_roundtrip (void **state)
{
  char root[] = "/tmp/esbx-unit-events.XXXXXX";
  esbx_store_t store = { .root = root, .rootfd = -1 };
  _cleanup_free_ char *dir = NULL;
  esbx_error_t err = NULL;
  json_t *f = json_new (JSON_OBJECT);
  off_t off = 0;
  int n = 0;

  assert_non_null (mkdtemp (root));
  store.rootfd = open (root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  assert_true (store.rootfd >= 0);
  dir = esbx_session_dir (&store, "s1");
  assert_int_equal (esbx_mkdir_p (dir, 0755, &err), 0);
  json_set_int (f, "seq", 1);
  assert_int_equal (esbx_event_append (&store, "s1", "one", f, &err), 0);
  assert_int_equal (esbx_event_append (&store, "s1", "two", NULL, &err), 0);
  assert_int_equal (esbx_events_read (&store, "s1", &off, count_events, &n, &err), 0);
  assert_int_equal (n, 2);
  /* From the offset on, nothing new.  */
  assert_int_equal (esbx_events_read (&store, "s1", &off, count_events, &n, &err), 0);
  assert_int_equal (n, 2);
  assert_int_equal (esbx_event_append (&store, "nosuch", "x", NULL, &err), -1);
  assert_non_null (strstr (err->msg, "does not exist"));
  esbx_error_free (&err);
  close (store.rootfd);
  assert_int_equal (esbx_rm_rf_at (AT_FDCWD, root, &err), 0);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_cgroup_lifecycle), cmocka_unit_test (test_cgroup_bad_cpus),
    cmocka_unit_test (test_cgroup_paths),     cmocka_unit_test (test_proc_identity),
    cmocka_unit_test (test_proc_cmdline),     cmocka_unit_test (test_events_roundtrip),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
