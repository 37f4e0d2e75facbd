#include "listen.h"
#include "fs.h"
#include "log.h"
#include "utils.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

/* Sockets a service manager handed over (systemd's LISTEN_FDS protocol:
   fds 3 .. 3+N-1, for the process LISTEN_PID), waiting to be claimed by
   the listener whose address they are bound to.  -1: claimed.  */
#define ADOPT_MAX 8
static int adopted[ADOPT_MAX];
static size_t n_adopted;
/* The unix socket paths of claimed ones: they belong to the service
   manager, which keeps them for the next start.  */
static char *passed_paths[ADOPT_MAX];

int
esbx_listen_adopt (esbx_error_t *err)
{
  const char *pid_s = getenv ("LISTEN_PID"), *n_s = getenv ("LISTEN_FDS");
  unsigned long pid, n;
  char *end;
  size_t i;

  if (pid_s == NULL || n_s == NULL)
    return 0;
  errno = 0;
  pid = strtoul (pid_s, &end, 10);
  if (errno || *end || pid != (unsigned long)getpid ())
    return 0; /* meant for another process */
  n = strtoul (n_s, &end, 10);
  if (errno || *end || n > ADOPT_MAX)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "LISTEN_FDS=`%s`: expected at most %d sockets", n_s, ADOPT_MAX);
  /* Not for our children (gateway exec, holders).  */
  unsetenv ("LISTEN_PID");
  unsetenv ("LISTEN_FDS");
  unsetenv ("LISTEN_FDNAMES");
  for (i = 0; i < n; i++)
    {
      int fd = 3 + (int)i, type = 0, listening = 0;
      socklen_t len = sizeof type;

      if (getsockopt (fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0 || type != SOCK_STREAM
          || getsockopt (fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) < 0 || !listening)
        return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                     "socket %d passed by the service manager is not a listening "
                                     "stream socket",
                                     fd);
      if (fcntl (fd, F_SETFD, FD_CLOEXEC) < 0
          || fcntl (fd, F_SETFL, fcntl (fd, F_GETFL) | O_NONBLOCK) < 0)
        return esbx_make_error (err, errno, "socket %d passed by the service manager", fd);
      adopted[n_adopted++] = fd;
    }
  return (int)n;
}

/* The adopted socket bound to ADDR (LEN bytes), taken out of the table; -1
   when there is none.  */
static int
claim_adopted (const struct sockaddr *addr, socklen_t len)
{
  size_t i;

  for (i = 0; i < n_adopted; i++)
    {
      struct sockaddr_storage ss;
      socklen_t sl = sizeof ss;
      int fd = adopted[i];

      if (fd < 0 || getsockname (fd, (struct sockaddr *)&ss, &sl) < 0)
        continue;
      if (ss.ss_family != addr->sa_family)
        continue;
      if (addr->sa_family == AF_UNIX ? strcmp (((struct sockaddr_un *)&ss)->sun_path,
                                               ((const struct sockaddr_un *)addr)->sun_path)
                                           != 0
                                     : sl != len || memcmp (&ss, addr, len) != 0)
        continue;
      adopted[i] = -1;
      if (addr->sa_family == AF_UNIX)
        passed_paths[i] = xstrdup (((const struct sockaddr_un *)addr)->sun_path);
      return fd;
    }
  return -1;
}

void
esbx_listen_adopted_leftovers (void)
{
  size_t i;

  for (i = 0; i < n_adopted; i++)
    if (adopted[i] >= 0)
      {
        esbx_warn ("socket %d passed by the service manager matches no listener: closed",
                   adopted[i]);
        close (adopted[i]);
        adopted[i] = -1;
      }
}

void
esbx_listen_unlink (const char *path)
{
  size_t i;

  for (i = 0; i < n_adopted; i++)
    if (passed_paths[i] && strcmp (passed_paths[i], path) == 0)
      return;
  unlink (path);
}

/* Split "HOST:PORT" / "[V6]:PORT" and resolve HOST to a loopback address
   without DNS: only literal loopback addresses and "localhost" pass.  */
static int
parse_loopback (const char *what, const char *spec, struct sockaddr_storage *ss, socklen_t *sl,
                esbx_error_t *err)
{
  _cleanup_free_ char *host = NULL;
  const char *colon, *port_s;
  unsigned long port;
  char *end;

  if (spec[0] == '[')
    {
      const char *close = strchr (spec, ']');
      if (close == NULL || close[1] != ':')
        goto bad;
      host = xstrndup (spec + 1, close - spec - 1);
      port_s = close + 2;
    }
  else
    {
      colon = strrchr (spec, ':');
      if (colon == NULL)
        goto bad;
      host = xstrndup (spec, colon - spec);
      port_s = colon + 1;
    }
  errno = 0;
  port = strtoul (port_s, &end, 10);
  if (*port_s == '\0' || *end != '\0' || errno || port == 0 || port > 65535)
    goto bad;

  memset (ss, 0, sizeof *ss);
  if (strcmp (host, "localhost") == 0 || strcmp (host, "127.0.0.1") == 0)
    {
      struct sockaddr_in *in = (struct sockaddr_in *)ss;
      in->sin_family = AF_INET;
      in->sin_port = htons ((uint16_t)port);
      in->sin_addr.s_addr = htonl (INADDR_LOOPBACK);
      *sl = sizeof *in;
      return 0;
    }
  if (strcmp (host, "::1") == 0)
    {
      struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
      in6->sin6_family = AF_INET6;
      in6->sin6_port = htons ((uint16_t)port);
      in6->sin6_addr = in6addr_loopback;
      *sl = sizeof *in6;
      return 0;
    }
  return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                               "%s `%s`: refusing a non-loopback address: only 127.0.0.1, ::1 "
                               "and localhost are allowed (no TLS, no authentication)",
                               what, spec);
