/* Unit tests of the remote's parts that need no registry or etcd
   (layerstore/remote/): the store's remote configuration, the shared
   marker, the head's key and value, etcd's encodings, manifests' layer
   descriptors and the record manifest, digests, which failed reads are
   tried again, the Bearer challenges that ask for a token, and the layer
   blob made from a diff.  The bats suites 8x run the rest against a real
   docker-registry and etcd.  */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs.h"
#include "hash.h"
#include "remote.h"
#include "store_fixture.h"
#include "text.h"
#include "utils.h"

#define D1 "sha256:1111111111111111111111111111111111111111111111111111111111111111"
#define D2 "sha256:2222222222222222222222222222222222222222222222222222222222222222"
#define D3 "sha256:3333333333333333333333333333333333333333333333333333333333333333"
#define R1 "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

static void
test_digest_valid (void **state)
{
  (void)state;
  assert_true (esbx_registry_digest_valid (D1));
  assert_true (esbx_registry_digest_valid (R1));
  assert_false (esbx_registry_digest_valid (NULL));
  assert_false (esbx_registry_digest_valid (""));
  assert_false (esbx_registry_digest_valid ("sha256:"));
  /* Upper case, one digit short or long, another algorithm, a path.  */
  assert_false (esbx_registry_digest_valid (
      "sha256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"));
  assert_false (esbx_registry_digest_valid (
      "sha256:111111111111111111111111111111111111111111111111111111111111111"));
  assert_false (esbx_registry_digest_valid (D1 "1"));
  assert_false (esbx_registry_digest_valid (
      "sha512:1111111111111111111111111111111111111111111111111111111111111111"));
  assert_false (esbx_registry_digest_valid (
      "sha256:../../../../../../../../../../../../../../../../../../../../etc"));
}

static void
test_read_again (void **state)
{
  esbx_error_t failed = NULL, forbidden = NULL;

  (void)state;
  esbx_make_error (&failed, 0, "torn manifest");
  esbx_make_error_kind (&forbidden, ESBX_ERR_FORBIDDEN, 0, "the realm refused the credentials");
  assert_true (esbx_registry_read_again (failed, 1));
  assert_true (esbx_registry_read_again (failed, ESBX_REGISTRY_READ_ATTEMPTS - 1));
  assert_false (esbx_registry_read_again (failed, ESBX_REGISTRY_READ_ATTEMPTS));
  assert_false (esbx_registry_read_again (forbidden, 1));
  esbx_error_free (&failed);
  esbx_error_free (&forbidden);
}

static void
test_etcd_encodings (void **state)
{
  _cleanup_free_ char *key = esbx_etcd_b64 ("esbx/projects/p/head", 20);
  _cleanup_free_ char *bin = esbx_etcd_b64 ("a\0b\xff", 4);
  _cleanup_free_ char *back = NULL, *bad = NULL;
  _cleanup_json_ json_t *j = NULL;
  esbx_error_t err = NULL;
  size_t len = 0;
  int64_t v = -1;

  (void)state;
  assert_string_equal (key, "ZXNieC9wcm9qZWN0cy9wL2hlYWQ=");
  assert_string_equal (bin, "YQBi/w==");
  assert_int_equal (esbx_etcd_unb64 (bin, &back, &len), 0);
  assert_int_equal (len, 4);
  assert_memory_equal (back, "a\0b\xff", 4);
  assert_int_equal (back[4], '\0');
  assert_int_equal (esbx_etcd_unb64 ("not base64!", &bad, &len), -1);
  assert_null (bad);
  assert_int_equal (esbx_etcd_unb64 ("YQB", &bad, &len), -1);
  assert_null (bad);

  /* 64-bit numbers are strings on the gateway; a number does too.  */
  static const char doc[] = "{\"s\": \"9007199254740993\", \"n\": 42, \"x\": \"12x\", \"b\": true}";

  j = json_parse (doc, strlen (doc), &err);
  assert_non_null (j);
  assert_true (esbx_etcd_int64 (j, "s", &v));
  assert_int_equal (v, 9007199254740993LL);
  assert_true (esbx_etcd_int64 (j, "n", &v));
  assert_int_equal (v, 42);
  assert_false (esbx_etcd_int64 (j, "x", &v));
  assert_false (esbx_etcd_int64 (j, "b", &v));
  assert_false (esbx_etcd_int64 (j, "missing", &v));
  assert_int_equal (v, 0);
}

