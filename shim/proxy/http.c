/* One HTTP/1.1 request through the proxy: a plain forward-proxy request
 * (absolute-form target) or one read from an intercepted TLS tunnel
 * (origin-form, its Host the tunnel's).  Its method, host and path are
 * decided by the session's allow-list (esbx_egress_decide), its secrets
 * put in (inject.c), and it goes out with `Connection: close`: one request
 * per connection, so that no second request ever passes undecided.  The
 * body is relayed exactly as its Content-Length or chunked coding says; a
 * request with both, or another transfer coding, is refused (no request
 * smuggling past the decision).  Every request is logged without its
 * query, body or credentials (reqlog.c).  */
#include "proxy.h"
#include "utils.h"

#include <ctype.h>
#include <errno.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define RELAY_BUF (16u * 1024)

ssize_t
conn_read (struct conn *c, void *buf, size_t len)
{
  int one = 1;
  ssize_t r;

  if (c->pending_off < c->pending_len)
    {
      size_t n = c->pending_len - c->pending_off;
      if (n > len)
        n = len;
      memcpy (buf, c->pending + c->pending_off, n);
      c->pending_off += n;
      return (ssize_t)n;
    }
  if (c->tls)
    {
      do
        r = gnutls_record_recv (c->tls, buf, len);
      while (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED);
      if (r == GNUTLS_E_PREMATURE_TERMINATION)
        return 0;
      return r < 0 ? -1 : r;
    }
  /* As tls.c's pull: no delayed ACK for a peer's second segment.  */
  setsockopt (c->fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one);
  return TEMP_FAILURE_RETRY (read (c->fd, buf, len));
}

int
conn_write_all (struct conn *c, const void *buf, size_t len)
{
  const char *p = buf;

  while (len > 0)
    {
      ssize_t w;

      if (c->tls)
        {
          do
            w = gnutls_record_send (c->tls, p, len);
          while (w == GNUTLS_E_AGAIN || w == GNUTLS_E_INTERRUPTED);
        }
      else
        w = TEMP_FAILURE_RETRY (send (c->fd, p, len, MSG_NOSIGNAL));
      if (w <= 0)
        return -1;
      p += w;
      len -= (size_t)w;
    }
  return 0;
}

void
conn_close (struct conn *c)
{
  if (c->tls)
    {
      gnutls_bye (c->tls, GNUTLS_SHUT_WR);
      gnutls_deinit (c->tls);
      c->tls = NULL;
    }
  if (c->fd >= 0)
    close (c->fd);
  c->fd = -1;
  free (c->pending);
  c->pending = NULL;
  c->pending_len = c->pending_off = 0;
  free (c->raw);
  c->raw = NULL;
  c->raw_len = c->raw_off = 0;
}

static void
push_back (struct conn *c, const char *data, size_t len)
{
  char *n = xmalloc (len + (c->pending_len - c->pending_off) + 1);

  memcpy (n, data, len);
  memcpy (n + len, c->pending + c->pending_off, c->pending_len - c->pending_off);
  len += c->pending_len - c->pending_off;
  free (c->pending);
  c->pending = n;
  c->pending_len = len;
  c->pending_off = 0;
}

static bool
token_char (char ch)
{
  return isalnum ((unsigned char)ch) || strchr ("!#$%&'*+-.^_`|~", ch) != NULL;
}

