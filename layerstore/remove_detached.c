/* Removing a directory of the store in a process of its own
   (esbx_store_detach_removals): the caller goes on at once.  The child
   holds an exclusive flock on the directory until it is gone, so gc, which
   skips locked temp entries, does not remove it at the same time; it keeps
   no other descriptor of its parent (locks held there must not outlive
   the verb) and is in a session of its own, with standard streams on
   /dev/null (whoever reads the verb's output does not wait for it).  */
#include "internal.h"
#include "fs.h"
#include "thread.h"
#include "utils.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

void
esbx_store_detach_removals (esbx_store_t *store)
{
  store->detach_removals = true;
}

static void __attribute__ ((noreturn)) remover (int rootfd, int dirfd, const char *rel)
{
  esbx_error_t ignored = NULL;
  int null = open ("/dev/null", O_RDWR | O_CLOEXEC);
  int lo = rootfd < dirfd ? rootfd : dirfd, hi = rootfd < dirfd ? dirfd : rootfd;

  setsid ();
  if (null >= 0)
    {
      dup2 (null, 0);
      dup2 (null, 1);
      dup2 (null, 2);
    }
  /* Every descriptor but the two it works with.  */
  close_range (3, lo - 1, 0);
  close_range (lo + 1, hi - 1, 0);
  close_range (hi + 1, ~0u, 0);
  _exit (esbx_rm_rf_at (rootfd, rel, &ignored) < 0 ? 1 : 0);
}

int
esbx_rm_rf_detached (esbx_store_t *store, const char *rel)
{
  _cleanup_close_ int dirfd = -1;
  pid_t pid;
  int status;

  /* fork copies only the caller's thread, and the child allocates: only a
     process that runs no other may.  */
  if (!store->detach_removals || esbx_threads_running () > 0)
    return 0;
  dirfd = TEMP_FAILURE_RETRY (
      openat (store->rootfd, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (dirfd < 0 || esbx_lock_fd (dirfd, true, false, rel, NULL) < 0)
    return 0;
  /* Twice, so that the remover is nobody's child to wait for.  */
  pid = fork ();
  if (pid < 0)
    return 0;
  if (pid == 0)
    {
      pid_t grandchild = fork ();
      if (grandchild == 0)
        remover (store->rootfd, dirfd, rel);
      _exit (grandchild < 0 ? 1 : 0);
    }
  if (TEMP_FAILURE_RETRY (waitpid (pid, &status, 0)) < 0 || !WIFEXITED (status)
      || WEXITSTATUS (status) != 0)
    {
      /* No remover: the caller removes it (our lock goes with DIRFD).  */
      return 0;
    }
  return 1;
}
