/* The resolver of every egress session of the store.  A query comes from
 * a session's address (its table redirects its gateway's port 53 here
 * and limits its rate); a name some entry of the session's allow-list
 * allows is forwarded to the upstream resolver under an id of the
 * proxy's, and the answer sent back under the query's; every other name
 * is answered NXDOMAIN and logged (reqlog.c).  What a name resolves to
 * opens nothing: the kernel lets a session reach only the proxy and its
 * address entries, and the proxy resolves for itself (upstream.c).  */
#include "proxy.h"
#include "utils.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define PENDING_MAX     4096
#define PENDING_SECONDS 5

struct pending
{
  bool used;
  struct sockaddr_in peer;
  unsigned char id[2];
  time_t when;
};
static struct pending pending[PENDING_MAX];

/* The question's name of query Q (LEN bytes), lower-cased and dotted.  */
static int
question (const unsigned char *q, size_t len, char *name, size_t *qend)
{
  size_t p = 12, n = 0;

  if (len < 12 + 5 || (q[2] & 0x80) || q[4] != 0 || q[5] != 1)
    return -1;
  while (p < len && q[p] != 0)
    {
      size_t l = q[p];
      size_t i;

      if (l > 63 || p + 1 + l > len || n + l + 1 > 254)
        return -1;
      if (n)
        name[n++] = '.';
      for (i = 0; i < l; i++)
        {
          unsigned char ch = q[p + 1 + i];
          if (!(isalnum (ch) || ch == '-' || ch == '_'))
            return -1;
          name[n++] = (char)tolower (ch);
        }
      p += 1 + l;
    }
  if (p + 5 > len || n == 0)
    return -1;
  name[n] = '\0';
  *qend = p + 5;
  return 0;
}

static void
nxdomain (int fd, const unsigned char *q, size_t qend, const struct sockaddr_in *peer)
{
  unsigned char r[512];

  if (qend > sizeof r)
    return;
  memcpy (r, q, qend);
  r[2] = (unsigned char)(0x80 | (q[2] & 0x01)); /* QR, RD as asked */
  r[3] = 0x80 | 3;                              /* RA, NXDOMAIN */
  memset (r + 6, 0, 6);
  sendto (fd, r, qend, 0, (const struct sockaddr *)peer, sizeof *peer);
}

void *
proxy_dns_loop (void *fdp)
{
  int fd = *(int *)fdp, up;
  struct sockaddr_in upstream = { .sin_family = AF_INET, .sin_port = htons (53) };
  unsigned next = 0;

  up = socket (AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  inet_pton (AF_INET, proxy.upstream_dns, &upstream.sin_addr);
  if (up >= 0)
    connect (up, (struct sockaddr *)&upstream, sizeof upstream);
  for (;;)
    {
      struct pollfd p[2] = { { .fd = fd, .events = POLLIN }, { .fd = up, .events = POLLIN } };
      unsigned char buf[4096];
      struct sockaddr_in peer;
      socklen_t plen = sizeof peer;
      ssize_t n;

      if (poll (p, 2, 1000) <= 0)
        continue;
      if (p[1].revents & POLLIN)
        {
          n = recv (up, buf, sizeof buf, 0);
          if (n >= 12)
            {
              unsigned id = ((unsigned)buf[0] << 8 | buf[1]) % PENDING_MAX;
              struct pending *e = &pending[id];

              if (e->used && time (NULL) - e->when <= PENDING_SECONDS)
                {
                  buf[0] = e->id[0];
                  buf[1] = e->id[1];
                  sendto (fd, buf, (size_t)n, 0, (struct sockaddr *)&e->peer, sizeof e->peer);
                }
              e->used = false;
            }
        }
      if (p[0].revents & POLLIN)
        {
          struct proxy_client cl = { .slot = -1 };
          esbx_error_t err = NULL;
          char name[256];
          size_t qend;

          n = recvfrom (fd, buf, sizeof buf, 0, (struct sockaddr *)&peer, &plen);
          if (n < 12 || peer.sin_family != AF_INET)
            continue;
          if (question (buf, (size_t)n, name, &qend) < 0)
            continue;
          if (proxy_client_lookup (ntohl (peer.sin_addr.s_addr), &cl, false, &err) < 0)
            {
              esbx_error_free (&err);
              continue;
            }
          if (!esbx_egress_name_allowed (cl.allow, name))
            {
              nxdomain (fd, buf, qend, &peer);
              proxy_log_refused_name (cl.slot, name);
            }
          else
            {
              unsigned id;
              size_t tries;
              struct pending *e = NULL;

              for (tries = 0; tries < PENDING_MAX; tries++)
                {
                  id = next++ % PENDING_MAX;
                  if (!pending[id].used || time (NULL) - pending[id].when > PENDING_SECONDS)
                    {
                      e = &pending[id];
                      break;
                    }
                }
              if (e)
                {
                  e->used = true;
                  e->peer = peer;
                  e->id[0] = buf[0];
                  e->id[1] = buf[1];
                  e->when = time (NULL);
                  buf[0] = (unsigned char)(id >> 8);
                  buf[1] = (unsigned char)id;
                  send (up, buf, (size_t)n, 0);
                }
            }
          proxy_client_free (&cl);
        }
    }
  return NULL;
}
