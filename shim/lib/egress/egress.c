/* The egress network of a session: slot, veth, nftables table (see
   egress.h), and the store's proxy that its table leads to
   (proxy_launch.c).  Built with the ip, nft and iptables programs
   (netcmd.h); every object is named after the slot, so that cleanup needs
   nothing but the slot record.  */
#include "egress.h"
#include "events.h"
#include "fs.h"
#include "hash.h"
#include "netcmd.h"
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
  ipv4_text (base + 4u * (uint32_t)slot + 1, n->gw);
  ipv4_text (base + 4u * (uint32_t)slot + 2, n->addr);
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
  size_t len;
  int i, max, fd;

  if (egress_range (&base, &prefix, err) < 0)
    return -1;
  max = egress_max ((uint32_t)1 << (32 - prefix) >> 2);
  json_set_string (rec, "store", store->root);
  json_set_string (rec, "session", session);
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

void
esbx_egress_free_slot (int dfd, int slot)
{
  struct slot_names n;
  esbx_error_t e = NULL;
  static const char *const suffixes[] = { "pid", "resolv", "log", "seen", "requests" };
  size_t i;

  if (slot_names (slot, &n, &e) < 0)
    {
      esbx_error_free (&e);
      return;
    }
  drop_index (dfd, slot);
  {
    char *argv[]
        = { (char *)"nft", (char *)"delete", (char *)"table", (char *)"inet", n.table, NULL };
    ignore (argv, -1);
  }
  {
    char *argv[] = { (char *)"ip", (char *)"link", (char *)"delete", n.veth, NULL };
    ignore (argv, -1);
  }
  for (i = 0; i < ARRAY_SIZE (suffixes); i++)
    {
      _cleanup_free_ char *name = xasprintf ("%d.%s", slot, suffixes[i]);
      unlinkat (dfd, name, 0);
    }
  /* Last: while the record exists, gc finds what is left.  */
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

/* The table of slot N: see docs/SECURITY.md, "Network".  The session
   reaches its gateway's 3128 and 53, redirected to the store's proxy
   (PROXY), and the address entries of its allow-list without methods or
   a path; names go through the proxy only.  Refused packets go through
   `refuse`, which counts them per destination in the set `refused` (read
   by esbx_egress_json) and rejects them.  */
static char *
ruleset (const struct slot_names *n, const json_t *allow, uint32_t range, unsigned prefix,
         const struct esbx_egress_proxy *proxy)
{
  _cleanup_free_ char *rules = NULL;
  char rng[INET_ADDRSTRLEN];
  const json_t *a;
  char *out = NULL;
  size_t i;

  ipv4_text (range, rng);
  json_array_foreach (allow, i, a)
    {
      struct esbx_egress_rule r;
      esbx_error_t e = NULL;
      char addr[INET_ADDRSTRLEN];

      if (a->type != JSON_STRING || esbx_egress_rule_parse (a->text, &r, &e) < 0)
        {
          esbx_error_free (&e);
          continue;
        }
      if (r.name == NULL && r.methods[0] == NULL && r.path == NULL)
        {
          ipv4_text (r.addr, addr);
          append (&rules, "    ip daddr %s/%u", addr, r.prefix);
          if (r.port)
            append (&rules, " meta l4proto { tcp, udp } th dport %u", r.port);
          append (&rules, " accept\n");
        }
      esbx_egress_rule_clear (&r);
    }
  append (&out,
          "table inet %1$s {\n%2$s"
          "  set refused { type ipv4_addr . inet_proto . inet_service; flags dynamic; counter; "
          "size 4096; }\n"
          "  set refused_other { type ipv4_addr . inet_proto; flags dynamic; counter; "
          "size 1024; }\n"
          "  counter dns_limited { }\n"
          "  chain refuse {\n"
          "    meta l4proto { tcp, udp } add @refused { ip daddr . meta l4proto . th dport }\n"
          "    meta l4proto != { tcp, udp } meta nfproto ipv4 add @refused_other "
          "{ ip daddr . meta l4proto }\n"
          "    reject with icmpx admin-prohibited\n"
          "  }\n"
          "  chain prerouting {\n"
          "    type nat hook prerouting priority dstnat; policy accept;\n"
          "    iifname \"%3$s\" ip saddr %10$s ip daddr %7$s tcp dport %11$u redirect to :%8$u\n"
          "    iifname \"%3$s\" ip saddr %10$s ip daddr %7$s udp dport 53 redirect to :%9$u\n"
          "  }\n"
          "  chain forward {\n"
          "    type filter hook forward priority filter - 10; policy accept;\n"
          "    iifname \"%3$s\" jump egress\n"
          "    oifname \"%3$s\" ct state established,related accept\n"
          "    oifname \"%3$s\" drop\n"
          "  }\n"
          "  chain egress {\n"
          "    meta nfproto ipv6 drop\n"
          "    ip saddr != %10$s drop\n"
          "    ct state established,related accept\n"
          "    ip daddr 169.254.0.0/16 goto refuse\n"
          "    ip daddr 127.0.0.0/8 goto refuse\n"
          "    ip daddr %4$s/%5$u goto refuse\n"
          "%6$s"
          "    goto refuse\n"
          "  }\n"
          "  chain input {\n"
          "    type filter hook input priority filter - 10; policy accept;\n"
          "    iifname \"%3$s\" meta nfproto ipv6 drop\n"
          "    iifname \"%3$s\" ip saddr != %10$s drop\n"
          "    iifname \"%3$s\" ip daddr %7$s udp dport %9$u "
          "limit rate over %12$u/second burst %13$u packets counter name dns_limited drop\n"
          "    iifname \"%3$s\" ip daddr %7$s udp dport %9$u ct status dnat accept\n"
          "    iifname \"%3$s\" ip daddr %7$s tcp dport %8$u ct status dnat accept\n"
          "    iifname \"%3$s\" ct state established,related accept\n"
          "    iifname \"%3$s\" goto refuse\n"
          "  }\n"
          "  chain postrouting {\n"
          "    type nat hook postrouting priority srcnat; policy accept;\n"
          "    iifname \"%3$s\" oifname != \"%3$s\" masquerade\n"
          "  }\n"
          "}\n",
          n->table, "", n->veth, rng, prefix, rules ? rules : "", n->gw, proxy->http_port,
          proxy->dns_port, n->addr, ESBX_EGRESS_PROXY_PORT, ESBX_EGRESS_DNS_RATE,
          ESBX_EGRESS_DNS_BURST);
  return out;
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

/* The table of NET's slot, before the holder's network exists (its rules
   name the link, not the namespace): run while the holder sets up.  */
int
esbx_egress_rules (const struct esbx_session *s, const struct esbx_egress *net, esbx_error_t *err)
{
  _cleanup_free_ char *rules = NULL;
  const json_t *allow = json_get (s->record, "allow");
  _cleanup_json_ json_t *none = NULL;
  struct slot_names n;
  uint32_t range;
  unsigned prefix;

  if (allow == NULL || allow->type != JSON_ARRAY)
    allow = none = json_new (JSON_ARRAY);
  if (check_forwarding (err) < 0 || slot_names (net->slot, &n, err) < 0
      || egress_range (&range, &prefix, err) < 0)
    goto fail;
  rules = ruleset (&n, allow, range, prefix, &net->proxy);
  if (RUN (err, -1, rules, "nft", "-f", "-") < 0 || add_forward_exception (err) < 0)
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
