/* esbx-proxy: the egress proxy of a store (see docs/SECURITY.md, "Network").
 *
 * One process per store, started on demand by whoever brings up an egress
 * network (shim/lib/egress/proxy_launch.c) and ending by itself once the
 * store has had none for a while.  It listens on the host, on ports the
 * sessions' nftables tables redirect their gateway's 3128 (HTTP) and 53
 * (DNS) to, and tells sessions apart by their source address: the slot of
 * the address names the session (ESBX_EGRESS_RUN/N.json), whose record
 * holds the allow-list and the secrets.  Files, one concern each:
 *
 *   main.c     arguments, lock, sockets, the accept loop, idle exit
 *   client.c   who a peer is: slot, session, policy, injected secrets
 *   http.c     one HTTP request: parse, decide, forward, log
 *   tunnel.c   CONNECT: the SNI check and the byte relay, or interception
 *   tls.c      the store's CA, certificates for intercepted hosts, sessions
 *   inject.c   placeholders replaced by values for bound hosts only
 *   upstream.c resolving and connecting to a destination the policy allows
 *   dns.c      the resolver of every session
 *   reqlog.c   the request and resolver logs of each slot
 */
#ifndef ESBX_PROXY_H
#define ESBX_PROXY_H

#include "json.h"
#include "layerstore.h"
#include "utils.h"

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PROXY_HEAD_MAX   (64u * 1024)
#define PROXY_IO_TIMEOUT 30 /* seconds without a byte before a connection ends */

struct proxy_global
{
  esbx_store_t *store;
  uint32_t range; /* ESBX_EGRESS_RANGE, host byte order */
  unsigned prefix;
  char upstream_dns[64]; /* the resolver names are asked of */
  char *upstream_ca;     /* ESBX_EGRESS_UPSTREAM_CA, extra CAs for destinations */
};
extern struct proxy_global proxy;

/* One side of a connection: a socket, with TLS over it when TLS is set.  */
struct conn
{
  int fd;
  gnutls_session_t tls;
  /* Bytes read ahead of what was consumed (a peeked ClientHello).  */
  char *pending;
  size_t pending_len, pending_off;
  /* Bytes of the TLS stream read ahead, for the TLS layer (tls.c).  */
  char *raw;
  size_t raw_len, raw_off;
};
ssize_t conn_read (struct conn *c, void *buf, size_t len);
int conn_write_all (struct conn *c, const void *buf, size_t len);
void conn_close (struct conn *c);

/* The session behind a peer address (client.c).  */
struct proxy_client
{
  int slot;
  char *session;
  json_t *allow;               /* the record's "allow" (owned copy) */
  struct esbx_secret *secrets; /* every secret of the session, values too */
  size_t n_secrets;
  json_t **inject; /* per secret: its hosts record, or NULL */
  bool has_inject;
};
/* SECRETS: read the session's secrets too (a request; a query needs
   only the allow-list).  */
int proxy_client_lookup (uint32_t peer, struct proxy_client *c, bool secrets, esbx_error_t *err);
void proxy_client_free (struct proxy_client *c);

/* http.c: serve one request read from FROM.  HOST and PORT are the
   destination a tunnel was opened to (intercepted TLS, UP already
   connected), NULL for a plain forward-proxy request.  */
void proxy_http (struct proxy_client *cl, struct conn *from, const char *host, unsigned port,
                 struct conn *up);
/* The head of a request or response (http.c).  */
struct http_head
{
  char *buf;     /* the head as read, NUL-terminated; lines cut in place */
  char *line[3]; /* request: METHOD TARGET VERSION; response: VERSION CODE REASON */
  size_t n;
  char **name, **value;
  bool *owned;       /* value[i] was allocated (http_header_set) */
  struct strv names; /* names http_header_set added */
};
/* Read a head from C; bytes read past it stay in C's pending bytes.  */
int http_read_head (struct conn *c, struct http_head *h, bool response);
void http_head_free (struct http_head *h);
const char *http_header (const struct http_head *h, const char *name);
/* Set header NAME to VALUE (owned), replacing every one of that name.  */
void http_header_set (struct http_head *h, const char *name, char *value);
void http_reply (struct conn *c, int code, const char *reason);

/* tunnel.c: a CONNECT request (its head in H) from FROM.  */
void proxy_tunnel (struct proxy_client *cl, struct conn *from, struct http_head *h);

/* tls.c */
/* Load the store's CA (made on first use) and write DIRFD/bundle.pem.  */
int proxy_tls_init (int dirfd, esbx_error_t *err);
/* Make FROM a TLS server side for HOST (a certificate the store's CA
   signs), after the ClientHello in its pending bytes.  */
int proxy_tls_accept (struct conn *from, const char *host, esbx_error_t *err);
/* Make UP a TLS client of HOST, checked against the host's trusted CAs and
   ESBX_EGRESS_UPSTREAM_CA.  */
int proxy_tls_connect (struct conn *up, const char *host, esbx_error_t *err);

/* inject.c: rewrite the request head H (HOST its destination) for CL's
   secrets: 0 to send it (*OUT the new head), -1 with *REASON when it
   carries a placeholder or a value to a host none is bound to.  *USED
   names the secrets put in (a static list, comma-separated).  */
int proxy_inject (const struct proxy_client *cl, const char *host, const char *method,
                  const char *target, struct http_head *h, char **out_target, char **used,
                  const char **reason);

/* upstream.c: resolve HOST and connect to PORT when the policy ALLOW
   allows where it leads; -1 with *REASON otherwise.  */
int proxy_upstream_connect (const json_t *allow, const char *host, unsigned port,
                            const char **reason);
/* A query for NAME's IPv4 addresses to the upstream resolver.  */
int proxy_resolve (const char *name, uint32_t *addrs, size_t max, size_t *n);

/* dns.c: the resolver's loop on FD (never returns).  */
void *proxy_dns_loop (void *fdp);

/* reqlog.c */
struct proxy_request_log
{
  const char *host;
  unsigned port;
  const char *method;
  const char *path;
  int status;
  uint64_t sent, received;
  const char *verdict; /* "allowed", "refused" */
  const char *reason;
  const char *rule;
  const char *secrets; /* names injected, or NULL */
  bool intercepted;
};
void proxy_log_request (int slot, const struct proxy_request_log *r);
void proxy_log_refused_name (int slot, const char *name);

/* The egress range and a peer's slot.  */
int proxy_slot_of (uint32_t addr);
bool proxy_addr_refused_always (uint32_t addr);
bool proxy_addr_private (uint32_t addr);

#endif
