/* esbx-proxy: see proxy.h.  Started by esbx_egress_proxy_ensure
   (shim/lib/egress/proxy_launch.c) as
     esbx-proxy --store ROOT --dir DIR --ready-fd N
   DIR (ESBX_EGRESS_RUN/proxy/KEY) holds its files: `lock`, held for its
   whole life (one proxy per store), `start.lock`, held by whoever starts
   it and by the proxy while it decides to end, `ports.json` (its ports and
   pid) and `bundle.pem` (the host's CAs and the store's, for sessions).  */
#include "proxy.h"
#include "egress.h"
#include "fs.h"
#include "sync.h"
#include "thread.h"
#include "utils.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_RANGE "10.233.0.0/16"
#define IDLE_SECONDS  2
#define CONN_STACK    (256u * 1024)

struct proxy_global proxy;
static int dir_fd = -1;
static const char *dir_path;

static void __attribute__ ((noreturn)) die (esbx_error_t *err, int ready_fd)
{
  if (ready_fd >= 0)
    esbx_error_send (ready_fd, err);
  esbx_error_report (err, stderr, "esbx-proxy");
  exit (1);
}

static int
listen_on (int type, int want, int *port, esbx_error_t *err)
{
  struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl (INADDR_ANY) };
  socklen_t len = sizeof sa;
  int one = 1, fd = socket (AF_INET, type | SOCK_CLOEXEC, 0);

  if (fd < 0)
    return esbx_make_error (err, errno, "socket");
  setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sa.sin_port = htons ((uint16_t)want);
  if (bind (fd, (struct sockaddr *)&sa, sizeof sa) < 0)
    {
      /* The port of an earlier run is taken: any.  */
      sa.sin_port = 0;
      if (want == 0 || bind (fd, (struct sockaddr *)&sa, sizeof sa) < 0)
        {
          close (fd);
          return esbx_make_error (err, errno, "bind the proxy's socket");
        }
    }
  if (type == SOCK_STREAM && listen (fd, 1024) < 0)
    {
      close (fd);
      return esbx_make_error (err, errno, "listen");
    }
  getsockname (fd, (struct sockaddr *)&sa, &len);
  *port = ntohs (sa.sin_port);
  return fd;
}

static int
egress_range (esbx_error_t *err)
{
  const char *spec = getenv ("ESBX_EGRESS_RANGE");
  struct esbx_egress_rule r;

  if (spec == NULL || *spec == '\0')
    spec = DEFAULT_RANGE;
  if (esbx_egress_rule_parse (spec, &r, err) < 0)
    return -1;
  proxy.range = r.addr;
  proxy.prefix = r.prefix;
  esbx_egress_rule_clear (&r);
  return 0;
}

int
proxy_slot_of (uint32_t addr)
{
  uint32_t mask = proxy.prefix == 0 ? 0 : ~0u << (32 - proxy.prefix);

  if ((addr & mask) != proxy.range || (addr - proxy.range) % 4 != 2)
    return -1;
  return (int)((addr - proxy.range) / 4);
}

static void
upstream_dns (void)
{
  const char *env = getenv ("ESBX_EGRESS_UPSTREAM");
  _cleanup_free_ char *buf = NULL;
  esbx_error_t e = NULL;
  char *line, *save = NULL;
  size_t len;

  snprintf (proxy.upstream_dns, sizeof proxy.upstream_dns, "127.0.0.53");
  if (env && *env)
    {
      snprintf (proxy.upstream_dns, sizeof proxy.upstream_dns, "%s", env);
      return;
    }
  if (esbx_read_file_at (AT_FDCWD, "/etc/resolv.conf", 64 * 1024, &buf, &len, &e) < 0)
    {
      esbx_error_free (&e);
      return;
    }
  for (line = strtok_r (buf, "\n", &save); line; line = strtok_r (NULL, "\n", &save))
    {
      char addr[64];
      struct in_addr in;

      if (sscanf (line, " nameserver %63s", addr) == 1 && inet_pton (AF_INET, addr, &in) == 1)
        {
          snprintf (proxy.upstream_dns, sizeof proxy.upstream_dns, "%s", addr);
          return;
        }
    }
}

