/* CONNECT HOST:PORT.  The policy decides the host and port; then the
 * tunnel's first bytes must be a TLS ClientHello whose server name is HOST
 * (no name for an address), so that an allowed name cannot carry a
 * connection meant for another (SNI differs) and an address nobody
 * allowed cannot be reached through one.  Then either the bytes are
 * relayed as they are, or, for a session holding injected secrets or a
 * host whose entries name methods or paths, the TLS is ended here with a
 * certificate of the store's CA (tls.c) and each request inside is
 * decided as a plain one (http.c).  */
#include "proxy.h"
#include "thread.h"
#include "utils.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define RECORD_MAX (16384 + 5)

static uint32_t
be (const unsigned char *p, size_t n)
{
  uint32_t v = 0;
  size_t i;

  for (i = 0; i < n; i++)
    v = v << 8 | p[i];
  return v;
}

/* The server name of the ClientHello in REC (LEN bytes, a whole record):
   1 with NAME filled, 0 when it has none, -1 when REC is no ClientHello.  */
static int
client_hello_sni (const unsigned char *rec, size_t len, char *name, size_t max)
{
  const unsigned char *p = rec + 5, *end = rec + len, *ext_end;
  size_t n;

  if (len < 5 + 4 + 2 + 32 + 1 || rec[0] != 0x16 || p[0] != 0x01)
    return -1;
  n = be (p + 1, 3);
  if (p + 4 + n < end)
    end = p + 4 + n;
  p += 4 + 2 + 32;
  /* session id, cipher suites, compression methods */
  if (p + 1 > end || p + 1 + *p > end)
    return -1;
  p += 1 + *p;
  if (p + 2 > end || p + 2 + be (p, 2) > end)
    return -1;
  p += 2 + be (p, 2);
  if (p + 1 > end || p + 1 + *p > end)
    return -1;
  p += 1 + *p;
  if (p == end)
    return 0;
  if (p + 2 > end)
    return -1;
  ext_end = p + 2 + be (p, 2);
  if (ext_end > end)
    return -1;
  for (p += 2; p + 4 <= ext_end; p += 4 + be (p + 2, 2))
    {
      uint32_t type = be (p, 2), elen = be (p + 2, 2);
      const unsigned char *e = p + 4;

      if (e + elen > ext_end)
        return -1;
      if (type != 0)
        continue;
      /* server_name: list length, type 0 (host_name), name length, name.  */
      if (elen < 5 || e[2] != 0 || be (e + 3, 2) + 5 > elen || be (e + 3, 2) >= max)
        return -1;
      n = be (e + 3, 2);
      memcpy (name, e + 5, n);
      name[n] = '\0';
      return 1;
    }
  return 0;
}

static int
read_exact (struct conn *c, unsigned char *buf, size_t n)
{
  size_t got = 0;

  while (got < n)
    {
      ssize_t r = conn_read (c, buf + got, n - got);
      if (r <= 0)
        return -1;
      got += (size_t)r;
    }
  return 0;
}

static void
relay (int a, int b, uint64_t *a_to_b, uint64_t *b_to_a)
{
  struct pollfd p[2] = { { .fd = a, .events = POLLIN }, { .fd = b, .events = POLLIN } };
  char buf[16384];
  bool open_a = true, open_b = true;

  while (open_a || open_b)
    {
      int r = poll (p, 2, PROXY_IO_TIMEOUT * 1000);
      int i;

      if (r <= 0)
        return;
      for (i = 0; i < 2; i++)
        {
          ssize_t n;
          int to = i == 0 ? b : a;

          if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
          n = TEMP_FAILURE_RETRY (read (p[i].fd, buf, sizeof buf));
          if (n <= 0)
            {
              shutdown (to, SHUT_WR);
              p[i].fd = -1;
              *(i == 0 ? &open_a : &open_b) = false;
              continue;
            }
          {
            struct conn c = { .fd = to };
            if (conn_write_all (&c, buf, (size_t)n) < 0)
              return;
          }
          *(i == 0 ? a_to_b : b_to_a) += (uint64_t)n;
        }
    }
}

struct upstream_tls
{
  struct conn *up;
  const char *host;
  int ret;
  esbx_error_t err;
};

static void *
upstream_handshake (void *p)
{
  struct upstream_tls *u = p;

  u->ret = proxy_tls_connect (u->up, u->host, &u->err);
  return NULL;
}

static bool
host_valid (const char *h)
{
  const char *p;

  if (*h == '\0' || strlen (h) > 253)
    return false;
  for (p = h; *p; p++)
    if (!(isalnum ((unsigned char)*p) || *p == '-' || *p == '.'))
      return false;
  return true;
}