static void
test_head_key_and_value (void **state)
{
  char *ids[] = { "l1", "l2", NULL };
  _cleanup_free_ char *key = esbx_remote_head_key ("web");
  _cleanup_free_ char *value = esbx_remote_head_value (ids, 2, D1);

  (void)state;
  assert_string_equal (key, "esbx/projects/web/head");
  assert_string_equal (value, "{\"layers\":[\"l1\",\"l2\"],\"manifest\":\"" D1 "\"}");
}

/* A layer descriptor as esbx pushed it before records went into configs;
   DIFF_ID is added last.  */
static char *
layer (const char *media, const char *digest, const char *id, const char *record,
       const char *diff_id)
{
  _cleanup_free_ char *diff
      = diff_id ? xasprintf (", \"io.esbx.diff-id\": \"%s\"", diff_id) : xstrdup ("");

  return xasprintf ("{\"mediaType\": \"%s\", \"digest\": \"%s\", \"size\": 1234, "
                    "\"annotations\": {\"io.esbx.layer\": \"%s\", \"io.esbx.record\": \"%s\"%s}}",
                    media, digest, id, record, diff);
}

/* A layer descriptor as esbx pushes it: its record in the config
   CONFIG.  */
static char *
layer_config (const char *digest, const char *id, const char *config, const char *diff_id)
{
  return xasprintf ("{\"mediaType\": \"" ESBX_OCI_LAYER_GZ "\", \"digest\": \"%s\", "
                    "\"size\": 1234, \"annotations\": {\"io.esbx.layer\": \"%s\", "
                    "\"io.esbx.record-config\": \"%s\", \"io.esbx.diff-id\": \"%s\"}}",
                    digest, id, config, diff_id);
}

/* esbx_remote_descs_parse of a manifest with the layers LAYERS (JSON).  */
static int
parse (const char *layers, struct esbx_remote_desc **d, size_t *n, esbx_error_t *err)
{
  _cleanup_free_ char *text = xasprintf ("{\"schemaVersion\": 2, \"layers\": [%s]}", layers);
  _cleanup_json_ json_t *m = NULL;
  esbx_error_t perr = NULL;

  m = json_parse (text, strlen (text), &perr);
  if (m == NULL)
    fail_msg ("%s", perr->msg);
  return esbx_remote_descs_parse (m, d, n, err);
}

static void
refused (const char *layers, const char *msg)
{
  struct esbx_remote_desc *d = NULL;
  esbx_error_t err = NULL;
  size_t n = 99;

  assert_int_equal (parse (layers, &d, &n, &err), -1);
  assert_null (d);
  assert_int_equal (n, 99);
  assert_non_null (err);
  assert_string_equal (err->msg, msg);
  esbx_error_free (&err);
}

