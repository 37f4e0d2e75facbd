/* esbx shim: elements of the sets of an nftables table of the inet family,
   added, read and removed straight over netlink (libnftnl, libmnl): no nft
   process, and nothing read of other tables or of other sets.  The egress
   networks' shared table (egress.c) is made once with nft; a session's
   start and end are only these.  */
#ifndef ESBX_NFTSET_H
#define ESBX_NFTSET_H

#include "error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ESBX_NFT_KEY_MAX 64

/* A key (or data) as the kernel holds it: the parts of a concatenation
   each padded to 4 bytes, addresses and ports in network order.  */
struct esbx_nft_key
{
  uint8_t b[ESBX_NFT_KEY_MAX];
  size_t len;
};

void esbx_nft_key_ifname (struct esbx_nft_key *k, const char *name);
void esbx_nft_key_ipv4 (struct esbx_nft_key *k, uint32_t addr_host_order);
void esbx_nft_key_u8 (struct esbx_nft_key *k, uint8_t v);
void esbx_nft_key_port (struct esbx_nft_key *k, uint16_t port_host_order);
/* A port as a map's data: 2 bytes, not padded.  */
void esbx_nft_data_port (struct esbx_nft_key *k, uint16_t port_host_order);

/* One element of set SET: KEY, to KEY_END for a range (interval sets),
   with DATA for a map.  */
struct esbx_nft_elem
{
  const char *set;
  struct esbx_nft_key key, key_end, data;
};

/* Whether table TABLE exists: 1, 0, or < 0 (netlink failed, in ERR).  */
int esbx_nft_table_exists (const char *table, esbx_error_t *err);
/* Add the N elements ELEMS to their sets of TABLE in one transaction: all
   or none.  An element that is there already is no error.  */
int esbx_nft_elems_add (const char *table, const struct esbx_nft_elem *elems, size_t n,
                        esbx_error_t *err);

/* An element read from a set: its key, key end (len 0 when none) and the
   packets of its counter (0 when none).  */
typedef void (*esbx_nft_elem_fn) (const struct esbx_nft_key *key,
                                  const struct esbx_nft_key *key_end, uint64_t packets, void *data);
/* Call FN for each element of set SET of TABLE whose key starts with
   PREFIX (PREFIX_LEN bytes).  */
int esbx_nft_elems_read (const char *table, const char *set, const uint8_t *prefix,
                         size_t prefix_len, esbx_nft_elem_fn fn, void *data, esbx_error_t *err);
/* Remove from the NSETS sets SETS of TABLE every element whose key starts
   with PREFIX, in one transaction (one at a time should one have gone
   meanwhile).  A set that does not exist has none.  */
int esbx_nft_elems_remove (const char *table, const char *const *sets, size_t nsets,
                           const uint8_t *prefix, size_t prefix_len, esbx_error_t *err);

#endif
