/* Set elements of an inet nftables table over netlink (nftset.h).  A
   request is a batch (one transaction) whose every message asks for an
   acknowledgement, so that the answers are exactly one per message.  */
#include "nftset.h"
#include "utils.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <libmnl/libmnl.h>
#include <libnftnl/expr.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>

#define BUF_SIZE (64u * 1024)

static void
key_put (struct esbx_nft_key *k, const void *v, size_t len, size_t padded)
{
  if (k->len + padded > sizeof k->b)
    abort ();
  memset (k->b + k->len, 0, padded);
  memcpy (k->b + k->len, v, len);
  k->len += padded;
}

void
esbx_nft_key_ifname (struct esbx_nft_key *k, const char *name)
{
  char b[16] = { 0 };

  strncpy (b, name, sizeof b - 1);
  key_put (k, b, sizeof b, sizeof b);
}

void
esbx_nft_key_ipv4 (struct esbx_nft_key *k, uint32_t a)
{
  uint8_t b[4] = { (uint8_t)(a >> 24), (uint8_t)(a >> 16), (uint8_t)(a >> 8), (uint8_t)a };

  key_put (k, b, 4, 4);
}

void
esbx_nft_key_u8 (struct esbx_nft_key *k, uint8_t v)
{
  key_put (k, &v, 1, 4);
}

void
esbx_nft_key_port (struct esbx_nft_key *k, uint16_t p)
{
  uint8_t b[2] = { (uint8_t)(p >> 8), (uint8_t)p };

  key_put (k, b, 2, 4);
}

void
esbx_nft_data_port (struct esbx_nft_key *k, uint16_t p)
{
  uint8_t b[2] = { (uint8_t)(p >> 8), (uint8_t)p };

  key_put (k, b, 2, 2);
}

struct nl
{
  struct mnl_socket *sock;
  uint32_t portid, seq;
};

static void
nl_close (struct nl *nl)
{
  if (nl->sock)
    mnl_socket_close (nl->sock);
  nl->sock = NULL;
}