static void
test_descs_parse (void **state)
{
  _cleanup_free_ char *plain = layer (ESBX_OCI_LAYER, D1, "l1", R1, NULL);
  _cleanup_free_ char *gz = layer (ESBX_OCI_LAYER_GZ, D2, "l2", R1, D3);
  _cleanup_free_ char *both = xasprintf ("%s, %s", plain, gz);
  char *l = NULL, *two = NULL;
  _cleanup_json_ json_t *none = NULL;
  struct esbx_remote_desc *d = NULL;
  esbx_error_t err = NULL;
  size_t n = 0;

  (void)state;
  fixture_ok (parse (both, &d, &n, &err), &err);
  assert_int_equal (n, 2);
  assert_string_equal (d[0].id, "l1");
  assert_string_equal (d[0].digest, D1);
  assert_false (d[0].gzip);
  /* An uncompressed blob is its own diff id.  */
  assert_string_equal (d[0].diff_id, D1);
  assert_string_equal (d[0].record, R1);
  assert_int_equal (d[0].size, 1234);
  assert_string_equal (d[1].id, "l2");
  assert_true (d[1].gzip);
  assert_string_equal (d[1].digest, D2);
  assert_string_equal (d[1].diff_id, D3);
  assert_false (d[0].record_in_config);
  assert_false (d[1].record_in_config);
  esbx_remote_descs_free (d, n);
  d = NULL;
  /* Both forms in one stack: layers pushed before and after records went
     into configs.  */
  free (l);
  l = layer_config (D2, "l3", D1, D3);
  free (two);
  two = xasprintf ("%s, %s", plain, l);
  fixture_ok (parse (two, &d, &n, &err), &err);
  assert_int_equal (n, 2);
  assert_false (d[0].record_in_config);
  assert_true (d[1].record_in_config);
  assert_string_equal (d[1].record, D1);
  assert_string_equal (d[1].id, "l3");
  esbx_remote_descs_free (d, n);
  d = NULL;
  fixture_ok (parse ("", &d, &n, &err), &err);
  assert_int_equal (n, 0);
  esbx_remote_descs_free (d, n);

  none = json_parse ("{\"schemaVersion\": 2}", strlen ("{\"schemaVersion\": 2}"), &err);
  assert_non_null (none);
  n = 99;
  d = NULL;
  assert_int_equal (esbx_remote_descs_parse (none, &d, &n, &err), -1);
  assert_string_equal (err->msg, "manifest without layers");
  assert_null (d);
  esbx_error_free (&err);

  /* What a registry answers goes into paths and URLs: the first bad layer
     refuses the whole manifest.  */
  free (l);
  l = layer (ESBX_OCI_LAYER, D1, "../../etc", R1, NULL);
  free (two);
  two = xasprintf ("%s, %s", plain, l);
  refused (two, "manifest: layer 1 is not an esbx layer");
  free (l);
  l = layer (ESBX_OCI_LAYER, "sha256:../x", "l1", R1, NULL);
  refused (l, "manifest: layer 0 is not an esbx layer");
  free (l);
  l = layer (ESBX_OCI_LAYER, D1, "l1", "sha256:short", NULL);
  refused (l, "manifest: layer 0 is not an esbx layer");
  free (l);
  l = layer (ESBX_OCI_LAYER_GZ, D1, "l1", R1, "sha256:bad");
  refused (l, "manifest: layer 0 is not an esbx layer");
  refused ("{\"mediaType\": \"" ESBX_OCI_LAYER "\", \"digest\": \"" D1
           "\", \"annotations\": {\"io.esbx.layer\": \"l1\", \"io.esbx.record\": \"" R1 "\"}}",
           "manifest: layer 0 is not an esbx layer");
  free (l);
  l = layer (ESBX_OCI_LAYER_GZ, D1, "l1", R1, NULL);
  refused (l, "manifest: layer 0: media type `" ESBX_OCI_LAYER_GZ "` is not " ESBX_OCI_LAYER
              " or " ESBX_OCI_LAYER_GZ);
  free (l);
  l = layer ("application/vnd.docker.image.rootfs.diff.tar.gzip", D1, "l1", R1, D3);
  refused (l, "manifest: layer 0: media type `application/vnd.docker.image.rootfs.diff.tar.gzip` "
              "is not " ESBX_OCI_LAYER " or " ESBX_OCI_LAYER_GZ);
  free (l);
  l = layer_config (D2, "l3", "sha256:../../x", D3);
  refused (l, "manifest: layer 0 is not an esbx layer");
  /* A record in two places: which one would be read?  */
  refused ("{\"mediaType\": \"" ESBX_OCI_LAYER "\", \"digest\": \"" D1 "\", \"size\": 1, "
           "\"annotations\": {\"io.esbx.layer\": \"l1\", \"io.esbx.record\": \"" R1 "\", "
           "\"io.esbx.record-config\": \"" D2 "\"}}",
           "manifest: layer 0 is not an esbx layer");
  free (l);
  free (two);
}

/* esbx_remote_config_record of CONFIG: the record, or the error.  */
static void
config_record (const char *config, const char *want, const char *msg)
{
  _cleanup_free_ char *text = NULL;
  esbx_error_t err = NULL;
  size_t len = 0;
  int r = esbx_remote_config_record (config, strlen (config), &text, &len, &err);

  if (want)
    {
      fixture_ok (r, &err);
      assert_int_equal (len, strlen (want));
      assert_memory_equal (text, want, len);
      return;
    }
  assert_int_equal (r, -1);
  assert_null (text);
  assert_string_equal (err->msg, msg);
  esbx_error_free (&err);
}