int
http_read_head (struct conn *c, struct http_head *h, bool response)
{
  size_t cap = 4096, len = 0, i, n;
  char *end = NULL, *line, *next;

  memset (h, 0, sizeof *h);
  h->buf = xmalloc (cap + 1);
  while (end == NULL)
    {
      ssize_t r;

      if (len == cap)
        {
          if (cap >= PROXY_HEAD_MAX)
            return -1;
          cap *= 2;
          h->buf = xrealloc (h->buf, cap + 1);
        }
      r = conn_read (c, h->buf + len, cap - len);
      if (r <= 0)
        return -1;
      len += (size_t)r;
      h->buf[len] = '\0';
      end = memmem (h->buf, len, "\r\n\r\n", 4);
    }
  if (memchr (h->buf, '\0', (size_t)(end - h->buf)) != NULL)
    return -1;
  /* What came after the head belongs to the body.  */
  n = (size_t)(end + 4 - h->buf);
  if (len > n)
    push_back (c, h->buf + n, len - n);
  end[2] = '\0';
  line = h->buf;
  next = strstr (line, "\r\n");
  *next = '\0';
  /* The first line: three parts, the last one the rest (a reason may
     hold spaces).  */
  h->line[0] = line;
  h->line[1] = strchr (line, ' ');
  if (h->line[1] == NULL)
    return -1;
  *h->line[1]++ = '\0';
  h->line[2] = strchr (h->line[1], ' ');
  if (h->line[2])
    *h->line[2]++ = '\0';
  else if (response)
    h->line[2] = h->line[1] + strlen (h->line[1]);
  else
    return -1;
  for (line = next + 2; *line; line = next + 2)
    {
      char *colon, *v, *e;

      next = strstr (line, "\r\n");
      if (next == NULL)
        break;
      *next = '\0';
      /* No folded lines, no bare CR, names of token characters only.  */
      if (*line == ' ' || *line == '\t' || strchr (line, '\r') || strchr (line, '\n'))
        return -1;
      colon = strchr (line, ':');
      if (colon == NULL || colon == line)
        return -1;
      for (v = line; v < colon; v++)
        if (!token_char (*v))
          return -1;
      *colon = '\0';
      for (v = colon + 1; *v == ' ' || *v == '\t'; v++)
        ;
      for (e = v + strlen (v); e > v && (e[-1] == ' ' || e[-1] == '\t'); e--)
        e[-1] = '\0';
      i = h->n++;
      h->name = xrealloc (h->name, sizeof *h->name * h->n);
      h->value = xrealloc (h->value, sizeof *h->value * h->n);
      h->owned = xrealloc (h->owned, sizeof *h->owned * h->n);
      h->name[i] = line;
      h->value[i] = v;
      h->owned[i] = false;
      if (h->n > 256)
        return -1;
    }
  return 0;
}

void
http_head_free (struct http_head *h)
{
  size_t i;

  for (i = 0; i < h->n; i++)
    if (h->owned[i])
      {
        explicit_bzero (h->value[i], strlen (h->value[i]));
        free (h->value[i]);
      }
  free (h->name);
  free (h->value);
  free (h->owned);
  strv_free (&h->names);
  free (h->buf);
  memset (h, 0, sizeof *h);
}

const char *
http_header (const struct http_head *h, const char *name)
{
  size_t i;

  for (i = 0; i < h->n; i++)
    if (h->name[i] && strcasecmp (h->name[i], name) == 0)
      return h->value[i];
  return NULL;
}

static size_t
header_count (const struct http_head *h, const char *name)
{
  size_t i, n = 0;

  for (i = 0; i < h->n; i++)
    if (h->name[i] && strcasecmp (h->name[i], name) == 0)
      n++;
  return n;
}

void
http_header_set (struct http_head *h, const char *name, char *value)
{
  size_t i;
  bool set = false;

  for (i = 0; i < h->n; i++)
    {
      if (h->name[i] == NULL || strcasecmp (h->name[i], name) != 0)
        continue;
      if (h->owned[i])
        {
          explicit_bzero (h->value[i], strlen (h->value[i]));
          free (h->value[i]);
        }
      h->owned[i] = false;
      if (set)
        {
          h->name[i] = NULL;
          continue;
        }
      h->value[i] = value;
      h->owned[i] = true;
      set = true;
    }
  if (set)
    return;
  i = h->n++;
  h->name = xrealloc (h->name, sizeof *h->name * h->n);
  h->value = xrealloc (h->value, sizeof *h->value * h->n);
  h->owned = xrealloc (h->owned, sizeof *h->owned * h->n);
  strv_push (&h->names, xstrdup (name));
  h->name[i] = h->names.v[strv_len (h->names.v) - 1];
  h->value[i] = value;
  h->owned[i] = true;
}

