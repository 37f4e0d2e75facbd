/* What an egress session's network shows: its policy for inspect, and the
 * attempts it refused.  The shared table's set `refused` counts packets per
 * link and destination (address, protocol, port) and `refused_other` per address and
 * protocol for the rest (ICMP...); nothing but the kernel runs to count
 * them.  They are read when asked (inspect, events) and when the network
 * is removed, and each increase since the last reading becomes an
 * "egress.refused" event, so the event log keeps what the table loses.
 * Names the resolver refused come from its log (egress_names.c) at the
 * same moments, each an "egress.refused_name" event.  Queries to the
 * resolver past its rate limit are dropped by the table and counted per
 * link in its set `dns_limited`: an "egress.dns_limited" event.  The requests the
 * proxy logged become "egress.request" events (egress_requests.c).  What was recorded
 * is kept in /run/esbx/egress/N.seen: "ADDR PROTO PORT" -> packets, "name
 * NAME" -> queries (NAMES_MAX names at most), "log offset" and "dns
 * limited".  */
#include "egress.h"
#include "events.h"
#include "fs.h"
#include "log.h"
#include "netcmd.h"
#include "nftset.h"
#include "utils.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>

#define SEEN_MAX       (1u << 20)
#define NAMES_MAX      1024
#define NAME_PREFIX    "name "
#define LOG_OFFSET     "log offset"
#define DNS_LIMITED    "dns limited"
#define REQUESTS_SHOWN 100

/* The name of protocol number P as nft shows it, else the number.  */
static void
proto_text (uint8_t p, char *buf, size_t size)
{
  switch (p)
    {
    case 1:
      snprintf (buf, size, "icmp");
      break;
    case 6:
      snprintf (buf, size, "tcp");
      break;
    case 17:
      snprintf (buf, size, "udp");
      break;
    case 132:
      snprintf (buf, size, "sctp");
      break;
    default:
      snprintf (buf, size, "%u", p);
    }
}

/* An element of `refused` (LINK . ADDR . PROTO . PORT) or `refused_other`
   (LINK . ADDR . PROTO): {"destination", "protocol", "port"?, "packets"}
   appended to the array DATA.  */
static void
refused_entry (const struct esbx_nft_key *key, const struct esbx_nft_key *end, uint64_t packets,
               void *data)
{
  char addr[INET_ADDRSTRLEN], proto[16];
  json_t *o;

  (void)end;
  if (key->len < 24)
    return;
  inet_ntop (AF_INET, key->b + 16, addr, sizeof addr);
  proto_text (key->b[20], proto, sizeof proto);
  o = json_new (JSON_OBJECT);
  json_set_string (o, "destination", addr);
  json_set_string (o, "protocol", proto);
  if (key->len >= 28)
    json_set_int (o, "port", (int64_t)key->b[24] << 8 | key->b[25]);
  json_set_int (o, "packets", (int64_t)packets);
  json_append (data, o);
}

static void
limited_entry (const struct esbx_nft_key *key, const struct esbx_nft_key *end, uint64_t packets,
               void *data)
{
  (void)key;
  (void)end;
  *(int64_t *)data += (int64_t)packets;
}

/* What the shared table counted for SLOT's link, read over netlink from
   three sets (nothing else of the table): the elements of `refused` and
   `refused_other` into *REFUSED, the packets `dns_limited` counted into
   *LIMITED.  */