static void
test_config_record (void **state)
{
  (void)state;
  /* The record comes back byte for byte: its id is the hash of it.  */
  config_record ("{\"os\":\"linux\",\"io.esbx.record\":\"{\\n  \\\"id\\\": \\\"l1\\\"\\n}\"}",
                 "{\n  \"id\": \"l1\"\n}", NULL);
  config_record ("{\"os\":\"linux\"}", NULL, "config: no `io.esbx.record` string");
  config_record ("{\"io.esbx.record\":{\"id\":\"l1\"}}", NULL,
                 "config: no `io.esbx.record` string");
  config_record ("[1]", NULL, "config: no `io.esbx.record` string");
}

static bool
challenged (long status, const char *header)
{
  struct esbx_http_response rs = { .status = status, .www_authenticate = (char *)header };

  return esbx_registry_challenged (&rs);
}

static void
test_challenges (void **state)
{
  (void)state;
  assert_true (challenged (401, "Bearer realm=\"https://auth.example/token\",service=\"reg\","
                                "scope=\"repository:p:pull,push\""));
  assert_true (challenged (401, "Bearer realm=https://auth.example/token"));
  assert_true (challenged (401, "bearer service=\"reg\", realm=\"https://a/t\""));
  assert_true (challenged (401, "Bearer realm=\"https://a/t\",error=\"insufficient_scope\""));
  assert_true (challenged (401, "Bearer realm=\"https://a/\\\"quoted\\\"\""));
  /* No realm, another scheme, a realm only in a value, no challenge, not
     a 401.  */
  assert_false (challenged (401, "Bearer service=\"reg\",scope=\"x\""));
  assert_false (challenged (401, "Bearer realmx=\"https://a/t\""));
  assert_false (challenged (401, "Bearer service=\"realm=https://a/t\""));
  assert_false (challenged (401, "Basic realm=\"registry\""));
  assert_false (challenged (401, "Bearer"));
  assert_false (challenged (401, NULL));
  assert_false (challenged (403, "Bearer realm=\"https://a/t\""));
  assert_false (challenged (200, "Bearer realm=\"https://a/t\""));
}

static void
test_check_url (void **state)
{
  char *long_url = xmalloc0 (1100);
  esbx_error_t err = NULL;

  (void)state;
  assert_int_equal (esbx_remote_check_url ("--registry", "http://127.0.0.1:5000/x", &err), 0);
  assert_int_equal (esbx_remote_check_url ("--etcd", "https://etcd:2379", &err), 0);
  assert_int_equal (esbx_remote_check_url ("--registry", "ftp://h/x", &err), -1);
  assert_int_equal (err->kind, ESBX_ERR_USAGE);
  assert_string_equal (err->msg,
                       "remote: --registry `ftp://h/x`: expected an http:// or https:// URL");
  esbx_error_free (&err);
  assert_int_equal (esbx_remote_check_url ("--etcd", "http://h/a b", &err), -1);
  esbx_error_free (&err);
  assert_int_equal (esbx_remote_check_url ("--etcd", "http://h/\nx", &err), -1);
  esbx_error_free (&err);
  assert_int_equal (esbx_remote_check_url ("--etcd", NULL, &err), -1);
  esbx_error_free (&err);
  memcpy (long_url, "http://h/", 9);
  memset (long_url + 9, 'a', 1020);
  assert_int_equal (esbx_remote_check_url ("--registry", long_url, &err), -1);
  esbx_error_free (&err);
  free (long_url);
}

static void
assert_show (const char *registry, const char *etcd, const char *compression)
{
  esbx_error_t err = NULL;
  _cleanup_json_ json_t *j = esbx_remote_show (store, &err);

  if (j == NULL)
    fail_msg ("%s", err->msg);
  assert_string_equal (json_get_string (j, "registry"), registry);
  assert_string_equal (json_get_string (j, "etcd"), etcd);
  assert_string_equal (json_get_string (j, "compression"), compression);
}

