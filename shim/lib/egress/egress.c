/* The egress network of a session: slot, veth, its elements in the
   shared nftables table (see egress.h), and the store's proxy that the
   table leads to (proxy_launch.c).  Built with the ip and iptables
   programs (netcmd.h), nft once for the table, and netlink for the
   elements (nftset.h); every object is named after the slot or keyed by
   its link, so that cleanup needs nothing but the slot record.  */
#include "egress.h"
#include "events.h"
#include "fs.h"
#include "hash.h"
#include "netcmd.h"
#include "nftset.h"
#include "proc.h"
#include "text.h"
#include "utils.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define EGRESS_RUN      ESBX_EGRESS_RUN
#define DEFAULT_RANGE   "10.233.0.0/16"
#define DEFAULT_MAX     1024
#define SLOT_RECORD_MAX (64u * 1024)
#define IPTABLES_CHAIN  "DOCKER-USER"

/* Addresses and names of slot N.  */
struct slot_names
{
  char veth[16];
  char table[16];
  char gw[INET_ADDRSTRLEN];
  char addr[INET_ADDRSTRLEN];
  uint32_t gw_a, addr_a; /* host order */
};

static int
egress_range (uint32_t *base, unsigned *prefix, esbx_error_t *err)
{
  const char *spec = getenv ("ESBX_EGRESS_RANGE");
  struct esbx_egress_rule r;

  if (spec == NULL || *spec == '\0')
    spec = DEFAULT_RANGE;
  if (esbx_egress_rule_parse (spec, &r, err) < 0)
    return esbx_error_wrap (err, "ESBX_EGRESS_RANGE");
  if (r.name || r.port || r.prefix > 30)
    {
      esbx_egress_rule_clear (&r);
      return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                   "ESBX_EGRESS_RANGE `%s`: expected an IPv4 CIDR of /30 or wider",
                                   spec);
    }
  *base = r.addr;
  *prefix = r.prefix;
  return 0;
}

static int
egress_max (uint32_t slots_in_range)
{
  const char *s = getenv ("ESBX_EGRESS_MAX");
  long v = s && *s ? strtol (s, NULL, 10) : DEFAULT_MAX;

  if (v < 0)
    v = 0;
  return (int)((uint64_t)v < slots_in_range ? (uint64_t)v : slots_in_range);
}

static void
ipv4_text (uint32_t a, char *buf)
{
  struct in_addr in = { .s_addr = htonl (a) };

  inet_ntop (AF_INET, &in, buf, INET_ADDRSTRLEN);
}

static int
slot_names (int slot, struct slot_names *n, esbx_error_t *err)
{
  uint32_t base;
  unsigned prefix;

  if (egress_range (&base, &prefix, err) < 0)
    return -1;
  snprintf (n->veth, sizeof n->veth, ESBX_EGRESS_LINK_FMT, slot);
  snprintf (n->table, sizeof n->table, ESBX_EGRESS_TABLE_FMT, slot);
  n->gw_a = base + 4u * (uint32_t)slot + 1;
  n->addr_a = base + 4u * (uint32_t)slot + 2;
  ipv4_text (n->gw_a, n->gw);
  ipv4_text (n->addr_a, n->addr);
  return 0;
}

int
esbx_egress_slot_addresses (int slot, char *gw, char *addr, esbx_error_t *err)
{
  struct slot_names n;

  if (slot_names (slot, &n, err) < 0)
    return -1;
  memcpy (gw, n.gw, sizeof n.gw);
  memcpy (addr, n.addr, sizeof n.addr);
  return 0;
}

static int
run_dir (esbx_error_t *err)
{
  if (esbx_mkdir_p (EGRESS_RUN, 0700, err) < 0)
    return -1;
  return esbx_open_dir_at (AT_FDCWD, EGRESS_RUN, err);
}

#define SHARED_TABLE_PREFIX "esbx_egress_"
#define SHARED_TABLE_LEN    (sizeof SHARED_TABLE_PREFIX + 12)
static int shared_table (char name[SHARED_TABLE_LEN], esbx_error_t *err);
/* The sets of the shared table whose elements belong to a session, their
   keys starting with its link (see shared_ruleset).  */
static const char *const session_sets[]
    = { "refused",      "refused_other", "refused_new", "dns_meter", "dns_limited", "allowed",
        "allowed_port", "proxy_dst",     "dns_dst",     "redir",     "src",         "links" };

/* ---- slots ------------------------------------------------------------ */

