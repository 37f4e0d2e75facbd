/* esbx shim: the network of a `--network egress` session.
 *
 * The holder's own net namespace gets one veth pair to the host: eth0
 * inside, esbxeN on the host, a /30 of ESBX_EGRESS_RANGE (default
 * 10.233.0.0/16) for slot N.  Slots are host-wide, since links and
 * nftables tables are: each is a record /run/esbx/egress/N.json naming the
 * store and the session, made with link(2) so that two sessions never
 * share one; at most ESBX_EGRESS_MAX (default 1024) exist at once.  On the
 * host, the nftables table `inet esbx_egress_HASH`, one for every session,
 * with the session's elements in its sets (keyed by its link), redirects
 * the session's gateway ports 3128 (HTTP proxy) and 53 (DNS) to the
 * store's egress proxy
 * (shim/proxy/, one process for every session of the store:
 * proxy_launch.c), lets through the address entries of its allow-list
 * (masqueraded), and refuses everything else.  See docs/SECURITY.md,
 * "Network".  */
#ifndef ESBX_EGRESS_H
#define ESBX_EGRESS_H

#include "json.h"
#include "layerstore.h"

#include <stdio.h>
#include <sys/types.h>

/* The store's egress proxy (proxy_launch.c): its ports on the host and
   the CA bundle its sessions trust.  */
struct esbx_egress_proxy
{
  int http_port, dns_port;
  char *ca_bundle;
};
/* Start the store's proxy unless it runs; its ports and bundle in *OUT.  */
int esbx_egress_proxy_ensure (esbx_store_t *store, struct esbx_egress_proxy *out,
                              esbx_error_t *err);
void esbx_egress_proxy_clear (struct esbx_egress_proxy *p);
/* ESBX_EGRESS_RUN/proxy/KEY, the proxy's directory.  */
char *esbx_egress_proxy_dir (esbx_store_t *store);
/* The pid of the store's running proxy, 0 when none runs.  */
pid_t esbx_egress_proxy_pid (esbx_store_t *store);
/* What a session is told: the proxy on its gateway's port 3128.  */
#define ESBX_EGRESS_PROXY_PORT 3128

struct esbx_egress
{
  int slot;          /* -1: none */
  char *resolv_conf; /* the session's /etc/resolv.conf, a file under /run/esbx/egress */
  struct esbx_egress_proxy proxy;
};

/* Take a slot for session S and write its resolv.conf.  The caller takes
   down first whatever an earlier holder of S left (esbx_egress_down).  */
int esbx_egress_prepare (esbx_store_t *store, const struct esbx_session *s, struct esbx_egress *net,
                         esbx_error_t *err);
/* The network of NET in two steps, the table first so that nothing passes
   the link before the policy does: esbx_egress_rules, the nftables table
   and the host's forwarding exception (no holder needed: run while it
   starts), then esbx_egress_link for the holder PID, the veth, addresses
   and route.  On error, the caller calls esbx_egress_down.  */
int esbx_egress_rules (const struct esbx_session *s, const struct esbx_egress *net,
                       esbx_error_t *err);
int esbx_egress_link (const struct esbx_session *s, const struct esbx_egress *net, pid_t pid,
                      esbx_error_t *err);
void esbx_egress_clear (struct esbx_egress *net);
/* Remove everything of session SESSION's egress network (refused attempts
   recorded as an event first): resolver, table, link, slot.  None is not
   an error.  */
void esbx_egress_down (esbx_store_t *store, const char *session);
/* Remove the egress networks of this store whose session is gone or whose
   holder is not running.  */
void esbx_egress_gc (esbx_store_t *store, FILE *report);

/* Shared by the egress_*.c files: call FN for every slot of STORE under
   ESBX_EGRESS_RUN (opened as DFD) with the session it belongs to; free
   SLOT (resolver, table, veth, records; the record last).  */
