/* Unit tests of shim/lib/egress/nftset.c's keys: the bytes the kernel
   holds for the shared egress table's elements, as `nft --debug=netlink
   add element` (nftables 1.0.6) sends them for the same elements.  A key
   laid out differently would be refused (a length the set does not have)
   or, worse, match nothing.  */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "nftset.h"

static const uint8_t link7[16] = { 'e', 's', 'b', 'x', 'e', '7' };

/* "esbxe7" . 198.18.1.0 . udp . 443 (a set of type ifname . ipv4_addr .
   inet_proto . inet_service): 78627365 00003765 00000000 00000000
   000112c6 00000011 0000bb01 in nft's words of host order.  */
static void
test_concatenation (void **state)
{
  static const uint8_t want[28] = { 'e', 's', 'b', 'x', 'e', '7', 0,  0, 0, 0, 0, 0,   0, 0,
                                    0,   0,   198, 18,  1,   0,   17, 0, 0, 0, 1, 187, 0, 0 };
  struct esbx_nft_key k = { .len = 0 };

  (void)state;
  esbx_nft_key_ifname (&k, "esbxe7");
  esbx_nft_key_ipv4 (&k, (198u << 24) | (18u << 16) | (1u << 8));
  esbx_nft_key_u8 (&k, 17);
  esbx_nft_key_port (&k, 443);
  assert_int_equal (k.len, 28);
  assert_memory_equal (k.b, want, 28);
  assert_memory_equal (k.b, link7, sizeof link7);
}

/* A map's data of type inet_service: 2 bytes, network order (41001 is
   a0 29), not padded.  */
static void
test_map_data_port (void **state)
{
  struct esbx_nft_key d = { .len = 0 };

  (void)state;
  esbx_nft_data_port (&d, 41001);
  assert_int_equal (d.len, 2);
  assert_int_equal (d.b[0], 0xa0);
  assert_int_equal (d.b[1], 0x29);
}

/* A link's name fills 16 bytes, zero-padded: "esbxe1" is not a prefix
   of "esbxe10"'s key.  */
static void
test_ifname_padding (void **state)
{
  struct esbx_nft_key a = { .len = 0 }, b = { .len = 0 };

  (void)state;
  esbx_nft_key_ifname (&a, "esbxe1");
  esbx_nft_key_ifname (&b, "esbxe10");
  assert_int_equal (a.len, 16);
  assert_int_equal (b.len, 16);
  assert_memory_not_equal (a.b, b.b, 16);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_concatenation),
    cmocka_unit_test (test_map_data_port),
    cmocka_unit_test (test_ifname_padding),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