/* The record of slot NAME ("N.json") when it belongs to STORE.  */
static json_t *
slot_record (int dfd, const char *name, esbx_store_t *store)
{
  esbx_error_t e = NULL;
  json_t *j = json_parse_file_at (dfd, name, &e);
  const char *root;

  esbx_error_free (&e);
  if (j == NULL)
    return NULL;
  root = json_get_string (j, "store");
  if (root == NULL || strcmp (root, store->root) != 0 || json_get_string (j, "session") == NULL)
    {
      json_free (j);
      return NULL;
    }
  return j;
}

static int
slot_of (const char *name)
{
  char *end;
  long v = strtol (name, &end, 10);

  if (end == name || strcmp (end, ".json") != 0 || v < 0 || v > 1 << 20)
    return -1;
  return (int)v;
}

/* The index of slots by session: INDEX_DIR/KEY.SESSION, a symlink to
   "N", so that finding a session's slot reads one link and one record,
   not every record (a thousand of them at every exec).  The records stay
   the truth: a link is followed only to a record that names the same
   store and session.  */
#define INDEX_DIR "by-session"

static char *
index_name (esbx_store_t *store, const char *session)
{
  char key[17];

  esbx_egress_store_key (store, key);
  return xasprintf (INDEX_DIR "/%s.%s", key, session);
}

static void
index_add (int dfd, esbx_store_t *store, const char *session, int slot)
{
  _cleanup_free_ char *name = index_name (store, session), *target = xasprintf ("%d", slot);

  if (mkdirat (dfd, INDEX_DIR, 0700) < 0 && errno != EEXIST)
    return;
  unlinkat (dfd, name, 0);
  /* Without it, the walk of the records still finds the slot.  */
  (void)symlinkat (target, dfd, name);
}

void
esbx_egress_store_key (esbx_store_t *store, char key[17])
{
  char hex[ESBX_SHA256_HEX_LEN + 1];

  esbx_sha256_buf (store->root, strlen (store->root), hex);
  memcpy (key, hex, 16);
  key[16] = '\0';
}