void
http_reply (struct conn *c, int code, const char *reason)
{
  _cleanup_free_ char *body = xasprintf ("esbx egress proxy: %s\n", reason);
  _cleanup_free_ char *text
      = xasprintf ("HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
                   "Connection: close\r\n\r\n%s",
                   code,
                   code == 403   ? "Forbidden"
                   : code == 502 ? "Bad Gateway"
                                 : "Bad Request",
                   strlen (body), body);

  conn_write_all (c, text, strlen (text));
}

/* Headers of one hop, never forwarded.  */
static bool
hop_header (const char *name)
{
  static const char *const hop[] = { "connection",
                                     "proxy-connection",
                                     "keep-alive",
                                     "proxy-authorization",
                                     "proxy-authenticate",
                                     "te",
                                     "trailer",
                                     "upgrade",
                                     "expect",
                                     "host" };
  size_t i;

  for (i = 0; i < ARRAY_SIZE (hop); i++)
    if (strcasecmp (name, hop[i]) == 0)
      return true;
  return false;
}

static int
copy_n (struct conn *from, struct conn *to, uint64_t n, uint64_t *count)
{
  char buf[RELAY_BUF];

  while (n > 0)
    {
      ssize_t r = conn_read (from, buf, n < sizeof buf ? (size_t)n : sizeof buf);
      if (r <= 0 || conn_write_all (to, buf, (size_t)r) < 0)
        return -1;
      n -= (uint64_t)r;
      *count += (uint64_t)r;
    }
  return 0;
}

static int
read_line (struct conn *c, char *buf, size_t max)
{
  size_t n = 0;

  while (n + 1 < max)
    {
      if (conn_read (c, buf + n, 1) != 1)
        return -1;
      if (buf[n++] == '\n')
        {
          buf[n] = '\0';
          return n >= 2 && buf[n - 2] == '\r' ? (int)n : -1;
        }
    }
  return -1;
}

static int
copy_chunked (struct conn *from, struct conn *to, uint64_t *count)
{
  char line[256];

  for (;;)
    {
      char *end;
      unsigned long long size;
      int n = read_line (from, line, sizeof line);

      if (n < 0 || !isxdigit ((unsigned char)line[0]))
        return -1;
      errno = 0;
      size = strtoull (line, &end, 16);
      if (errno || (*end != '\r' && *end != ';') || conn_write_all (to, line, (size_t)n) < 0)
        return -1;
      if (size == 0)
        break;
      if (copy_n (from, to, size + 2, count) < 0)
        return -1;
    }
  /* Trailers up to the blank line.  */
  for (;;)
    {
      int n = read_line (from, line, sizeof line);
      if (n < 0 || conn_write_all (to, line, (size_t)n) < 0)
        return -1;
      if (n == 2)
        return 0;
    }
}

/* The body of the request H: 0 none, 1 Content-Length (*LEN), 2 chunked;
   -1 what cannot be relayed safely.  */
static int
body_kind (const struct http_head *h, uint64_t *len)
{
  const char *te = http_header (h, "transfer-encoding"), *cl = http_header (h, "content-length");
  char *end;

  if (header_count (h, "transfer-encoding") > 1 || header_count (h, "content-length") > 1)
    return -1;
  if (te)
    return cl || strcasecmp (te, "chunked") != 0 ? -1 : 2;
  if (cl == NULL)
    return 0;
  errno = 0;
  *len = strtoull (cl, &end, 10);
  return errno || *end || !isdigit ((unsigned char)*cl) ? -1 : 1;
}

/* A method of token characters, a target of visible ASCII: nothing else
   goes into the line the destination reads.  */
