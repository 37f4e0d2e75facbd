/* Where a request goes: its host resolved by the upstream resolver (the
 * one the sessions' queries go to), and connected to when the address is
 * one the policy leads to.  Never: the host itself (any of its addresses:
 * a connection whose two ends are one address), loopback, link-local (the
 * metadata address), "this network", multicast, the egress range (other
 * sessions); a name's answer in a private range (RFC 1918, RFC 6598) only
 * when an address or CIDR entry lists it (DNS rebinding).  */
#include "proxy.h"
#include "utils.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define CONNECT_TIMEOUT_MS 10000
#define DNS_TIMEOUT_MS     3000

static bool
in_net (uint32_t a, uint32_t net, unsigned prefix)
{
  return (a & (prefix == 0 ? 0 : ~0u << (32 - prefix))) == net;
}

bool
proxy_addr_refused_always (uint32_t a)
{
  return in_net (a, 0x00000000, 8) || in_net (a, 0x7f000000, 8) || in_net (a, 0xa9fe0000, 16)
         || in_net (a, 0xe0000000, 4) || a == 0xffffffff || in_net (a, proxy.range, proxy.prefix);
}

bool
proxy_addr_private (uint32_t a)
{
  return in_net (a, 0x0a000000, 8) || in_net (a, 0x64400000, 10) || in_net (a, 0xac100000, 12)
         || in_net (a, 0xc0a80000, 16);
}

static size_t
put_name (unsigned char *q, const char *name)
{
  size_t n = 0;
  const char *p = name;

  while (*p)
    {
      const char *dot = strchr (p, '.');
      size_t l = dot ? (size_t)(dot - p) : strlen (p);
      if (l == 0 || l > 63)
        return 0;
      q[n++] = (unsigned char)l;
      memcpy (q + n, p, l);
      n += l;
      p += l + (dot ? 1 : 0);
    }
  q[n++] = 0;
  return n;
}

static const unsigned char *
skip_name (const unsigned char *p, const unsigned char *end)
{
  while (p < end)
    {
      if ((*p & 0xc0) == 0xc0)
        return p + 2 <= end ? p + 2 : NULL;
      if (*p == 0)
        return p + 1;
      p += 1 + *p;
    }
  return NULL;
}

int
proxy_resolve (const char *name, uint32_t *addrs, size_t max, size_t *n)
{
  unsigned char q[512], a[4096];
  struct sockaddr_in up = { .sin_family = AF_INET, .sin_port = htons (53) };
  _cleanup_close_ int fd = -1;
  unsigned short id;
  size_t len, qn;
  int try;

  *n = 0;
  if (strlen (name) > 253 || inet_pton (AF_INET, proxy.upstream_dns, &up.sin_addr) != 1)
    return -1;
  gnutls_rnd (GNUTLS_RND_NONCE, &id, sizeof id);
  memset (q, 0, 12);
  q[0] = (unsigned char)(id >> 8);
  q[1] = (unsigned char)id;
  q[2] = 0x01; /* RD */
  q[5] = 1;
  qn = put_name (q + 12, name);
  if (qn == 0)
    return -1;
  len = 12 + qn;
  q[len++] = 0;
  q[len++] = 1; /* A */
  q[len++] = 0;
  q[len++] = 1; /* IN */
  fd = socket (AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect (fd, (struct sockaddr *)&up, sizeof up) < 0)
    return -1;
  for (try = 0; try < 2; try++)
    {
      struct pollfd p = { .fd = fd, .events = POLLIN };
      ssize_t r;

      if (send (fd, q, len, 0) < 0)
        return -1;
      while (poll (&p, 1, DNS_TIMEOUT_MS) == 1)
        {
          const unsigned char *c, *end;
          unsigned an, i;

          r = recv (fd, a, sizeof a, 0);
          if (r < 12 || a[0] != q[0] || a[1] != q[1] || !(a[2] & 0x80))
            continue;
          end = a + r;
          an = (unsigned)a[6] << 8 | a[7];
          c = skip_name (a + 12, end);
          if (c == NULL || c + 4 > end)
            return -1;
          c += 4;
          for (i = 0; i < an && c; i++)
            {
              unsigned type, rdlen;

              c = skip_name (c, end);
              if (c == NULL || c + 10 > end)
                break;
              type = (unsigned)c[0] << 8 | c[1];
              rdlen = (unsigned)c[8] << 8 | c[9];
              c += 10;
              if (c + rdlen > end)
                break;
              if (type == 1 && rdlen == 4 && *n < max)
                addrs[(*n)++]
                    = (uint32_t)c[0] << 24 | (uint32_t)c[1] << 16 | (uint32_t)c[2] << 8 | c[3];
              c += rdlen;
            }
          return 0;
        }
    }
  return -1;
}

static int
connect_to (uint32_t addr, unsigned port)
{
  struct sockaddr_in sa = { .sin_family = AF_INET,
                            .sin_port = htons ((uint16_t)port),
                            .sin_addr.s_addr = htonl (addr) };
  struct sockaddr_in local;
  socklen_t len = sizeof local;
  struct pollfd p;
  int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), e = 0, one = 1;
  struct timeval tv = { .tv_sec = PROXY_IO_TIMEOUT };

  if (fd < 0)
    return -1;
  if (connect (fd, (struct sockaddr *)&sa, sizeof sa) < 0 && errno != EINPROGRESS)
    goto fail;
  p.fd = fd;
  p.events = POLLOUT;
  len = sizeof e;
  if (poll (&p, 1, CONNECT_TIMEOUT_MS) != 1 || getsockopt (fd, SOL_SOCKET, SO_ERROR, &e, &len) < 0
      || e != 0)
    goto fail;
  /* The host itself, through one of its own addresses.  */
  len = sizeof local;
  if (getsockname (fd, (struct sockaddr *)&local, &len) < 0
      || local.sin_addr.s_addr == sa.sin_addr.s_addr)
    goto fail;
  fcntl (fd, F_SETFL, fcntl (fd, F_GETFL) & ~O_NONBLOCK);
  setsockopt (fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt (fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  return fd;
fail:
  close (fd);
  return -1;
}

int
proxy_upstream_connect (const json_t *allow, const char *host, unsigned port, const char **reason)
{
  uint32_t addrs[16];
  struct in_addr lit;
  size_t n = 0, i;

  if (inet_pton (AF_INET, host, &lit) == 1)
    {
      addrs[0] = ntohl (lit.s_addr);
      n = 1;
    }
  else if (proxy_resolve (host, addrs, ARRAY_SIZE (addrs), &n) < 0 || n == 0)
    {
      *reason = "the name does not resolve";
      return -1;
    }
  *reason = "the destination does not answer";
  for (i = 0; i < n; i++)
    {
      int fd;

      if (proxy_addr_refused_always (addrs[i]))
        {
          *reason = "the destination's address is never reachable (loopback, link-local, "
                    "sessions)";
          continue;
        }
      if (proxy_addr_private (addrs[i]) && !esbx_egress_addr_listed (allow, addrs[i]))
        {
          *reason = "the name resolves to a private address no entry lists (DNS rebinding)";
          continue;
        }
      fd = connect_to (addrs[i], port);
      if (fd >= 0)
        return fd;
    }
  return -1;
}