static int
take_slot (int dfd, esbx_store_t *store, const char *session, int *slot, esbx_error_t *err)
{
  _cleanup_json_ json_t *rec = json_new (JSON_OBJECT);
  _cleanup_free_ char *text = NULL, *tmp = NULL;
  uint32_t base;
  unsigned prefix;
  char table[SHARED_TABLE_LEN];
  size_t len;
  int i, max, fd;

  if (egress_range (&base, &prefix, err) < 0 || shared_table (table, err) < 0)
    return -1;
  max = egress_max ((uint32_t)1 << (32 - prefix) >> 2);
  json_set_string (rec, "store", store->root);
  json_set_string (rec, "session", session);
  /* The table the session's elements go to: its end finds them whatever
     the range is then.  */
  json_set_string (rec, "table", table);
  text = json_serialize (rec, true, &len);
  tmp = xasprintf (".new.%d", (int)getpid ());
  fd = TEMP_FAILURE_RETRY (
      openat (dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (fd < 0)
    return esbx_make_error (err, errno, "create `%s/%s`", EGRESS_RUN, tmp);
  if (esbx_write_all (fd, text, len) < 0)
    {
      close (fd);
      unlinkat (dfd, tmp, 0);
      return esbx_make_error (err, errno, "write `%s/%s`", EGRESS_RUN, tmp);
    }
  close (fd);
  /* link(2) fails with EEXIST when the slot is taken: whoever links first
     owns it, and the record is complete from its first moment.  */
  for (i = 0; i < max; i++)
    {
      _cleanup_free_ char *name = xasprintf ("%d.json", i);
      if (linkat (dfd, tmp, dfd, name, 0) == 0)
        {
          unlinkat (dfd, tmp, 0);
          index_add (dfd, store, session, i);
          *slot = i;
          return 0;
        }
      if (errno != EEXIST)
        {
          unlinkat (dfd, tmp, 0);
          return esbx_make_error (err, errno, "create `%s/%s`", EGRESS_RUN, name);
        }
    }
  unlinkat (dfd, tmp, 0);
  return esbx_make_error_kind (err, ESBX_ERR_TOO_LARGE, 0,
                               "session `%s`: all %d egress networks are in use "
                               "(ESBX_EGRESS_MAX, ESBX_EGRESS_RANGE)",
                               session, max);
}

/* ---- teardown --------------------------------------------------------- */

static void
ignore (char *const *argv, int netns_fd)
{
  esbx_error_t e = NULL;

  if (esbx_netcmd (argv, netns_fd, NULL, NULL, &e) < 0)
    esbx_error_free (&e);
}

/* The index's link to SLOT, from its record's store and session.  */
static void
drop_index (int dfd, int slot)
{
  _cleanup_free_ char *rec_name = xasprintf ("%d.json", slot), *target = NULL;
  _cleanup_json_ json_t *rec = NULL;
  esbx_error_t e = NULL;
  const char *root, *session;
  char hex[ESBX_SHA256_HEX_LEN + 1], buf[32];
  ssize_t n;

  rec = json_parse_file_at (dfd, rec_name, &e);
  esbx_error_free (&e);
  root = rec ? json_get_string (rec, "store") : NULL;
  session = rec ? json_get_string (rec, "session") : NULL;
  if (root == NULL || session == NULL || strchr (session, '/'))
    return;
  esbx_sha256_buf (root, strlen (root), hex);
  hex[16] = '\0';
  target = xasprintf (INDEX_DIR "/%s.%s", hex, session);
  n = readlinkat (dfd, target, buf, sizeof buf - 1);
  if (n > 0 && (buf[n] = '\0', atoi (buf) == slot))
    unlinkat (dfd, target, 0);
}

int
esbx_egress_slot_table (int dfd, int slot, char *name, size_t size)
{
  _cleanup_free_ char *rec_name = xasprintf ("%d.json", slot);
  _cleanup_json_ json_t *rec = NULL;
  char current[SHARED_TABLE_LEN];
  esbx_error_t e = NULL;
  const char *t;

  rec = json_parse_file_at (dfd, rec_name, &e);
  esbx_error_free (&e);
  t = rec ? json_get_string (rec, "table") : NULL;
  if (t == NULL || strncmp (t, SHARED_TABLE_PREFIX, strlen (SHARED_TABLE_PREFIX)) != 0)
    {
      if (shared_table (current, &e) < 0)
        {
          esbx_error_free (&e);
          return -1;
        }
      t = current;
    }
  if (strlen (t) >= size)
    return -1;
  strcpy (name, t);
  return 0;
}

/* Every element of slot N's link in the shared table, in one
   transaction; -1 when some could not be removed (the record is kept
   then, for gc to try again).  */
static int
drop_elements (int dfd, int slot, const struct slot_names *n)
{
  struct esbx_nft_key link = { .len = 0 };
  char table[64];
  esbx_error_t e = NULL;
  int r;

  if (esbx_egress_slot_table (dfd, slot, table, sizeof table) < 0)
    return 0;
  r = esbx_nft_table_exists (table, &e);
  if (r <= 0)
    {
      esbx_error_free (&e);
      return r;
    }
  esbx_nft_key_ifname (&link, n->veth);
  if (esbx_nft_elems_remove (table, session_sets, ARRAY_SIZE (session_sets), link.b, link.len, &e)
      < 0)
    {
      esbx_error_free (&e);
      return -1;
    }
  return 0;
}

void
esbx_egress_free_slot (int dfd, int slot)
{
  struct slot_names n;
  esbx_error_t e = NULL;
  static const char *const suffixes[] = { "pid", "resolv", "log", "seen", "requests" };
  size_t i;
  bool kept;

  if (slot_names (slot, &n, &e) < 0)
    {
      esbx_error_free (&e);
      return;
    }
  drop_index (dfd, slot);
  {
    char *argv[] = { (char *)"ip", (char *)"link", (char *)"delete", n.veth, NULL };
    ignore (argv, -1);
  }
  kept = drop_elements (dfd, slot, &n) < 0;
  /* A table of its own: a session started by an esbx before the shared
     table.  */
  if (esbx_nft_table_exists (n.table, &e) == 1)
    {
      char *argv[]
          = { (char *)"nft", (char *)"delete", (char *)"table", (char *)"inet", n.table, NULL };
      ignore (argv, -1);
    }
  esbx_error_free (&e);
  for (i = 0; i < ARRAY_SIZE (suffixes); i++)
    {
      _cleanup_free_ char *name = xasprintf ("%d.%s", slot, suffixes[i]);
      unlinkat (dfd, name, 0);
    }
  /* Last: while the record exists, gc finds what is left.  */
  if (!kept)
    {
      _cleanup_free_ char *name = xasprintf ("%d.json", slot);
      unlinkat (dfd, name, 0);
    }
}

void
esbx_egress_for_each_slot (esbx_store_t *store, int dfd,
                           void (*fn) (esbx_store_t *, int, int, const char *, void *), void *data)
{
  _cleanup_strv_ char **names = NULL;
  esbx_error_t e = NULL;
  char **p;

  names = esbx_list_dir_at (dfd, ".", &e);
  esbx_error_free (&e);
  for (p = names; p && *p; p++)
    {
      _cleanup_json_ json_t *rec = NULL;
      int slot = slot_of (*p);

      if (slot < 0 || (rec = slot_record (dfd, *p, store)) == NULL)
        continue;
      fn (store, dfd, slot, json_get_string (rec, "session"), data);
    }
}

static void
match_session (esbx_store_t *store, int dfd, int slot, const char *session, void *data)
{
  struct
  {
    const char *session;
    int slot;
  } *want = data;

  (void)store;
  (void)dfd;
  if (strcmp (session, want->session) == 0)
    want->slot = slot;
}

int
esbx_egress_slot (esbx_store_t *store, const char *session)
{
  _cleanup_close_ int dfd = -1;
  struct
  {
    const char *session;
    int slot;
  } want = { session, -1 };

  dfd = TEMP_FAILURE_RETRY (open (EGRESS_RUN, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dfd < 0)
    return -1;
  {
    _cleanup_free_ char *name = index_name (store, session);
    _cleanup_json_ json_t *rec = NULL;
    char buf[32];
    ssize_t n = readlinkat (dfd, name, buf, sizeof buf - 1);

    if (n > 0)
      {
        _cleanup_free_ char *rec_name = NULL;
        int slot;

        buf[n] = '\0';
        slot = atoi (buf);
        rec_name = xasprintf ("%d.json", slot);
        if (slot_of (rec_name) == slot && (rec = slot_record (dfd, rec_name, store)) != NULL
            && strcmp (json_get_string (rec, "session"), session) == 0)
          return slot;
      }
  }
  /* No index yet (slots taken before it): every record.  Once it exists,
     a session without a link has no slot (gc walks the records).  */
  if (!esbx_exists_at (dfd, INDEX_DIR))
    esbx_egress_for_each_slot (store, dfd, match_session, &want);
  return want.slot;
}

/* ---- setup ------------------------------------------------------------ */

void
esbx_egress_clear (struct esbx_egress *net)
{
  free (net->resolv_conf);
  net->resolv_conf = NULL;
  esbx_egress_proxy_clear (&net->proxy);
  net->slot = -1;
}

int
esbx_egress_prepare (esbx_store_t *store, const struct esbx_session *s, struct esbx_egress *net,
                     esbx_error_t *err)
{
  _cleanup_close_ int dfd = -1;
  _cleanup_free_ char *name = NULL, *text = NULL;
  struct slot_names n;
  int slot = -1;

  net->slot = -1;
  net->resolv_conf = NULL;
  memset (&net->proxy, 0, sizeof net->proxy);
  dfd = run_dir (err);
  if (dfd < 0 || take_slot (dfd, store, s->name, &slot, err) < 0)
    return esbx_error_wrap (err, "egress network of session `%s`", s->name);
  net->slot = slot;
  /* After the slot: a proxy that finds it does not end.  */
  if (esbx_egress_proxy_ensure (store, &net->proxy, err) < 0)
    return esbx_error_wrap (err, "egress network of session `%s`", s->name);
  if (slot_names (slot, &n, err) < 0)
    return -1;
  name = xasprintf ("%d.resolv", slot);
  text = xasprintf ("nameserver %s\n", n.gw);
  if (esbx_replace_file_at (dfd, name, text, strlen (text), 0644, err) < 0)
    return esbx_error_wrap (err, "egress network of session `%s`", s->name);
  net->resolv_conf = xasprintf (EGRESS_RUN "/%s", name);
  return 0;
}

static int
run (esbx_error_t *err, int netns_fd, const char *input, char *const *argv)
{
  return esbx_netcmd (argv, netns_fd, input, NULL, err);
}

#define RUN(err, ns, input, ...) run ((err), (ns), (input), (char *const[]){ __VA_ARGS__, NULL })

static int
check_forwarding (esbx_error_t *err)
{
  _cleanup_free_ char *buf = NULL;
  esbx_error_t e = NULL;
  size_t len;

  if (esbx_read_file_at (AT_FDCWD, "/proc/sys/net/ipv4/ip_forward", 16, &buf, &len, &e) < 0)
    {
      esbx_error_free (&e);
      return 0;
    }
  if (buf[0] != '1')
    return esbx_make_error_kind (err, ESBX_ERR_FAILED, 0,
                                 "the host does not forward IPv4 (sysctl net.ipv4.ip_forward=1, "
                                 "as Docker sets it)");
  return 0;
}

static int
set_forwarding (const char *veth, esbx_error_t *err)
{
  _cleanup_free_ char *path = xasprintf ("/proc/sys/net/ipv4/conf/%s/forwarding", veth);
  _cleanup_close_ int fd = TEMP_FAILURE_RETRY (open (path, O_WRONLY | O_CLOEXEC));

  if (fd < 0 || esbx_write_all (fd, "1", 1) < 0)
    return esbx_make_error (err, errno, "write `%s`", path);
  return 0;
}

static void append (char **buf, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

static void
append (char **buf, const char *fmt, ...)
{
  _cleanup_free_ char *piece = NULL, *old = *buf;
  va_list ap;

  va_start (ap, fmt);
  if (vasprintf (&piece, fmt, ap) < 0)
    abort ();
  va_end (ap);
  *buf = xasprintf ("%s%s", old ? old : "", piece);
}

/* The table of every egress session of the host (for the range RANGE/
   PREFIX): see docs/SECURITY.md, "Network".  Its rules apply to the
   links in the set `links` and tell sessions apart by their link, through
   sets whose keys start with it; a session's start adds its elements
   (session_elems), its end removes them (esbx_egress_free_slot).  A
   session's gateway 3128 and 53 are redirected to its store's proxy (map
   `redir`, from the session's own address only); the address entries of
   its allow-list without methods or a path are in `allowed` (every port)
   and `allowed_port`; names go through the proxy only.  Refused packets
   go through `refuse`, which counts them per link and destination in the
   sets `refused` and `refused_other` (read by esbx_egress_json) and
   rejects them.  Queries to the resolver over the rate are dropped and
   counted per link in `dns_limited`.

   The script is idempotent: the chains are declared, flushed and filled
   in one transaction, so that two esbx making the table at once, or one
   making it again, leave one copy of each rule and every set's elements.
   Its name carries a digest of its text: a change of the rules or of the
   range is a new table, never a table of mixed rules.  */
static const char *const shared_chains[]
    = { "refuse", "refuse_count", "prerouting", "forward",
        "egress", "input",        "ingress",    "postrouting" };
/* The new destinations a session's refused packets may add to `refused`
   and `refused_other`, shared by every session: 4096 at once, then one a
   second (`refused_new`), so that no session takes the others' room.
   Packets to destinations already there are counted always.  */
#define REFUSED_NEW_RATE  1
#define REFUSED_NEW_BURST 4096

static char *
shared_ruleset (const char *table, uint32_t range, unsigned prefix)
{
  _cleanup_free_ char *flush = NULL;
  char rng[INET_ADDRSTRLEN];
  char *out = NULL;
  size_t i;

  ipv4_text (range, rng);
  for (i = 0; i < ARRAY_SIZE (shared_chains); i++)
    append (&flush, "flush chain inet %s %s\n", table, shared_chains[i]);
  append (&out,
          "table inet %1$s {\n"
          "  set links { type ifname; }\n"
          "  set src { type ifname . ipv4_addr; }\n"
          "  map redir { type ifname . ipv4_addr . ipv4_addr . inet_proto . inet_service "
          ": inet_service; }\n"
          "  set proxy_dst { type ifname . ipv4_addr . inet_proto . inet_service; }\n"
          "  set dns_dst { type ifname . ipv4_addr . inet_service; }\n"
          "  set allowed { type ifname . ipv4_addr; flags interval; }\n"
          "  set allowed_port { type ifname . ipv4_addr . inet_proto . inet_service; "
          "flags interval; }\n"
          "  set refused { type ifname . ipv4_addr . inet_proto . inet_service; flags dynamic; "
          "counter; size 1048576; }\n"
          "  set refused_other { type ifname . ipv4_addr . inet_proto; flags dynamic; counter; "
          "size 262144; }\n"
          "  set refused_new { type ifname; flags dynamic; size 65536; }\n"
          "  set dns_meter { type ifname; flags dynamic; size 65536; }\n"
          "  set dns_limited { type ifname; flags dynamic; counter; size 65536; }\n"
          "  chain refuse { }\n"
          "  chain refuse_count { }\n"
          "  chain prerouting { type nat hook prerouting priority dstnat; policy accept; }\n"
          "  chain forward { type filter hook forward priority filter - 10; policy accept; }\n"
          "  chain egress { }\n"
          "  chain input { type filter hook input priority filter - 10; policy accept; }\n"
          "  chain ingress { }\n"
          "  chain postrouting { type nat hook postrouting priority srcnat; policy accept; }\n"
          "}\n"
          "%2$s"
          "table inet %1$s {\n"
          "  chain refuse {\n"
          "    meta l4proto { tcp, udp } iifname . ip daddr . meta l4proto . th dport "
          "@refused goto refuse_count\n"
          "    meta l4proto != { tcp, udp } meta nfproto ipv4 iifname . ip daddr . meta l4proto "
          "@refused_other goto refuse_count\n"
          "    update @refused_new { iifname limit rate over %7$u/second burst %8$u packets } "
          "reject with icmpx admin-prohibited\n"
          "    goto refuse_count\n"
          "  }\n"
          "  chain refuse_count {\n"
          "    meta l4proto { tcp, udp } add @refused "
          "{ iifname . ip daddr . meta l4proto . th dport }\n"
          "    meta l4proto != { tcp, udp } meta nfproto ipv4 add @refused_other "
          "{ iifname . ip daddr . meta l4proto }\n"
          "    reject with icmpx admin-prohibited\n"
          "  }\n"
          "  chain prerouting {\n"
          "    iifname @links meta nfproto ipv4 meta l4proto { tcp, udp } redirect to "
          ": iifname . ip saddr . ip daddr . meta l4proto . th dport map @redir\n"
          "  }\n"
          "  chain forward {\n"
          "    iifname @links jump egress\n"
          "    oifname @links ct state established,related accept\n"
          "    oifname @links drop\n"
          "  }\n"
          "  chain egress {\n"
          "    meta nfproto ipv6 drop\n"
          "    iifname . ip saddr != @src drop\n"
          "    ct state established,related accept\n"
          "    ip daddr 169.254.0.0/16 goto refuse\n"
          "    ip daddr 127.0.0.0/8 goto refuse\n"
          "    ip daddr %3$s/%4$u goto refuse\n"
          "    iifname . ip daddr @allowed accept\n"
          "    meta l4proto { tcp, udp } iifname . ip daddr . meta l4proto . th dport "
          "@allowed_port accept\n"
          "    goto refuse\n"
          "  }\n"
          "  chain input {\n"
          "    iifname @links jump ingress\n"
          "  }\n"
          "  chain ingress {\n"
          "    meta nfproto ipv6 drop\n"
          "    iifname . ip saddr != @src drop\n"
          "    iifname . ip daddr . udp dport @dns_dst update @dns_meter "
          "{ iifname limit rate over %5$u/second burst %6$u packets } "
          "add @dns_limited { iifname } drop\n"
          "    meta l4proto { tcp, udp } iifname . ip daddr . meta l4proto . th dport "
          "@proxy_dst ct status dnat accept\n"
          "    ct state established,related accept\n"
          "    goto refuse\n"
          "  }\n"
          "  chain postrouting {\n"
          "    iifname @links oifname != @links masquerade\n"
          "  }\n"
          "}\n",
          table, flush, rng, prefix, ESBX_EGRESS_DNS_RATE, ESBX_EGRESS_DNS_BURST, REFUSED_NEW_RATE,
          REFUSED_NEW_BURST);
  return out;
}

/* The shared table's name for the current range: its prefix and 12 hex
   digits of the digest of its script (made with the prefix alone).  */
static int
shared_table (char name[SHARED_TABLE_LEN], esbx_error_t *err)
{
  _cleanup_free_ char *text = NULL;
  char hex[ESBX_SHA256_HEX_LEN + 1];
  uint32_t range;
  unsigned prefix;

  if (egress_range (&range, &prefix, err) < 0)
    return -1;
  text = shared_ruleset (SHARED_TABLE_PREFIX, range, prefix);
  esbx_sha256_buf (text, strlen (text), hex);
  snprintf (name, SHARED_TABLE_LEN, SHARED_TABLE_PREFIX "%.12s", hex);
  return 0;
}

/* Make the shared table NAME unless it is there: one netlink question
   each time, an nft run (which reads every table) only the first.  */
static int
shared_table_ensure (const char *name, esbx_error_t *err)
{
  _cleanup_free_ char *text = NULL;
  uint32_t range;
  unsigned prefix;
  int r = esbx_nft_table_exists (name, err);

  if (r != 0)
    return r < 0 ? -1 : 0;
  if (egress_range (&range, &prefix, err) < 0)
    return -1;
  text = shared_ruleset (name, range, prefix);
  return RUN (err, -1, text, "nft", "-f", "-");
}

/* The CIDRs of ALLOW's address entries without methods or a path, in
   ADDR (network order of their first address) and PREFIX, port PORT
   (0: every port), without the ones another of the same port holds
   (CIDRs nest or are apart; a set refuses overlapping ranges).  */
struct cidr
{
  uint32_t first, last;
  unsigned port;
};

struct cidrs
{
  struct cidr *c;
  size_t n;
};

static bool
add_cidr (const struct esbx_egress_rule *r, const char *text, void *data)
{
  struct cidrs *cs = data;
  uint32_t mask = r->prefix ? ~(uint32_t)0 << (32 - r->prefix) : 0;

  (void)text;
  if (r->name == NULL && r->methods[0] == NULL && r->path == NULL)
    {
      cs->c[cs->n].first = r->addr & mask;
      cs->c[cs->n].last = cs->c[cs->n].first | ~mask;
      cs->c[cs->n].port = r->port;
      cs->n++;
    }
  return false;
}

static size_t
allowed_cidrs (const json_t *allow, struct cidr **out)
{
  struct cidrs cs = { .c = xmalloc0 ((json_len (allow) + 1) * sizeof (struct cidr)) };
  struct cidr *c = cs.c;
  size_t i, j, n, kept = 0;

  esbx_egress_rules_any (allow, add_cidr, &cs);
  n = cs.n;
  for (i = 0; i < n; i++)
    {
      bool held = false;

      for (j = 0; j < n && !held; j++)
        held = j != i && c[j].port == c[i].port && c[j].first <= c[i].first
               && c[i].last <= c[j].last
               && (c[j].first != c[i].first || c[j].last != c[i].last || j < i);
      if (!held)
        c[kept++] = c[i];
    }
  *out = c;
  return kept;
}

#define PROTO_TCP 6
#define PROTO_UDP 17

static struct esbx_nft_elem *
elem_next (struct esbx_nft_elem **v, size_t *n, const char *set, const char *link)
{
  struct esbx_nft_elem *e;

  *v = xrealloc (*v, (*n + 1) * sizeof **v);
  e = &(*v)[(*n)++];
  memset (e, 0, sizeof *e);
  e->set = set;
  esbx_nft_key_ifname (&e->key, link);
  return e;
}

/* The elements of slot N's session in the shared table: its link, its
   address, the redirections to PROXY and the proxy's ports it may reach
   on its gateway, the address entries of ALLOW.  */
static size_t
session_elems (const struct slot_names *n, const json_t *allow,
               const struct esbx_egress_proxy *proxy, struct esbx_nft_elem **out)
{
  static const uint8_t protos[] = { PROTO_TCP, PROTO_UDP };
  _cleanup_free_ struct cidr *c = NULL;
  struct esbx_nft_elem *v = NULL, *e;
  size_t count = 0, i, k, nc = allowed_cidrs (allow, &c);

  elem_next (&v, &count, "links", n->veth);
  e = elem_next (&v, &count, "src", n->veth);
  esbx_nft_key_ipv4 (&e->key, n->addr_a);
  for (k = 0; k < ARRAY_SIZE (protos); k++)
    {
      bool tcp = protos[k] == PROTO_TCP;
      uint16_t to = (uint16_t)(tcp ? proxy->http_port : proxy->dns_port);

      e = elem_next (&v, &count, "redir", n->veth);
      esbx_nft_key_ipv4 (&e->key, n->addr_a);
      esbx_nft_key_ipv4 (&e->key, n->gw_a);
      esbx_nft_key_u8 (&e->key, protos[k]);
      esbx_nft_key_port (&e->key, tcp ? ESBX_EGRESS_PROXY_PORT : 53);
      esbx_nft_data_port (&e->data, to);
      e = elem_next (&v, &count, "proxy_dst", n->veth);
      esbx_nft_key_ipv4 (&e->key, n->gw_a);
      esbx_nft_key_u8 (&e->key, protos[k]);
      esbx_nft_key_port (&e->key, to);
    }
  e = elem_next (&v, &count, "dns_dst", n->veth);
  esbx_nft_key_ipv4 (&e->key, n->gw_a);
  esbx_nft_key_port (&e->key, (uint16_t)proxy->dns_port);
  for (i = 0; i < nc; i++)
    for (k = 0; k < (c[i].port ? ARRAY_SIZE (protos) : 1); k++)
      {
        e = elem_next (&v, &count, c[i].port ? "allowed_port" : "allowed", n->veth);
        esbx_nft_key_ifname (&e->key_end, n->veth);
        esbx_nft_key_ipv4 (&e->key, c[i].first);
        esbx_nft_key_ipv4 (&e->key_end, c[i].last);
        if (c[i].port)
          {
            esbx_nft_key_u8 (&e->key, protos[k]);
            esbx_nft_key_u8 (&e->key_end, protos[k]);
            esbx_nft_key_port (&e->key, (uint16_t)c[i].port);
            esbx_nft_key_port (&e->key_end, (uint16_t)c[i].port);
          }
      }
  *out = v;
  return count;
}

/* Docker's iptables FORWARD policy is drop: its DOCKER-USER chain, where
   Docker wants others' exceptions, lets every egress link's traffic
   (`esbxe+`) through to the sessions' own tables, which decide.  One pair
   of rules for all, added once and left: a rule per link made the chain
   thousands of rules long.  One listing of the chain tells which of the
   two are there.  No such chain: nothing to do.  */
static int
add_forward_exception (esbx_error_t *err)
{
  static const char *const dirs[] = { "-i", "-o" };
  _cleanup_free_ char *listing = NULL;
  esbx_error_t e = NULL;
  size_t i;

  if (esbx_netcmd ((char *const[]){ (char *)"iptables", (char *)"-w", (char *)"-S",
                                    (char *)IPTABLES_CHAIN, NULL },
                   -1, NULL, &listing, &e)
      < 0)
    {
      esbx_error_free (&e);
      return 0;
    }
  for (i = 0; i < ARRAY_SIZE (dirs); i++)
    {
      _cleanup_free_ char *line = xasprintf (
          "-A " IPTABLES_CHAIN " %s " ESBX_EGRESS_LINK_PREFIX "+ -j ACCEPT\n", dirs[i]);
      const char *p = strstr (listing, line);

      if (p && (p == listing || p[-1] == '\n'))
        continue;
      if (RUN (err, -1, NULL, "iptables", "-w", "-I", IPTABLES_CHAIN, (char *)dirs[i],
               ESBX_EGRESS_LINK_PREFIX "+", "-j", "ACCEPT")
          < 0)
        return -1;
    }
  return 0;
}

/* NET's session in the shared table, before the holder's network exists
   (its elements name the link, not the namespace): run while the holder
   sets up.  Set elements only, over netlink: nothing of other sessions is
   read.  */
int
esbx_egress_rules (const struct esbx_session *s, const struct esbx_egress *net, esbx_error_t *err)
{
  _cleanup_free_ struct esbx_nft_elem *elems = NULL;
  const json_t *allow = json_get (s->record, "allow");
  _cleanup_json_ json_t *none = NULL;
  char table[SHARED_TABLE_LEN];
  struct slot_names n;
  size_t count;

  if (allow == NULL || allow->type != JSON_ARRAY)
    allow = none = json_new (JSON_ARRAY);
  if (check_forwarding (err) < 0 || slot_names (net->slot, &n, err) < 0
      || shared_table (table, err) < 0 || shared_table_ensure (table, err) < 0)
    goto fail;
  count = session_elems (&n, allow, &net->proxy, &elems);
  if (esbx_nft_elems_add (table, elems, count, err) < 0 || add_forward_exception (err) < 0)
    goto fail;
  return 0;
fail:
  return esbx_error_wrap (err, "egress network of session `%s`", s->name);
}

int
esbx_egress_link (const struct esbx_session *s, const struct esbx_egress *net, pid_t pid,
                  esbx_error_t *err)
{
  _cleanup_free_ char *gw_cidr = NULL, *addr_cidr = NULL, *pidtext = NULL;
  _cleanup_free_ char *nspath = NULL, *host_side = NULL, *session_side = NULL;
  _cleanup_close_ int ns = -1;
  struct slot_names n;

  if (slot_names (net->slot, &n, err) < 0)
    goto fail;
  nspath = xasprintf ("/proc/%d/ns/net", (int)pid);
  ns = TEMP_FAILURE_RETRY (open (nspath, O_RDONLY | O_CLOEXEC));
  if (ns < 0)
    {
      esbx_make_error (err, errno, "open `%s`", nspath);
      goto fail;
    }
  pidtext = xasprintf ("%d", (int)pid);
  gw_cidr = xasprintf ("%s/30", n.gw);
  addr_cidr = xasprintf ("%s/30", n.addr);
  /* Each side's links and addresses in one `ip -batch`.  */
  host_side = xasprintf ("link add %s type veth peer name eth0 netns %s\n"
                         "addr add %s dev %s\n"
                         "link set %s up\n",
                         n.veth, pidtext, gw_cidr, n.veth, n.veth);
  /* lo too: gVisor's netstack makes the loopback of what is up.  */
  session_side = xasprintf ("link set lo up\n"
                            "addr add %s dev eth0\n"
                            "link set eth0 up\n"
                            "route add default via %s\n",
                            addr_cidr, n.gw);
  if (RUN (err, -1, host_side, "ip", "-batch", "-") < 0 || set_forwarding (n.veth, err) < 0
      || RUN (err, ns, session_side, "ip", "-batch", "-") < 0)
    goto fail;
  return 0;
fail:
  return esbx_error_wrap (err, "egress network of session `%s`", s->name);
}