/* Whether some slot of ESBX_EGRESS_RUN belongs to this store.  */
static bool
store_has_slots (void)
{
  _cleanup_strv_ char **names = NULL;
  _cleanup_close_ int dfd = -1;
  esbx_error_t e = NULL;
  char **p;

  dfd = TEMP_FAILURE_RETRY (open (ESBX_EGRESS_RUN, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dfd < 0)
    return false;
  names = esbx_list_dir_at (dfd, ".", &e);
  esbx_error_free (&e);
  for (p = names; p && *p; p++)
    {
      _cleanup_json_ json_t *rec = NULL;
      const char *root;
      size_t n = strlen (*p);

      if (n < 6 || strcmp (*p + n - 5, ".json") != 0 || (*p)[0] < '0' || (*p)[0] > '9')
        continue;
      rec = json_parse_file_at (dfd, *p, &e);
      esbx_error_free (&e);
      root = rec ? json_get_string (rec, "store") : NULL;
      if (root && strcmp (root, proxy.store->root) == 0)
        return true;
    }
  return false;
}

/* Ends the process once the store has had no egress network for
   IDLE_SECONDS: under start.lock, so that no launcher finds it running
   and counts on it while it goes.  */
static void *
idle_loop (void *unused)
{
  int idle = 0;

  (void)unused;
  for (;;)
    {
      sleep (1);
      idle = store_has_slots () ? 0 : idle + 1;
      if (idle < IDLE_SECONDS)
        continue;
      {
        esbx_error_t e = NULL;
        int lock = esbx_lock_at (dir_fd, "start.lock", true, true, &e);

        esbx_error_free (&e);
        if (!store_has_slots ())
          {
            /* No session binds the bundle any more.  start.lock goes
               while held, then the directory: a starter that waited on
               it finds it has no name and starts again
               (proxy_launch.c); one that made a new start.lock in the
               meantime keeps the directory.  */
            unlinkat (dir_fd, "ports.json", 0);
            unlinkat (dir_fd, "bundle.pem", 0);
            unlinkat (dir_fd, "proxy.log", 0);
            unlinkat (dir_fd, "lock", 0);
            unlinkat (dir_fd, "start.lock", 0);
            rmdir (dir_path);
            _exit (0);
          }
        if (lock >= 0)
          close (lock);
        idle = 0;
      }
    }
  return NULL;
}

static void *
serve (void *p)
{
  int fd = (int)(intptr_t)p;
  struct sockaddr_in peer, local;
  socklen_t len = sizeof peer, llen = sizeof local;
  struct proxy_client cl = { .slot = -1 };
  struct conn c = { .fd = fd };
  struct timeval tv = { .tv_sec = PROXY_IO_TIMEOUT };
  esbx_error_t err = NULL;
  int one = 1;

  setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt (fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  /* A head and a body are two writes: neither waits for the other's ACK.  */
  setsockopt (fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  /* The session's own address, to its gateway (the redirect of its
     table), never another interface's.  */
  if (getpeername (fd, (struct sockaddr *)&peer, &len) < 0 || peer.sin_family != AF_INET
      || getsockname (fd, (struct sockaddr *)&local, &llen) < 0
      || ntohl (local.sin_addr.s_addr) != ntohl (peer.sin_addr.s_addr) - 1
      || proxy_client_lookup (ntohl (peer.sin_addr.s_addr), &cl, true, &err) < 0)
    {
      /* Not one of this store's sessions: nothing to say to it.  */
      esbx_error_free (&err);
      conn_close (&c);
      return NULL;
    }
  proxy_http (&cl, &c, NULL, 0, NULL);
  conn_close (&c);
  proxy_client_free (&cl);
  return NULL;
}

int
main (int argc, char **argv)
{
  static const struct option opts[] = { { "store", required_argument, NULL, 's' },
                                        { "dir", required_argument, NULL, 'd' },
                                        { "ready-fd", required_argument, NULL, 'r' },
                                        { NULL, 0, NULL, 0 } };
  const char *root = NULL, *dir = NULL;
  _cleanup_json_ json_t *old = NULL, *rec = NULL;
  _cleanup_free_ char *text = NULL;
  esbx_error_t err = NULL;
  int c, ready_fd = -1, lock, http_fd, dns_fd, http_port = 0, dns_port = 0;
  int64_t v;
  size_t len;

  while ((c = getopt_long (argc, argv, "", opts, NULL)) != -1)
    switch (c)
      {
      case 's':
        root = optarg;
        break;
      case 'd':
        dir = optarg;
        break;
      case 'r':
        ready_fd = atoi (optarg);
        break;
      default:
        fputs ("usage: esbx-proxy --store ROOT --dir DIR [--ready-fd N]\n"
               "esbx-proxy is started by esbx; it is not meant to be run by hand.\n",
               stderr);
        return 2;
      }
  if (root == NULL || dir == NULL)
    return 2;
  signal (SIGPIPE, SIG_IGN);
  if (esbx_store_open (root, &proxy.store, &err) < 0 || egress_range (&err) < 0)
    die (&err, ready_fd);
  dir_path = dir;
  dir_fd = TEMP_FAILURE_RETRY (open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
  if (dir_fd < 0)
    {
      esbx_make_error (&err, errno, "open `%s`", dir);
      die (&err, ready_fd);
    }
  lock = esbx_lock_at (dir_fd, "lock", true, false, &err);
  if (lock < 0)
    die (&err, ready_fd);
  upstream_dns ();
  {
    const char *ca = getenv ("ESBX_EGRESS_UPSTREAM_CA");
    proxy.upstream_ca = ca && *ca ? xstrdup (ca) : NULL;
  }
  old = json_parse_file_at (dir_fd, "ports.json", &err);
  esbx_error_free (&err);
  if (old && json_get_int (old, "http", &v))
    http_port = (int)v;
  if (old && json_get_int (old, "dns", &v))
    dns_port = (int)v;
  if (proxy_tls_init (dir_fd, &err) < 0)
    die (&err, ready_fd);
  if ((http_fd = listen_on (SOCK_STREAM, http_port, &http_port, &err)) < 0
      || (dns_fd = listen_on (SOCK_DGRAM, dns_port, &dns_port, &err)) < 0)
    die (&err, ready_fd);
  rec = json_new (JSON_OBJECT);
  json_set_int (rec, "http", http_port);
  json_set_int (rec, "dns", dns_port);
  json_set_int (rec, "pid", getpid ());
  json_set_string (rec, "store", root);
  text = json_serialize (rec, true, &len);
  if (esbx_write_file_atomic_at (dir_fd, "ports.json", text, len, 0644, &err) < 0)
    die (&err, ready_fd);
  {
    struct esbx_thread dns = { 0 }, idle = { 0 };
    static int dns_sock;

    dns_sock = dns_fd;
    if (esbx_thread_start (&dns, proxy_dns_loop, &dns_sock, "resolver", &err) < 0
        || esbx_thread_start (&idle, idle_loop, NULL, "idle", &err) < 0)
      die (&err, ready_fd);
  }
  if (ready_fd >= 0)
    {
      esbx_sync_send (ready_fd, 'R', http_port, NULL);
      close (ready_fd);
    }
  for (;;)
    {
      int fd = accept4 (http_fd, NULL, NULL, SOCK_CLOEXEC);

      if (fd < 0)
        {
          if (errno == EMFILE || errno == ENFILE || errno == ENOMEM)
            usleep (10000);
          continue;
        }
      if (esbx_thread_detached (serve, (void *)(intptr_t)fd, CONN_STACK, "connection", &err) < 0)
        {
          esbx_error_free (&err);
          close (fd);
        }
    }
}