void esbx_egress_for_each_slot (esbx_store_t *store, int dfd,
                                void (*fn) (esbx_store_t *, int, int, const char *, void *),
                                void *data);
void esbx_egress_free_slot (int dfd, int slot);
/* The name of the nftables table (inet) SLOT's elements are in, from its
   record (ESBX_EGRESS_RUN opened as DFD), into NAME of SIZE bytes.  */
int esbx_egress_slot_table (int dfd, int slot, char *name, size_t size);

/* The first 16 hex digits of the SHA-256 of STORE's root: what names the
   store's files under ESBX_EGRESS_RUN (its proxy's directory, the index
   of its slots).  */
void esbx_egress_store_key (esbx_store_t *store, char key[17]);
/* The slot of session SESSION's network, -1 when it has none.  */
int esbx_egress_slot (esbx_store_t *store, const char *session);
/* The host side (resolver, gateway) and session side addresses of SLOT,
   INET_ADDRSTRLEN bytes each.  */
int esbx_egress_slot_addresses (int slot, char *gw, char *addr, esbx_error_t *err);
/* The host-side names of SLOT: link, and the nftables table (inet) of
   its own that sessions had before the shared table (removed if found).  */
#define ESBX_EGRESS_LINK_PREFIX "esbxe"
#define ESBX_EGRESS_LINK_FMT    ESBX_EGRESS_LINK_PREFIX "%d"
#define ESBX_EGRESS_TABLE_FMT   "esbx_e%d"
#define ESBX_EGRESS_RUN         "/run/esbx/egress"
/* The proxy's logs of a slot (its resolver's and its requests') never grow
   past this; readers cut them once read past ESBX_EGRESS_LOG_CUT.  */
#define ESBX_EGRESS_LOG_MAX (2u << 20)
#define ESBX_EGRESS_LOG_CUT (1u << 20)
/* Queries a session may send its resolver: a rate per second and a burst;
   the table drops the rest and counts them (set dns_limited).  */
#define ESBX_EGRESS_DNS_RATE  200
#define ESBX_EGRESS_DNS_BURST 1000

/* The requests the proxy logged for SLOT (ESBX_EGRESS_RUN/SLOT.requests,
   egress_requests.c): an "egress.request" event for each line past
   SEEN's "requests offset" (advanced); the last MAX of the log.  */
void esbx_egress_record_requests (esbx_store_t *store, const char *session, int dfd, int slot,
                                  json_t *seen);
json_t *esbx_egress_recent_requests (int dfd, int slot, size_t max);

/* What the store's proxy would do with METHOD URL from SESSION
   (egress_check.c): {"allowed", "rule"?, "reason"?, "intercepted",
   "secrets": names put in, "method", "host", "port", "path"}.  */
json_t *esbx_egress_check (esbx_store_t *store, const char *session, const char *method,
                           const char *url, esbx_error_t *err);

/* The policy and state of session S's network (inspect): its allow-list,
   addresses, and the refused attempts counted so far.  NULL when S is not
   an egress session.  */
json_t *esbx_egress_json (esbx_store_t *store, const struct esbx_session *s);
/* Append an "egress.refused" event for every destination refused more
   often than the last call recorded, and an "egress.refused_name" event
   for every name the resolver refused since then.  */
void esbx_egress_record_refused (esbx_store_t *store, const char *session);
/* The names the resolver of SLOT refused from *OFFSET of its log
   (ESBX_EGRESS_RUN/SLOT.log, beneath DFD) on: an object NAME -> queries
   of at most MAX names, and in *OTHER_QUERIES the queries for names
   beyond those.  *OFFSET is advanced past what was read; *FULL tells
   that the log had reached ESBX_EGRESS_LOG_MAX, so that queries after
   that were not logged (egress_names.c).  */
json_t *esbx_egress_refused_names (int dfd, int slot, int64_t *offset, size_t max,
                                   int64_t *other_queries, bool *full);

#endif