void
proxy_tunnel (struct proxy_client *cl, struct conn *from, struct http_head *h)
{
  _cleanup_free_ char *host = NULL;
  struct proxy_request_log r = { .method = "CONNECT", .path = "" };
  struct esbx_egress_verdict v;
  struct conn up = { .fd = -1 };
  unsigned char rec[RECORD_MAX];
  char sni[256];
  const char *colon = strrchr (h->line[1], ':'), *reason = NULL;
  struct in_addr lit;
  unsigned long port;
  char *end, *p;
  bool literal, intercept;
  int has_sni;
  size_t len;

  if (colon == NULL || (port = strtoul (colon + 1, &end, 10)) == 0 || *end || port > 65535)
    {
      http_reply (from, 400, "expected CONNECT HOST:PORT");
      return;
    }
  host = xstrndup (h->line[1], (size_t)(colon - h->line[1]));
  for (p = host; *p; p++)
    *p = (char)tolower ((unsigned char)*p);
  r.host = host;
  r.port = (unsigned)port;
  if (!host_valid (host))
    {
      http_reply (from, 400, "bad host");
      return;
    }
  literal = inet_pton (AF_INET, host, &lit) == 1;
  esbx_egress_decide (cl->allow, host, (unsigned)port, NULL, NULL, &v);
  r.rule = v.rule;
  if (!v.allowed)
    {
      http_reply (from, 403, v.reason);
      r.status = 403;
      r.verdict = "refused";
      r.reason = v.reason;
      proxy_log_request (cl->slot, &r);
      return;
    }
  intercept = v.inspect || cl->has_inject;
  {
    static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
    if (conn_write_all (from, ok, sizeof ok - 1) < 0)
      return;
  }
  /* The ClientHello, read ahead and kept for whoever reads next.  */
  if (read_exact (from, rec, 5) < 0 || rec[0] != 0x16 || (len = be (rec + 3, 2)) > RECORD_MAX - 5
      || read_exact (from, rec + 5, len) < 0)
    reason = "the tunnel does not start with TLS";
  else if ((has_sni = client_hello_sni (rec, len + 5, sni, sizeof sni)) < 0)
    reason = "the tunnel does not start with a TLS ClientHello";
  else if (has_sni == 0 && !literal)
    reason = "the TLS ClientHello names no server";
  else if (has_sni == 1 && strcasecmp (sni, host) != 0)
    reason = "the TLS server name is not the CONNECT host";
  if (reason)
    {
      r.status = 403;
      r.verdict = "refused";
      r.reason = reason;
      proxy_log_request (cl->slot, &r);
      return;
    }
  from->pending = xmalloc (len + 5);
  memcpy (from->pending, rec, len + 5);
  from->pending_len = len + 5;
  from->pending_off = 0;
  up.fd = proxy_upstream_connect (cl->allow, host, (unsigned)port, &reason);
  if (up.fd < 0)
    {
      r.status = 502;
      r.verdict = "refused";
      r.reason = reason;
      proxy_log_request (cl->slot, &r);
      return;
    }
  if (intercept)
    {
      struct upstream_tls u = { .up = &up, .host = host };
      struct esbx_thread t = { 0 };
      esbx_error_t err = NULL;
      int ok;

      /* Both handshakes at once: the destination's does not wait for the
         session's.  */
      esbx_thread_start_or_run (&t, upstream_handshake, &u);
      ok = proxy_tls_accept (from, host, &err);
      esbx_thread_join (&t);
      if (ok == 0 && u.ret < 0)
        {
          err = u.err;
          u.err = NULL;
          ok = -1;
        }
      esbx_error_free (&u.err);
      if (ok < 0)
        {
          r.status = 502;
          r.verdict = "refused";
          r.reason = err && err->msg ? err->msg : "TLS failed";
          r.intercepted = true;
          proxy_log_request (cl->slot, &r);
          esbx_error_free (&err);
          conn_close (&up);
          return;
        }
      proxy_http (cl, from, host, (unsigned)port, &up);
      conn_close (&up);
      return;
    }
  {
    struct conn c = { .fd = up.fd };
    if (conn_write_all (&c, from->pending, from->pending_len) < 0)
      {
        conn_close (&up);
        return;
      }
    r.sent = from->pending_len;
  }
  relay (from->fd, up.fd, &r.sent, &r.received);
  r.status = 200;
  r.verdict = "allowed";
  proxy_log_request (cl->slot, &r);
  conn_close (&up);
}
