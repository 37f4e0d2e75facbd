#include "owner.h"
#include "fs.h"
#include "proc.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#define OWNERS_DIR "owners"

int
esbx_owner_begin (struct esbx_sandbox_session *ss, esbx_error_t *err)
{
  _cleanup_close_ int fd = -1;
  unsigned long long start = 0;
  _cleanup_free_ char *name = NULL, *suffix = NULL;

  if (ss->owners > 0)
    {
      ss->owners++;
      return 0;
    }
  if (mkdirat (ss->dfd, OWNERS_DIR, 0700) < 0 && errno != EEXIST)
    return esbx_make_error (err, errno, "mkdir `%s` of session `%s`", OWNERS_DIR, ss->name);
  if (esbx_proc_starttime (getpid (), &start) < 0)
    return esbx_make_error (err, errno, "read start time of self");
  /* Unique per operation: one process may hold several sessions, or the
     same session twice (esbxd).  */
  suffix = esbx_random_hex (4);
  name = xasprintf (OWNERS_DIR "/%d.%llu.%s", (int)getpid (), start, suffix);
  fd = TEMP_FAILURE_RETRY (
      openat (ss->dfd, name, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (fd < 0)
    return esbx_make_error (err, errno, "create `%s` of session `%s`", name, ss->name);
  ss->marker = steal_pointer (&name);
  ss->owners = 1;
  return 0;
}

void
esbx_owner_end (struct esbx_sandbox_session *ss)
{
  if (ss->owners == 0 || --ss->owners > 0)
    return;
  unlinkat (ss->dfd, ss->marker, 0);
  free (steal_pointer (&ss->marker));
}

void
esbx_owner_scan (esbx_store_t *store, const char *session, size_t *alive, size_t *dead,
                 bool remove_dead)
{
  _cleanup_close_ int dfd = -1;
  _cleanup_strv_ char **names = NULL;
  esbx_error_t lerr = NULL;
  char **n;

  *alive = *dead = 0;
  dfd = esbx_session_open_dir (store, session, NULL);
  if (dfd < 0)
    return;
  names = esbx_list_dir_at (dfd, OWNERS_DIR, &lerr);
  esbx_error_free (&lerr);
  if (names == NULL)
    return;
  for (n = names; *n; n++)
    {
      _cleanup_free_ char *rel = xasprintf (OWNERS_DIR "/%s", *n);
      int pid;
      unsigned long long start;

      if (sscanf (*n, "%d.%llu", &pid, &start) != 2)
        continue;
      if (esbx_proc_alive (pid, start))
        {
          (*alive)++;
          continue;
        }
      (*dead)++;
      if (remove_dead)
        unlinkat (dfd, rel, 0);
    }
}
