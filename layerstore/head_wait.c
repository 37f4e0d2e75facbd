/* esbx wait PROJECT: block until the project's head moves past a layer, so
   that a script or an agent waiting for others' work does not poll.  The
   stack file is replaced by a rename whenever the head moves (or a pull
   brings the head in etcd here): an inotify watch on the project's
   directory wakes the wait.  A shared project's head is in etcd: it is
   synced once a second as well (the store may have no esbxd following it).  */
#include "internal.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <string.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>

#define SHARED_POLL_MS 1000

static int64_t
now_ms (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int
head_of (esbx_store_t *store, const char *project, char **head, esbx_error_t *err)
{
  _cleanup_strv_ char **ids = NULL;
  size_t n;

  if (esbx_project_stack (store, project, &ids, &n, err) < 0)
    return -1;
  *head = xstrdup (ids[n - 1]);
  return 0;
}

int
esbx_project_wait (esbx_store_t *store, const char *project, const char *after, int64_t timeout_ms,
                   char **head, esbx_error_t *err)
{
  _cleanup_free_ char *from = NULL, *dir = NULL;
  _cleanup_close_ int ifd = -1;
  bool shared;
  int64_t deadline;

  *head = NULL;
  if (esbx_project_check (store, project, err) < 0)
    return -1;
  shared = esbx_project_is_shared (store, project);
  if (shared && esbx_remote_sync (store, project, NULL, err) < 0)
    return esbx_error_wrap (err, "wait `%s`", project);
  if (esbx_layer_resolve (store, project, after, &from, err) < 0)
    return esbx_error_wrap (err, "wait `%s`", project);
  ifd = inotify_init1 (IN_CLOEXEC | IN_NONBLOCK);
  dir = xasprintf ("/proc/self/fd/%d/projects/%s", store->rootfd, project);
  if (ifd < 0 || inotify_add_watch (ifd, dir, IN_MOVED_TO | IN_CLOSE_WRITE) < 0)
    return esbx_make_error (err, errno, "wait `%s`: watch the project", project);
  deadline = timeout_ms > 0 ? now_ms () + timeout_ms : -1;
  for (;;)
    {
      struct pollfd p = { .fd = ifd, .events = POLLIN };
      char events[4096];
      int64_t left = deadline < 0 ? -1 : deadline - now_ms ();
      int wait_ms;

      if (head_of (store, project, head, err) < 0)
        return esbx_error_wrap (err, "wait `%s`", project);
      if (strcmp (*head, from) != 0)
        return 0;
      if (deadline >= 0 && left <= 0)
        break;
      free (*head);
      *head = NULL;
      wait_ms = left < 0 || left > INT32_MAX ? -1 : (int)left;
      if (shared && (wait_ms < 0 || wait_ms > SHARED_POLL_MS))
        wait_ms = SHARED_POLL_MS;
      if (poll (&p, 1, wait_ms) < 0 && errno != EINTR)
        return esbx_make_error (err, errno, "wait `%s`: poll", project);
      while (read (ifd, events, sizeof events) > 0)
        ;
      if (shared && esbx_remote_sync (store, project, NULL, err) < 0)
        return esbx_error_wrap (err, "wait `%s`", project);
    }
  free (*head);
  *head = NULL;
  return esbx_make_error_kind (err, ESBX_ERR_BUSY, 0,
                               "wait `%s`: the head is still `%s` after %" PRId64 " s", project,
                               from, timeout_ms / 1000);
}