static bool
request_line_valid (const struct http_head *h)
{
  const char *p;

  if (*h->line[0] == '\0' || strlen (h->line[0]) > 32 || *h->line[1] == '\0')
    return false;
  for (p = h->line[0]; *p; p++)
    if (!token_char (*p))
      return false;
  for (p = h->line[1]; *p; p++)
    if ((unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f)
      return false;
  return true;
}

/* http://HOST[:PORT][/PATH] into its parts; no user info.  */
static int
parse_absolute (const char *target, char **host, unsigned *port, const char **rest)
{
  const char *a, *e, *colon;
  char *end;

  if (strncasecmp (target, "http://", 7) != 0)
    return -1;
  a = target + 7;
  e = a + strcspn (a, "/?#");
  if (memchr (a, '@', (size_t)(e - a)) || e == a)
    return -1;
  colon = memchr (a, ':', (size_t)(e - a));
  *port = 80;
  if (colon)
    {
      unsigned long p = strtoul (colon + 1, &end, 10);
      if (end != e || p == 0 || p > 65535)
        return -1;
      *port = (unsigned)p;
    }
  *host = xstrndup (a, (size_t)((colon ? colon : e) - a));
  for (end = *host; *end; end++)
    *end = (char)tolower ((unsigned char)*end);
  *rest = *e == '/' ? e : NULL;
  return 0;
}

/* Whether the Host header VALUE names HOST (any port).  */
static bool
host_header_matches (const char *value, const char *host)
{
  size_t n = strlen (host);

  return strncasecmp (value, host, n) == 0 && (value[n] == '\0' || value[n] == ':');
}

static void
log_it (const struct proxy_client *cl, struct proxy_request_log *r)
{
  proxy_log_request (cl->slot, r);
}

static void
refuse (const struct proxy_client *cl, struct conn *from, struct proxy_request_log *r, int code,
        const char *reason)
{
  http_reply (from, code, reason);
  r->status = code;
  r->verdict = "refused";
  r->reason = reason;
  log_it (cl, r);
}

void
proxy_http (struct proxy_client *cl, struct conn *from, const char *tunnel_host,
            unsigned tunnel_port, struct conn *tunnel_up)
{
  struct http_head h = { 0 }, resp = { 0 };
  struct proxy_request_log r = { 0 };
  struct esbx_egress_verdict v;
  _cleanup_free_ char *host = NULL, *path = NULL, *target = NULL, *used = NULL, *out = NULL;
  struct conn plain_up = { .fd = -1 }, *up = tunnel_up;
  const char *rest, *reason = NULL;
  unsigned port;
  uint64_t len = 0;
  int kind;
  size_t i;

  if (http_read_head (from, &h, false) < 0 || strncmp (h.line[2], "HTTP/1.", 7) != 0
      || !request_line_valid (&h))
    {
      http_reply (from, 400, "malformed request");
      goto out;
    }
  if (tunnel_host == NULL && strcmp (h.line[0], "CONNECT") == 0)
    {
      proxy_tunnel (cl, from, &h);
      goto out;
    }
  r.method = h.line[0];
  r.intercepted = tunnel_host != NULL;
  if (tunnel_host)
    {
      const char *hh = http_header (&h, "host");

      host = xstrdup (tunnel_host);
      port = tunnel_port;
      rest = h.line[1][0] == '/' ? h.line[1] : NULL;
      r.host = host;
      r.port = port;
      if (rest == NULL || (hh && !host_header_matches (hh, host)) || header_count (&h, "host") > 1)
        {
          r.path = "";
          refuse (cl, from, &r, 403, "the request's host is not the tunnel's");
          goto out;
        }
    }
  else if (parse_absolute (h.line[1], &host, &port, &rest) < 0)
    {
      http_reply (from, 400, "expected http://HOST[:PORT]/PATH (or CONNECT for https)");
      goto out;
    }
  if (rest == NULL)
    rest = "/";
  path = xstrndup (rest, strcspn (rest, "?#"));
  r.host = host;
  r.port = port;
  r.path = path;
  esbx_egress_decide (cl->allow, host, port, r.method, path, &v);
  r.rule = v.rule;
  if (!v.allowed)
    {
      refuse (cl, from, &r, 403, v.reason);
      goto out;
    }
  if ((kind = body_kind (&h, &len)) < 0)
    {
      refuse (cl, from, &r, 400, "a body of an ambiguous or unknown length");
      goto out;
    }
  if (proxy_inject (cl, host, r.method, rest, &h, &target, &used, &reason) < 0)
    {
      refuse (cl, from, &r, 403, reason);
      goto out;
    }
  r.secrets = used;
  if (up == NULL)
    {
      plain_up.fd = proxy_upstream_connect (cl->allow, host, port, &reason);
      if (plain_up.fd < 0)
        {
          refuse (cl, from, &r, 502, reason);
          goto out;
        }
      up = &plain_up;
    }
  {
    _cleanup_free_ char *head = NULL, *hostport = NULL;
    bool default_port = port == (tunnel_host ? 443u : 80u);

    hostport = default_port ? xstrdup (host) : xasprintf ("%s:%u", host, port);
    head = xasprintf ("%s %s HTTP/1.1\r\nHost: %s\r\n", r.method, target ? target : rest, hostport);
    for (i = 0; i < h.n; i++)
      {
        char *old = head;
        if (h.name[i] == NULL || hop_header (h.name[i]))
          continue;
        head = xasprintf ("%s%s: %s\r\n", old, h.name[i], h.value[i]);
        explicit_bzero (old, strlen (old));
        free (old);
      }
    out = xasprintf ("%sConnection: close\r\n\r\n", head);
    explicit_bzero (head, strlen (head));
    if (conn_write_all (up, out, strlen (out)) < 0)
      {
        refuse (cl, from, &r, 502, "the destination closed the connection");
        goto out;
      }
    explicit_bzero (out, strlen (out));
  }
  if ((kind == 1 && copy_n (from, up, len, &r.sent) < 0)
      || (kind == 2 && copy_chunked (from, up, &r.sent) < 0))
    {
      refuse (cl, from, &r, 502, "the request's body broke off");
      goto out;
    }
  if (http_read_head (up, &resp, true) < 0)
    {
      refuse (cl, from, &r, 502, "no response from the destination");
      goto out;
    }
  r.status = atoi (resp.line[1]);
  {
    _cleanup_free_ char *head
        = xasprintf ("%s %s %s\r\n", resp.line[0], resp.line[1], resp.line[2]);
    uint64_t rlen = 0;
    int rkind;

    for (i = 0; i < resp.n; i++)
      {
        char *old = head;
        if (strcasecmp (resp.name[i], "connection") == 0
            || strcasecmp (resp.name[i], "keep-alive") == 0
            || strcasecmp (resp.name[i], "proxy-connection") == 0)
          continue;
        head = xasprintf ("%s%s: %s\r\n", old, resp.name[i], resp.value[i]);
        free (old);
      }
    {
      char *old = head;
      head = xasprintf ("%sConnection: close\r\n\r\n", old);
      free (old);
    }
    if (conn_write_all (from, head, strlen (head)) == 0)
      {
        rkind = body_kind (&resp, &rlen);
        if (strcmp (r.method, "HEAD") == 0 || r.status == 204 || r.status == 304)
          ;
        else if (rkind == 1)
          copy_n (up, from, rlen, &r.received);
        else
          {
            char buf[RELAY_BUF];
            ssize_t n;

            while ((n = conn_read (up, buf, sizeof buf)) > 0
                   && conn_write_all (from, buf, (size_t)n) == 0)
              r.received += (uint64_t)n;
          }
      }
  }
  r.verdict = "allowed";
  log_it (cl, &r);
out:
  conn_close (&plain_up);
  http_head_free (&resp);
  http_head_free (&h);
}