static void
table_state (int slot, json_t **refused, int64_t *limited)
{
  _cleanup_close_ int dfd = -1;
  struct esbx_nft_key link = { .len = 0 };
  char table[64], name[16];
  esbx_error_t err = NULL;

  *refused = json_new (JSON_ARRAY);
  *limited = 0;
  dfd = TEMP_FAILURE_RETRY (open (ESBX_EGRESS_RUN, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dfd < 0 || esbx_egress_slot_table (dfd, slot, table, sizeof table) < 0)
    return;
  snprintf (name, sizeof name, ESBX_EGRESS_LINK_FMT, slot);
  esbx_nft_key_ifname (&link, name);
  if (esbx_nft_elems_read (table, "refused", link.b, link.len, refused_entry, *refused, &err) < 0
      || esbx_nft_elems_read (table, "refused_other", link.b, link.len, refused_entry, *refused,
                              &err)
             < 0
      || esbx_nft_elems_read (table, "dns_limited", link.b, link.len, limited_entry, limited, &err)
             < 0)
    esbx_error_free (&err);
}

static json_t *
strings (const json_t *arr)
{
  json_t *out = json_new (JSON_ARRAY);
  const json_t *v;
  size_t i;

  json_array_foreach (arr, i, v)
    if (v->type == JSON_STRING)
      json_append (out, json_new_string (v->text));
  return out;
}

/* The names refused so far, as recorded in SLOT.seen: [{"name",
   "queries"}] in the order first seen.  */
static json_t *
refused_names (int slot)
{
  _cleanup_free_ char *name = xasprintf ("%d.seen", slot);
  _cleanup_close_ int dfd = -1;
  _cleanup_json_ json_t *seen = NULL;
  json_t *arr = json_new (JSON_ARRAY);
  esbx_error_t err = NULL;
  const json_t *v;
  const char *k;
  size_t i;

  dfd = TEMP_FAILURE_RETRY (open (ESBX_EGRESS_RUN, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dfd < 0 || (seen = json_parse_file_at (dfd, name, &err)) == NULL)
    {
      esbx_error_free (&err);
      return arr;
    }
  json_object_foreach (seen, i, k, v)
    {
      int64_t n;
      json_t *o;

      if (strncmp (k, NAME_PREFIX, strlen (NAME_PREFIX)) != 0 || !json_int_value (v, &n))
        continue;
      o = json_new (JSON_OBJECT);
      json_set_string (o, "name", k + strlen (NAME_PREFIX));
      json_set_int (o, "queries", n);
      json_append (arr, o);
    }
  return arr;
}

json_t *
esbx_egress_json (esbx_store_t *store, const struct esbx_session *s)
{
  const json_t *allow = json_get (s->record, "allow");
  char gw[INET_ADDRSTRLEN], addr[INET_ADDRSTRLEN], link[32];
  esbx_error_t err = NULL;
  json_t *o;
  int slot;

  if (s->network == NULL || strcmp (s->network, "egress") != 0)
    return NULL;
  o = json_new (JSON_OBJECT);
  json_set (o, "allow", strings (allow));
  slot = esbx_egress_slot (store, s->name);
  if (slot < 0 || esbx_egress_slot_addresses (slot, gw, addr, &err) < 0)
    {
      esbx_error_free (&err);
      json_set (o, "active", json_new_bool (false));
      return o;
    }
  snprintf (link, sizeof link, ESBX_EGRESS_LINK_FMT, slot);
  json_set (o, "active", json_new_bool (true));
  json_set_string (o, "address", addr);
  json_set_string (o, "resolver", gw);
  json_set_string (o, "link", link);
  {
    json_t *arr;
    int64_t limited;

    table_state (slot, &arr, &limited);
    json_set (o, "refused", arr);
    json_set (o, "refused_names", refused_names (slot));
    json_set_int (o, "dns_limited", limited);
  }
  {
    _cleanup_close_ int dfd
        = TEMP_FAILURE_RETRY (open (ESBX_EGRESS_RUN, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    json_set (o, "proxy", json_new_string (gw));
    json_set_int (o, "proxy_port", ESBX_EGRESS_PROXY_PORT);
    json_set (o, "requests",
              dfd >= 0 ? esbx_egress_recent_requests (dfd, slot, REQUESTS_SHOWN)
                       : json_new (JSON_ARRAY));
  }
  return o;
}

static char *
entry_key (const json_t *e)
{
  int64_t port = 0;

  json_get_int (e, "port", &port);
  return xasprintf ("%s %s %" PRId64, json_get_string (e, "destination"),
                    json_get_string (e, "protocol"), port);
}

static size_t
names_kept (const json_t *seen)
{
  const json_t *v;
  const char *k;
  size_t i, n = 0;

  json_object_foreach (seen, i, k, v)
    if (strncmp (k, NAME_PREFIX, strlen (NAME_PREFIX)) == 0 && v->type == JSON_NUMBER)
      n++;
  return n;
}

/* An "egress.refused_name" event for each name refused since the last
   reading; names beyond NAMES_MAX in one reading share one event.  */
static void
record_names (esbx_store_t *store, const char *session, int dfd, int slot, json_t *seen)
{
  _cleanup_json_ json_t *names = NULL;
  int64_t offset = 0, other_queries;
  size_t i, kept = names_kept (seen);
  const json_t *v;
  const char *k;
  bool full;

  json_get_int (seen, LOG_OFFSET, &offset);
  names = esbx_egress_refused_names (dfd, slot, &offset, NAMES_MAX, &other_queries, &full);
  json_set_int (seen, LOG_OFFSET, offset);
  json_object_foreach (names, i, k, v)
    {
      _cleanup_free_ char *key = xasprintf (NAME_PREFIX "%s", k);
      int64_t n = 0, before = 0;
      bool known = json_get_int (seen, key, &before);
      json_t *f = json_new (JSON_OBJECT);

      json_int_value (v, &n);
      json_set_string (f, "name", k);
      json_set_int (f, "queries", n);
      /* The totals of NAMES_MAX names at most: the record stays small
         whatever the session asks.  */
      if (known || kept < NAMES_MAX)
        {
          json_set_int (f, "total", before + n);
          json_set_int (seen, key, before + n);
          kept += !known;
        }
      esbx_event_append (store, session, "egress.refused_name", f, NULL);
    }
  if (other_queries > 0)
    {
      json_t *f = json_new (JSON_OBJECT);

      json_set (f, "other_names", json_new_bool (true));
      json_set_int (f, "queries", other_queries);
      esbx_event_append (store, session, "egress.refused_name", f, NULL);
    }
  if (full)
    {
      /* Said once per filling: the reading cut the log, and the proxy
         writes to it again.  */
      json_t *f = json_new (JSON_OBJECT);

      json_set_int (f, "log_bytes", ESBX_EGRESS_LOG_MAX);
      esbx_event_append (store, session, "egress.resolver_log_full", f, NULL);
    }
}

/* An "egress.dns_limited" event when the table dropped queries to the
   resolver since the last reading.  */
static void
record_dns_limited (esbx_store_t *store, const char *session, int64_t now, json_t *seen)
{
  int64_t before = 0;
  json_t *f;

  json_get_int (seen, DNS_LIMITED, &before);
  if (now <= before)
    return;
  f = json_new (JSON_OBJECT);
  json_set_int (f, "packets", now - before);
  json_set_int (f, "total", now);
  esbx_event_append (store, session, "egress.dns_limited", f, NULL);
  json_set_int (seen, DNS_LIMITED, now);
}

void
esbx_egress_record_refused (esbx_store_t *store, const char *session)
{
  _cleanup_json_ json_t *now = NULL, *seen = NULL;
  _cleanup_free_ char *name = NULL, *text = NULL;
  _cleanup_close_ int dfd = -1, lock = -1;
  esbx_error_t err = NULL;
  const json_t *e;
  size_t i, len;
  int64_t limited = 0;
  int slot = esbx_egress_slot (store, session);

  if (slot < 0)
    return;
  dfd = TEMP_FAILURE_RETRY (open (ESBX_EGRESS_RUN, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dfd < 0)
    return;
  name = xasprintf ("%d.seen", slot);
  /* Two readers at once must not record the same attempts twice.  */
  lock = esbx_lock_at (dfd, name, true, true, &err);
  if (lock < 0)
    {
      esbx_error_free (&err);
      return;
    }
  seen = json_parse_file_at (dfd, name, &err);
  esbx_error_free (&err);
  if (seen == NULL || seen->type != JSON_OBJECT)
    {
      json_free (seen);
      seen = json_new (JSON_OBJECT);
    }
  table_state (slot, &now, &limited);
  json_array_foreach (now, i, e)
    {
      _cleanup_free_ char *key = entry_key (e);
      int64_t packets = 0, before = 0, port;
      json_t *f;

      json_get_int (e, "packets", &packets);
      json_get_int (seen, key, &before);
      if (packets <= before)
        continue;
      f = json_new (JSON_OBJECT);
      json_set_string (f, "destination", json_get_string (e, "destination"));
      json_set_string (f, "protocol", json_get_string (e, "protocol"));
      if (json_get_int (e, "port", &port))
        json_set_int (f, "port", port);
      json_set_int (f, "packets", packets - before);
      json_set_int (f, "total", packets);
      esbx_event_append (store, session, "egress.refused", f, NULL);
      json_set_int (seen, key, packets);
    }
  record_names (store, session, dfd, slot, seen);
  record_dns_limited (store, session, limited, seen);
  esbx_egress_record_requests (store, session, dfd, slot, seen);
  text = json_serialize (seen, false, &len);
  if (esbx_replace_file_at (dfd, name, text, len, 0600, &err) < 0)
    esbx_error_free (&err);
}