static void
test_remote_config (void **state)
{
  struct esbx_remote_config c
      = { .registry = "http://127.0.0.1:5000/team", .etcd = "http://e:2379//" };
  struct esbx_remote rm;
  _cleanup_free_ char *ca = NULL, *ca_abs = NULL;
  _cleanup_json_ json_t *j = NULL;
  esbx_error_t err = NULL;
  FILE *f;

  (void)state;
  unsetenv ("ESBX_REGISTRY");
  unsetenv ("ESBX_ETCD");
  assert_int_equal (esbx_remote_load (store, &rm, &err), -1);
  assert_int_equal (err->kind, ESBX_ERR_USAGE);
  assert_string_equal (err->msg, "no remote: run `esbx remote set --registry URL --etcd URL`");
  esbx_error_free (&err);

  fixture_ok (esbx_remote_set (store, &c, &err), &err);
  /* etcd's trailing slashes go, gzip is the default.  */
  assert_show ("http://127.0.0.1:5000/team", "http://e:2379", "gzip");
  fixture_ok (esbx_remote_load (store, &rm, &err), &err);
  assert_false (rm.uncompressed);
  assert_null (rm.ca);
  esbx_remote_free (&rm);

  /* Refused settings leave the remote as it was.  */
  c.compression = "zstd";
  assert_int_equal (esbx_remote_set (store, &c, &err), -1);
  assert_string_equal (err->msg, "remote: --compression `zstd`: expected gzip or none");
  esbx_error_free (&err);
  c.compression = "none";
  c.cert = "/etc/hostname";
  assert_int_equal (esbx_remote_set (store, &c, &err), -1);
  assert_string_equal (err->msg, "remote: --cert and --key go together");
  esbx_error_free (&err);
  c.cert = NULL;
  c.ca = "/nonexistent/ca.crt";
  assert_int_equal (esbx_remote_set (store, &c, &err), -1);
  assert_int_equal (err->kind, ESBX_ERR_USAGE);
  assert_non_null (strstr (err->msg, "remote: --ca `/nonexistent/ca.crt`"));
  esbx_error_free (&err);
  c.registry = "registry:5000";
  c.ca = NULL;
  assert_int_equal (esbx_remote_set (store, &c, &err), -1);
  esbx_error_free (&err);
  assert_show ("http://127.0.0.1:5000/team", "http://e:2379", "gzip");

  /* A CA named relatively is kept as an absolute path.  */
  ca = xasprintf ("%s/ca.crt", store->root);
  f = fopen (ca, "we");
  assert_non_null (f);
  fclose (f);
  ca_abs = realpath (ca, NULL);
  c.registry = "https://reg.example/team";
  c.ca = ca;
  fixture_ok (esbx_remote_set (store, &c, &err), &err);
  j = esbx_remote_show (store, &err);
  assert_non_null (j);
  assert_string_equal (json_get_string (j, "ca"), ca_abs);
  assert_string_equal (json_get_string (j, "compression"), "none");
  fixture_ok (esbx_remote_load (store, &rm, &err), &err);
  assert_true (rm.uncompressed);
  assert_string_equal (rm.etcd_auth.ca, ca_abs);
  esbx_remote_free (&rm);

  /* The environment wins over the file, esbxd's override over both.  */
  setenv ("ESBX_REGISTRY", "http://env-reg:5000/x", 1);
  assert_show ("http://env-reg:5000/x", "http://e:2379", "none");
  esbx_remote_override (NULL, "http://override:2379/");
  assert_show ("http://env-reg:5000/x", "http://override:2379", "none");
  esbx_remote_override (NULL, NULL);
  setenv ("ESBX_ETCD", "not-a-url", 1);
  assert_int_equal (esbx_remote_load (store, &rm, &err), -1);
  assert_string_equal (err->msg, "remote: etcd `not-a-url`: expected an http:// or https:// URL");
  esbx_error_free (&err);
  unsetenv ("ESBX_REGISTRY");
  unsetenv ("ESBX_ETCD");
  assert_show ("https://reg.example/team", "http://e:2379", "none");
}

