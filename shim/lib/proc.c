#include "proc.h"
#include "utils.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static ssize_t
read_proc (pid_t pid, const char *file, char *buf, size_t size)
{
  char path[64];
  _cleanup_close_ int fd = -1;
  ssize_t r, used = 0;

  snprintf (path, sizeof path, "/proc/%d/%s", (int)pid, file);
  fd = TEMP_FAILURE_RETRY (open (path, O_RDONLY | O_CLOEXEC));
  if (fd < 0)
    return -1;
  while ((size_t)used < size - 1)
    {
      r = TEMP_FAILURE_RETRY (read (fd, buf + used, size - 1 - used));
      if (r < 0)
        return -1;
      if (r == 0)
        break;
      used += r;
    }
  buf[used] = '\0';
  return used;
}

int
esbx_proc_starttime (pid_t pid, unsigned long long *starttime)
{
  char buf[1024];
  char *p, state;
  int field;

  if (pid <= 0 || read_proc (pid, "stat", buf, sizeof buf) < 0)
    {
      errno = ESRCH;
      return -1;
    }
  /* comm may contain spaces and parentheses: fields restart after the last ')'.  */
  p = strrchr (buf, ')');
  if (p == NULL || sscanf (p + 1, " %c", &state) != 1)
    {
      errno = ESRCH;
      return -1;
    }
  if (state == 'Z' || state == 'X' || state == 'x')
    {
      errno = ESRCH;
      return -1;
    }
  /* p+2 is field 3 (state); starttime is field 22.  */
  p += 2;
  for (field = 3; field < 22 && p; field++)
    {
      p = strchr (p, ' ');
      if (p)
        p++;
    }
  if (p == NULL || sscanf (p, "%llu", starttime) != 1)
    {
      errno = ESRCH;
      return -1;
    }
  return 0;
}

bool
esbx_proc_alive (pid_t pid, unsigned long long starttime)
{
  unsigned long long now;

  return esbx_proc_starttime (pid, &now) == 0 && now == starttime;
}

pid_t
esbx_proc_ns_pid (pid_t pid)
{
  char buf[4096];
  char *line, *last;

  if (read_proc (pid, "status", buf, sizeof buf) < 0)
    return -1;
  line = strstr (buf, "\nNSpid:");
  if (line == NULL)
    return pid;
  line += strlen ("\nNSpid:");
  line[strcspn (line, "\n")] = '\0';
  last = strrchr (line, '\t');
  if (last == NULL)
    last = line;
  return (pid_t)atoi (last);
}

char *
esbx_proc_cmdline (pid_t pid)
{
  char buf[4096];
  ssize_t n, i;

  n = read_proc (pid, "cmdline", buf, sizeof buf);
  if (n < 0)
    return NULL;
  if (n == 0)
    {
      n = read_proc (pid, "comm", buf, sizeof buf);
      if (n <= 0)
        return NULL;
      buf[strcspn (buf, "\n")] = '\0';
      return xasprintf ("[%s]", buf);
    }
  while (n > 0 && buf[n - 1] == '\0')
    n--;
  for (i = 0; i < n; i++)
    if (buf[i] == '\0')
      buf[i] = ' ';
  buf[n] = '\0';
  return xstrdup (buf);
}

/* One pass: SIGKILL the members; their number.  */
static size_t
kill_members (const struct stat *ns, const char *type)
{
  _cleanup_dir_ DIR *d = opendir ("/proc");
  struct dirent *de;
  size_t n = 0;

  while (d && (de = readdir (d)) != NULL)
    {
      char path[64], *end;
      struct stat st;
      long pid = strtol (de->d_name, &end, 10);

      if (pid <= 0 || *end != '\0' || pid == (long)getpid ())
        continue;
      snprintf (path, sizeof path, "/proc/%ld/ns/%s", pid, type);
      if (stat (path, &st) < 0 || st.st_ino != ns->st_ino || st.st_dev != ns->st_dev)
        continue;
      kill ((pid_t)pid, SIGKILL);
      n++;
    }
  return n;
}

int
esbx_proc_kill_ns (int nsfd, const char *type)
{
  struct timespec pause = { 0, 25 * 1000000L };
  struct stat ns;
  int tries;

  if (fstat (nsfd, &ns) < 0)
    return -1;
  /* A zombie keeps its /proc entry but not its namespaces: a pass that
     finds nobody is the end.  */
  for (tries = 0; tries < 40; tries++)
    {
      if (kill_members (&ns, type) == 0)
        return 0;
      nanosleep (&pause, NULL);
    }
  errno = EBUSY;
  return -1;
}