bad:
  return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                               "%s `%s`: expected ADDR:PORT, e.g. 127.0.0.1:9595", what, spec);
}

int
esbx_loopback_check (const char *what, const char *spec, esbx_error_t *err)
{
  struct sockaddr_storage ss;
  socklen_t sl;

  return parse_loopback (what, spec, &ss, &sl, err);
}

int
esbx_listen_loopback (const char *what, const char *spec, esbx_error_t *err)
{
  struct sockaddr_storage ss;
  _cleanup_close_ int fd = -1;
  socklen_t sl = 0;
  int one = 1;

  if (parse_loopback (what, spec, &ss, &sl, err) < 0)
    return -1;
  fd = claim_adopted ((struct sockaddr *)&ss, sl);
  if (fd >= 0)
    return take_fd (&fd);
  fd = socket (ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return esbx_make_error (err, errno, "%s: socket", what);
  setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind (fd, (struct sockaddr *)&ss, sl) < 0)
    return esbx_make_error (err, errno, "%s: bind `%s`", what, spec);
  if (listen (fd, SOMAXCONN) < 0)
    return esbx_make_error (err, errno, "%s: listen `%s`", what, spec);
  return take_fd (&fd);
}

static int
claim_path (const char *path, esbx_error_t *err)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  _cleanup_close_ int fd = -1;
  struct stat st;

  if (lstat (path, &st) < 0)
    return errno == ENOENT ? 0 : esbx_make_error (err, errno, "stat `%s`", path);
  if (!S_ISSOCK (st.st_mode))
    return esbx_make_error (err, 0, "`%s` exists and is not a socket", path);
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return esbx_make_error (err, errno, "socket");
  memcpy (addr.sun_path, path, strlen (path) + 1);
  if (TEMP_FAILURE_RETRY (connect (fd, (struct sockaddr *)&addr, sizeof addr)) == 0)
    return esbx_make_error (err, 0, "`%s` is in use by another server", path);
  if (unlink (path) < 0 && errno != ENOENT)
    return esbx_make_error (err, errno, "remove stale socket `%s`", path);
  return 0;
}

static int
lookup_group (const char *name, gid_t *gid, esbx_error_t *err)
{
  struct group gr, *res = NULL;
  char buf[4096];
  char *end;
  unsigned long v;

  errno = 0;
  v = strtoul (name, &end, 10);
  if (*name && *end == '\0' && errno == 0)
    {
      *gid = (gid_t)v;
      return 0;
    }
  if (getgrnam_r (name, &gr, buf, sizeof buf, &res) != 0 || res == NULL)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "--gateway-group `%s`: no such group",
                                 name);
  *gid = gr.gr_gid;
  return 0;
}

int
esbx_listen_unix (const char *path, const char *group, esbx_error_t *err)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  _cleanup_free_ char *dir = NULL;
  _cleanup_close_ int fd = -1;
  gid_t gid = (gid_t)-1;
  char *slash;

  if (strlen (path) >= sizeof addr.sun_path)
    return esbx_make_error (err, 0, "socket path `%s` is too long (limit %zu bytes)", path,
                            sizeof addr.sun_path - 1);
  if (group && lookup_group (group, &gid, err) < 0)
    return -1;
  memcpy (addr.sun_path, path, strlen (path) + 1);
  /* The service manager made it, with its owner and mode.  */
  fd = claim_adopted ((struct sockaddr *)&addr, sizeof addr);
  if (fd >= 0)
    return take_fd (&fd);
  dir = xstrdup (path);
  slash = strrchr (dir, '/');
  if (slash && slash != dir)
    {
      *slash = '\0';
      if (esbx_mkdir_p (dir, 0755, err) < 0)
        return -1;
    }
  if (claim_path (path, err) < 0)
    return -1;
  memcpy (addr.sun_path, path, strlen (path) + 1);
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return esbx_make_error (err, errno, "socket");
  /* Nobody may connect between bind and chmod.  */
  {
    mode_t old = umask (0177);
    int r = bind (fd, (struct sockaddr *)&addr, sizeof addr);
    umask (old);
    if (r < 0)
      return esbx_make_error (err, errno, "bind `%s`", path);
  }
  if (group && chown (path, (uid_t)-1, gid) < 0)
    return esbx_make_error (err, errno, "chown `%s` to group `%s`", path, group);
  if (chmod (path, 0660) < 0)
    return esbx_make_error (err, errno, "chmod `%s`", path);
  /* The longest queue the kernel allows: a client that floods the socket
     with connections fills the queue before the server can refuse them,
     and a short one leaves no place for anyone else's.  */
  if (listen (fd, SOMAXCONN) < 0)
    return esbx_make_error (err, errno, "listen `%s`", path);
  return take_fd (&fd);
}