static void
test_shared_marker (void **state)
{
  esbx_error_t err = NULL;

  (void)state;
  fixture_ok (esbx_project_create (store, "p", NULL, &err), &err);
  assert_false (esbx_project_is_shared (store, "p"));
  fixture_ok (esbx_remote_mark_shared (store, "p", &err), &err);
  assert_true (esbx_project_is_shared (store, "p"));
  assert_false (esbx_project_is_shared (store, "nosuch"));
  assert_false (esbx_project_is_shared (store, "../projects/p"));
  assert_int_equal (esbx_remote_mark_shared (store, "nosuch", &err), -1);
  esbx_error_free (&err);
}

/* The blob made from DIFF (a directory) with or without gzip.  */
static int
make_diff (const char *diff, bool gzip, struct esbx_remote_desc *d)
{
  struct esbx_registry reg = { .gzip = gzip };
  _cleanup_close_ int diffd = open (diff, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  esbx_error_t err = NULL;
  int fd;

  assert_true (diffd >= 0);
  fd = esbx_remote_make_diff (&reg, diffd, store->root, d, &err);
  if (fd < 0)
    fail_msg ("%s", err->msg);
  return fd;
}

static char *
digest_of (int fd, off_t *size)
{
  char hex[ESBX_SHA256_HEX_LEN + 1];
  esbx_error_t err = NULL;

  assert_int_equal (lseek (fd, 0, SEEK_SET), 0);
  fixture_ok (esbx_sha256_fd (fd, hex, size, &err), &err);
  return xasprintf ("sha256:%s", hex);
}

static void
test_layer_blob (void **state)
{
  _cleanup_free_ char *diff = xasprintf ("%s/diff", store->root);
  _cleanup_free_ char *p = NULL, *got = NULL, *got2 = NULL, *plain_digest = NULL;
  struct esbx_remote_desc a = { 0 }, b = { 0 }, plain = { 0 };
  _cleanup_close_ int fa = -1, fb = -1, fp = -1;
  unsigned char magic[2] = { 0 };
  char ustar[6] = "";
  off_t size = 0;
  FILE *f;

  (void)state;
  assert_int_equal (mkdir (diff, 0755), 0);
  p = xasprintf ("%s/README", diff);
  f = fopen (p, "we");
  assert_non_null (f);
  fputs ("hello\n", f);
  fclose (f);

  /* gzip: the digest is over the compressed bytes, the diff id over the
     tar, and the same diff gives the same blob.  */
  fa = make_diff (diff, true, &a);
  assert_true (a.gzip);
  got = digest_of (fa, &size);
  assert_string_equal (a.digest, got);
  assert_int_equal (a.size, size);
  assert_int_equal (pread (fa, magic, 2, 0), 2);
  assert_int_equal (magic[0], 0x1f);
  assert_int_equal (magic[1], 0x8b);
  assert_string_not_equal (a.digest, a.diff_id);
  fb = make_diff (diff, true, &b);
  got2 = digest_of (fb, &size);
  assert_string_equal (b.digest, a.digest);
  assert_string_equal (b.diff_id, a.diff_id);

  /* Uncompressed: a tar, its own diff id, the same tar as under gzip.  */
  fp = make_diff (diff, false, &plain);
  assert_false (plain.gzip);
  plain_digest = digest_of (fp, &size);
  assert_string_equal (plain.digest, plain_digest);
  assert_string_equal (plain.digest, plain.diff_id);
  assert_string_equal (plain.diff_id, a.diff_id);
  assert_int_equal (pread (fp, ustar, 5, 257), 5);
  assert_string_equal (ustar, "ustar");
  free (a.digest);
  free (a.diff_id);
  free (b.digest);
  free (b.diff_id);
  free (plain.digest);
  free (plain.diff_id);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_digest_valid),   cmocka_unit_test (test_read_again),
    cmocka_unit_test (test_etcd_encodings), cmocka_unit_test (test_head_key_and_value),
    cmocka_unit_test (test_descs_parse),    cmocka_unit_test (test_config_record),
    cmocka_unit_test (test_challenges),     cmocka_unit_test (test_check_url),
    cmocka_unit_test (test_remote_config),  cmocka_unit_test (test_shared_marker),
    cmocka_unit_test (test_layer_blob),
  };
  return cmocka_run_group_tests (tests, fixture_setup, fixture_teardown);
}