static int
nl_open (struct nl *nl, esbx_error_t *err)
{
  nl->sock = mnl_socket_open2 (NETLINK_NETFILTER, SOCK_CLOEXEC);
  if (nl->sock == NULL)
    return esbx_make_error (err, errno, "open a netfilter netlink socket");
  if (mnl_socket_bind (nl->sock, 0, MNL_SOCKET_AUTOPID) < 0)
    {
      int saved = errno;
      nl_close (nl);
      return esbx_make_error (err, saved, "bind a netfilter netlink socket");
    }
  /* Acknowledgements without the message echoed (a batch of thousands of
     elements is acknowledged by a few headers); no answer within 10 s is
     an error, never a wait for ever.  */
  {
    struct timeval tv = { .tv_sec = 10 };
    int one = 1;

    (void)setsockopt (mnl_socket_get_fd (nl->sock), SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof one);
    (void)setsockopt (mnl_socket_get_fd (nl->sock), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  nl->portid = mnl_socket_get_portid (nl->sock);
  nl->seq = (uint32_t)time (NULL);
  return 0;
}

/* Read until COUNT acknowledgements came; the first error among them is
   the result (-errno), 0 when none.  */
static int
nl_acks (struct nl *nl, size_t count)
{
  _cleanup_free_ char *buf = xmalloc0 (BUF_SIZE);
  int first = 0;

  while (count > 0)
    {
      ssize_t n = mnl_socket_recvfrom (nl->sock, buf, BUF_SIZE);
      const struct nlmsghdr *h = (const struct nlmsghdr *)buf;
      int len = (int)n;

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return -errno;
      for (; mnl_nlmsg_ok (h, len); h = mnl_nlmsg_next (h, &len))
        if (h->nlmsg_type == NLMSG_ERROR && count > 0)
          {
            const struct nlmsgerr *e = mnl_nlmsg_get_payload (h);
            count--;
            if (e->error != 0 && first == 0)
              first = e->error;
          }
    }
  return first;
}

static struct nftnl_set *
set_of (const char *table, const char *name)
{
  struct nftnl_set *s = nftnl_set_alloc ();

  if (s == NULL)
    abort ();
  nftnl_set_set_str (s, NFTNL_SET_TABLE, table);
  nftnl_set_set_str (s, NFTNL_SET_NAME, name);
  nftnl_set_set_u32 (s, NFTNL_SET_FAMILY, NFPROTO_INET);
  return s;
}

static void
elem_into (struct nftnl_set *s, const struct esbx_nft_key *key, const struct esbx_nft_key *end,
           const struct esbx_nft_key *data)
{
  struct nftnl_set_elem *e = nftnl_set_elem_alloc ();

  if (e == NULL)
    abort ();
  nftnl_set_elem_set (e, NFTNL_SET_ELEM_KEY, key->b, (uint32_t)key->len);
  if (end && end->len)
    nftnl_set_elem_set (e, NFTNL_SET_ELEM_KEY_END, end->b, (uint32_t)end->len);
  if (data && data->len)
    nftnl_set_elem_set (e, NFTNL_SET_ELEM_DATA, data->b, (uint32_t)data->len);
  nftnl_set_elem_add (s, e);
}

/* Elements a message carries at most: its list of elements is one
   netlink attribute, whose length is 16 bits (ELEM_ROOM each at most).  */
#define ELEMS_PER_MSG 128
#define ELEM_ROOM     256
#define MSG_ROOM      512

/* One transaction: messages of type TYPE for the N elements ELEMS of
   TABLE, consecutive elements of one set in one message (ELEMS_PER_MSG
   at most).  The buffer holds them all (the kernel's socket buffer made
   as large): a teardown may remove thousands of refused destinations.  */
static int
transaction (uint16_t type, const char *table, const struct esbx_nft_elem *elems, size_t n,
             esbx_error_t *err)
{
  size_t size = 2 * (4096 + n * ELEM_ROOM + (n / ELEMS_PER_MSG + n + 2) * MSG_ROOM);
  _cleanup_free_ char *buf = NULL;
  struct mnl_nlmsg_batch *batch;
  struct nl nl = { 0 };
  size_t i = 0, msgs = 0;
  int r, sndbuf = (int)(size / 2);

  if (n == 0)
    return 0;
  if (nl_open (&nl, err) < 0)
    return -1;
  if (setsockopt (mnl_socket_get_fd (nl.sock), SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof sndbuf)
      < 0)
    (void)setsockopt (mnl_socket_get_fd (nl.sock), SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
  buf = xmalloc0 (size);
  batch = mnl_nlmsg_batch_start (buf, size / 2);
  nftnl_batch_begin (mnl_nlmsg_batch_current (batch), nl.seq++);
  mnl_nlmsg_batch_next (batch);
  while (i < n)
    {
      struct nftnl_set *s = set_of (table, elems[i].set);
      struct nlmsghdr *h;
      size_t k;

      for (k = 0; i < n && k < ELEMS_PER_MSG
                  && strcmp (elems[i].set, nftnl_set_get_str (s, NFTNL_SET_NAME)) == 0;
           i++, k++)
        elem_into (s, &elems[i].key, &elems[i].key_end, &elems[i].data);
      h = nftnl_nlmsg_build_hdr (mnl_nlmsg_batch_current (batch), type, NFPROTO_INET,
                                 NLM_F_CREATE | NLM_F_ACK, nl.seq++);
      nftnl_set_elems_nlmsg_build_payload (h, s);
      nftnl_set_free (s);
      mnl_nlmsg_batch_next (batch);
      msgs++;
    }
  nftnl_batch_end (mnl_nlmsg_batch_current (batch), nl.seq++);
  mnl_nlmsg_batch_next (batch);
  if (mnl_socket_sendto (nl.sock, mnl_nlmsg_batch_head (batch), mnl_nlmsg_batch_size (batch)) < 0)
    {
      r = -errno;
      mnl_nlmsg_batch_stop (batch);
      nl_close (&nl);
      return esbx_make_error (err, -r, "send to nftables");
    }
  mnl_nlmsg_batch_stop (batch);
  r = nl_acks (&nl, msgs);
  nl_close (&nl);
  if (r < 0)
    return esbx_make_error (err, -r, "nftables");
  return 0;
}

int
esbx_nft_elems_add (const char *table, const struct esbx_nft_elem *elems, size_t n,
                    esbx_error_t *err)
{
  if (transaction (NFT_MSG_NEWSETELEM, table, elems, n, err) < 0)
    return esbx_error_wrap (err, "add to the sets of table `inet %s`", table);
  return 0;
}

static int
table_cb (const struct nlmsghdr *h, void *data)
{
  (void)h;
  *(int *)data = 1;
  return MNL_CB_OK;
}

int
esbx_nft_table_exists (const char *table, esbx_error_t *err)
{
  _cleanup_free_ char *buf = xmalloc0 (BUF_SIZE);
  struct nftnl_table *t = nftnl_table_alloc ();
  struct nlmsghdr *h;
  struct nl nl = { 0 };
  int found = 0, r;
  ssize_t n;

  if (t == NULL)
    abort ();
  if (nl_open (&nl, err) < 0)
    {
      nftnl_table_free (t);
      return -1;
    }
  nftnl_table_set_str (t, NFTNL_TABLE_NAME, table);
  h = nftnl_nlmsg_build_hdr (buf, NFT_MSG_GETTABLE, NFPROTO_INET, NLM_F_ACK, nl.seq);
  nftnl_table_nlmsg_build_payload (h, t);
  nftnl_table_free (t);
  if (mnl_socket_sendto (nl.sock, h, h->nlmsg_len) < 0)
    {
      r = errno;
      nl_close (&nl);
      return esbx_make_error (err, r, "ask nftables for table `inet %s`", table);
    }
  do
    {
      n = mnl_socket_recvfrom (nl.sock, buf, BUF_SIZE);
      r = n < 0 ? -1 : mnl_cb_run (buf, (size_t)n, nl.seq, nl.portid, table_cb, &found);
    }
  while (r > 0);
  r = r < 0 ? errno : 0;
  nl_close (&nl);
  if (r == ENOENT)
    return 0;
  if (r)
    return esbx_make_error (err, r, "ask nftables for table `inet %s`", table);
  return found;
}

static int
elems_cb (const struct nlmsghdr *h, void *data)
{
  return nftnl_set_elems_nlmsg_parse (h, data) < 0 ? MNL_CB_ERROR : MNL_CB_OK;
}

/* The elements of set NAME of TABLE, into a set object.  */
static struct nftnl_set *
dump (const char *table, const char *name, esbx_error_t *err)
{
  _cleanup_free_ char *buf = xmalloc0 (BUF_SIZE);
  struct nftnl_set *s = set_of (table, name);
  struct nlmsghdr *h;
  struct nl nl = { 0 };
  ssize_t n;
  int r;

  if (nl_open (&nl, err) < 0)
    goto fail;
  h = nftnl_nlmsg_build_hdr (buf, NFT_MSG_GETSETELEM, NFPROTO_INET, NLM_F_DUMP | NLM_F_ACK, nl.seq);
  nftnl_set_elems_nlmsg_build_payload (h, s);
  if (mnl_socket_sendto (nl.sock, h, h->nlmsg_len) < 0)
    {
      esbx_make_error (err, errno, "read set `%s` of table `inet %s`", name, table);
      goto fail;
    }
  do
    {
      n = mnl_socket_recvfrom (nl.sock, buf, BUF_SIZE);
      r = n < 0 ? -1 : mnl_cb_run (buf, (size_t)n, nl.seq, nl.portid, elems_cb, s);
    }
  while (r > 0);
  if (r < 0)
    {
      esbx_make_error (err, errno, "read set `%s` of table `inet %s`", name, table);
      goto fail;
    }
  nl_close (&nl);
  return s;
fail:
  nl_close (&nl);
  nftnl_set_free (s);
  return NULL;
}

static void
key_of (struct nftnl_set_elem *e, uint16_t attr, struct esbx_nft_key *k)
{
  uint32_t len = 0;
  const void *v = nftnl_set_elem_get (e, attr, &len);

  k->len = 0;
  if (v && len <= sizeof k->b)
    {
      memcpy (k->b, v, len);
      k->len = len;
    }
}

static uint64_t
packets_of (struct nftnl_set_elem *e)
{
  uint32_t len = 0;
  struct nftnl_expr *x;
  const char *name;

  if (!nftnl_set_elem_is_set (e, NFTNL_SET_ELEM_EXPR))
    return 0;
  x = (struct nftnl_expr *)nftnl_set_elem_get (e, NFTNL_SET_ELEM_EXPR, &len);
  name = x ? nftnl_expr_get_str (x, NFTNL_EXPR_NAME) : NULL;
  if (name == NULL || strcmp (name, "counter") != 0)
    return 0;
  return nftnl_expr_get_u64 (x, NFTNL_EXPR_CTR_PACKETS);
}

int
esbx_nft_elems_read (const char *table, const char *set, const uint8_t *prefix, size_t prefix_len,
                     esbx_nft_elem_fn fn, void *data, esbx_error_t *err)
{
  struct nftnl_set *s = dump (table, set, err);
  struct nftnl_set_elems_iter *it;
  struct nftnl_set_elem *e;

  if (s == NULL)
    return -1;
  it = nftnl_set_elems_iter_create (s);
  /* iter_next returns the current element, then moves on.  */
  while (it && (e = nftnl_set_elems_iter_next (it)) != NULL)
    {
      struct esbx_nft_key key, end;

      key_of (e, NFTNL_SET_ELEM_KEY, &key);
      key_of (e, NFTNL_SET_ELEM_KEY_END, &end);
      if (key.len < prefix_len || memcmp (key.b, prefix, prefix_len) != 0)
        continue;
      fn (&key, &end, packets_of (e), data);
    }
  if (it)
    nftnl_set_elems_iter_destroy (it);
  nftnl_set_free (s);
  return 0;
}

/* The elements of a set being gathered, into a list of elements.  */
struct gather
{
  const char *set;
  struct esbx_nft_elem *v;
  size_t n;
};

static void
gather_one (const struct esbx_nft_key *key, const struct esbx_nft_key *end, uint64_t packets,
            void *data)
{
  struct gather *g = data;
  struct esbx_nft_elem *e;

  (void)packets;
  g->v = xrealloc (g->v, (g->n + 1) * sizeof *g->v);
  e = &g->v[g->n++];
  memset (e, 0, sizeof *e);
  e->set = g->set;
  e->key = *key;
  e->key_end = *end;
}

int
esbx_nft_elems_remove (const char *table, const char *const *sets, size_t nsets,
                       const uint8_t *prefix, size_t prefix_len, esbx_error_t *err)
{
  struct gather g = { NULL, NULL, 0 };
  esbx_error_t e = NULL;
  size_t i;
  int ret = 0;

  for (i = 0; i < nsets; i++)
    {
      g.set = sets[i];
      if (esbx_nft_elems_read (table, sets[i], prefix, prefix_len, gather_one, &g, &e) < 0)
        esbx_error_free (&e);
    }
  /* One transaction (each costs the kernel a commit); should an element
     have gone meanwhile (another esbx removing them too), which fails the
     whole, one at a time, and one gone is what was asked.  */
  if (transaction (NFT_MSG_DELSETELEM, table, g.v, g.n, &e) < 0)
    {
      esbx_error_free (&e);
      for (i = 0; i < g.n; i++)
        if (transaction (NFT_MSG_DELSETELEM, table, &g.v[i], 1, &e) < 0)
          {
            if (e->status != ENOENT && ret == 0)
              {
                *err = e;
                e = NULL;
                ret = -1;
              }
            esbx_error_free (&e);
          }
    }
  free (g.v);
  return ret;
}
