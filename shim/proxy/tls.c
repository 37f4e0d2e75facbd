/* TLS of the proxy (GnuTLS).  The store's CA, made on first use:
 *
 *   ROOT/egress/        0700
 *   ROOT/egress/ca.key  0600, never in a session (the store is hidden
 *                       from every session, docs/SECURITY.md)
 *   ROOT/egress/ca.crt  0644
 *
 * and bundle.pem in the proxy's run directory: the host's CAs and this
 * one, which every egress session trusts (bound on its
 * /etc/ssl/certs/ca-certificates.crt, shim/holder/rootfs.c).  An
 * intercepted host gets a certificate for its name, signed by the CA with
 * one key of the process, made once per host and kept.  Destinations are
 * checked against the host's CAs and ESBX_EGRESS_UPSTREAM_CA.  */
#include "proxy.h"
#include "fs.h"
#include "utils.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <gnutls/x509.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CA_DIR      "egress"
#define HOST_BUNDLE "/etc/ssl/certs/ca-certificates.crt"
#define CERTS_MAX   4096

static gnutls_x509_crt_t ca_crt;
static gnutls_x509_privkey_t ca_key, leaf_key;
static unsigned char ca_key_id[64];
static size_t ca_key_id_len;
static gnutls_certificate_credentials_t client_cred;

struct host_cert
{
  struct host_cert *next;
  char *host;
  gnutls_certificate_credentials_t cred;
};
static struct host_cert *certs;
static size_t n_certs;
static pthread_mutex_t certs_lock = PTHREAD_MUTEX_INITIALIZER;

static int
tls_error (esbx_error_t *err, int r, const char *what)
{
  return esbx_make_error (err, 0, "%s: %s", what, gnutls_strerror (r));
}

static int
new_key (gnutls_x509_privkey_t *key, esbx_error_t *err)
{
  int r;

  if ((r = gnutls_x509_privkey_init (key)) < 0
      || (r = gnutls_x509_privkey_generate (*key, GNUTLS_PK_ECDSA,
                                            GNUTLS_CURVE_TO_BITS (GNUTLS_ECC_CURVE_SECP256R1), 0))
             < 0)
    return tls_error (err, r, "make a key");
  return 0;
}

static void
serial (gnutls_x509_crt_t crt)
{
  unsigned char s[16];

  gnutls_rnd (GNUTLS_RND_NONCE, s, sizeof s);
  s[0] &= 0x7f;
  gnutls_x509_crt_set_serial (crt, s, sizeof s);
}

static int
make_ca (int dfd, esbx_error_t *err)
{
  unsigned char buf[16384];
  size_t len = sizeof buf;
  _cleanup_free_ char *dn = xasprintf ("CN=esbx egress proxy CA %.40s", proxy.store->root);
  const char *bad = NULL;
  time_t now = time (NULL);
  int r;

  if (new_key (&ca_key, err) < 0)
    return -1;
  if ((r = gnutls_x509_crt_init (&ca_crt)) < 0 || (r = gnutls_x509_crt_set_version (ca_crt, 3)) < 0
      || (r = gnutls_x509_crt_set_key (ca_crt, ca_key)) < 0
      || (r = gnutls_x509_crt_set_dn (ca_crt, dn, &bad)) < 0
      || (r = gnutls_x509_crt_set_activation_time (ca_crt, now - 86400)) < 0
      || (r = gnutls_x509_crt_set_expiration_time (ca_crt, now + 10 * 365 * 86400L)) < 0
      || (r = gnutls_x509_crt_set_basic_constraints (ca_crt, 1, 0)) < 0
      || (r
          = gnutls_x509_crt_set_key_usage (ca_crt, GNUTLS_KEY_KEY_CERT_SIGN | GNUTLS_KEY_CRL_SIGN))
             < 0)
    return tls_error (err, r, "make the store's CA");
  serial (ca_crt);
  if ((r = gnutls_x509_crt_get_key_id (ca_crt, 0, buf, &len)) < 0
      || (r = gnutls_x509_crt_set_subject_key_id (ca_crt, buf, len)) < 0
      || (r = gnutls_x509_crt_sign2 (ca_crt, ca_crt, ca_key, GNUTLS_DIG_SHA256, 0)) < 0)
    return tls_error (err, r, "sign the store's CA");
  /* The key first, 0600 from its first byte; the certificate names it.  */
  len = sizeof buf;
  if ((r = gnutls_x509_privkey_export (ca_key, GNUTLS_X509_FMT_PEM, buf, &len)) < 0)
    return tls_error (err, r, "export the CA's key");
  if (esbx_write_file_atomic_at (dfd, "ca.key", buf, len, 0600, err) < 0)
    return -1;
  explicit_bzero (buf, len);
  len = sizeof buf;
  if ((r = gnutls_x509_crt_export (ca_crt, GNUTLS_X509_FMT_PEM, buf, &len)) < 0)
    return tls_error (err, r, "export the CA");
  return esbx_write_file_atomic_at (dfd, "ca.crt", buf, len, 0644, err);
}

static int
load_ca (int dfd, esbx_error_t *err)
{
  _cleanup_free_ char *key = NULL, *crt = NULL;
  size_t klen, clen;
  gnutls_datum_t d;
  struct stat st;
  int r;

  if (esbx_read_file_at (dfd, "ca.key", 1u << 20, &key, &klen, err) < 0
      || esbx_read_file_at (dfd, "ca.crt", 1u << 20, &crt, &clen, err) < 0)
    return esbx_error_wrap (err, "the store's egress CA");
  /* Whatever made it, only root reads the key.  */
  if (fstatat (dfd, "ca.key", &st, AT_SYMLINK_NOFOLLOW) == 0 && (st.st_mode & 077) != 0)
    {
      _cleanup_close_ int fd = openat (dfd, "ca.key", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0 || fchmod (fd, 0600) < 0)
        return esbx_make_error (err, errno, "chmod the egress CA's key");
    }
  d.data = (unsigned char *)key;
  d.size = (unsigned)klen;
  if ((r = gnutls_x509_privkey_init (&ca_key)) < 0
      || (r = gnutls_x509_privkey_import (ca_key, &d, GNUTLS_X509_FMT_PEM)) < 0)
    return tls_error (err, r, "the egress CA's key");
  explicit_bzero (key, klen);
  d.data = (unsigned char *)crt;
  d.size = (unsigned)clen;
  if ((r = gnutls_x509_crt_init (&ca_crt)) < 0
      || (r = gnutls_x509_crt_import (ca_crt, &d, GNUTLS_X509_FMT_PEM)) < 0)
    return tls_error (err, r, "the egress CA's certificate");
  return 0;
}

static int
write_bundle (int dirfd, esbx_error_t *err)
{
  _cleanup_free_ char *host = NULL, *all = NULL;
  unsigned char pem[8192];
  size_t hlen = 0, plen = sizeof pem;
  esbx_error_t e = NULL;
  int r;

  if ((r = gnutls_x509_crt_export (ca_crt, GNUTLS_X509_FMT_PEM, pem, &plen)) < 0)
    return tls_error (err, r, "export the CA");
  if (esbx_read_file_at (AT_FDCWD, HOST_BUNDLE, 16u << 20, &host, &hlen, &e) < 0)
    {
      esbx_error_free (&e);
      host = xstrdup ("");
      hlen = 0;
    }
  all = xasprintf ("%.*s%s%.*s", (int)hlen, host, hlen && host[hlen - 1] != '\n' ? "\n" : "",
                   (int)plen, (char *)pem);
  return esbx_write_file_atomic_at (dirfd, "bundle.pem", all, strlen (all), 0644, err);
}

int
proxy_tls_init (int dirfd, esbx_error_t *err)
{
  _cleanup_close_ int dfd = -1;
  int r;

  if (mkdirat (proxy.store->rootfd, CA_DIR, 0700) < 0 && errno != EEXIST)
    return esbx_make_error (err, errno, "mkdir `%s/" CA_DIR "`", proxy.store->root);
  dfd = TEMP_FAILURE_RETRY (
      openat (proxy.store->rootfd, CA_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (dfd < 0)
    return esbx_make_error (err, errno, "open `%s/" CA_DIR "`", proxy.store->root);
  fchmod (dfd, 0700);
  if (esbx_exists_at (dfd, "ca.key") ? load_ca (dfd, err) < 0 : make_ca (dfd, err) < 0)
    return -1;
  ca_key_id_len = sizeof ca_key_id;
  if ((r = gnutls_x509_crt_get_subject_key_id (ca_crt, ca_key_id, &ca_key_id_len, NULL)) < 0)
    ca_key_id_len = 0;
  if (new_key (&leaf_key, err) < 0)
    return -1;
  if ((r = gnutls_certificate_allocate_credentials (&client_cred)) < 0)
    return tls_error (err, r, "TLS credentials");
  gnutls_certificate_set_x509_system_trust (client_cred);
  if (proxy.upstream_ca
      && (r = gnutls_certificate_set_x509_trust_file (client_cred, proxy.upstream_ca,
                                                      GNUTLS_X509_FMT_PEM))
             < 0)
    return tls_error (err, r, "ESBX_EGRESS_UPSTREAM_CA");
  return write_bundle (dirfd, err);
}

static int
host_cred (const char *host, gnutls_certificate_credentials_t *out, esbx_error_t *err)
{
  gnutls_x509_crt_t crt = NULL;
  gnutls_certificate_credentials_t cred = NULL;
  struct host_cert *hc;
  struct in_addr lit;
  time_t now = time (NULL);
  int r;

  pthread_mutex_lock (&certs_lock);
  for (hc = certs; hc; hc = hc->next)
    if (strcmp (hc->host, host) == 0)
      {
        *out = hc->cred;
        pthread_mutex_unlock (&certs_lock);
        return 0;
      }
  pthread_mutex_unlock (&certs_lock);
  if ((r = gnutls_x509_crt_init (&crt)) < 0)
    return tls_error (err, r, "certificate");
  if ((r = gnutls_x509_crt_set_version (crt, 3)) < 0
      || (r = gnutls_x509_crt_set_key (crt, leaf_key)) < 0
      || (r = gnutls_x509_crt_set_dn_by_oid (crt, GNUTLS_OID_X520_COMMON_NAME, 0, host,
                                             (unsigned)strlen (host)))
             < 0
      || (r = gnutls_x509_crt_set_activation_time (crt, now - 3600)) < 0
      || (r = gnutls_x509_crt_set_expiration_time (crt, now + 30 * 86400L)) < 0
      || (r = gnutls_x509_crt_set_basic_constraints (crt, 0, -1)) < 0
      || (r = gnutls_x509_crt_set_key_usage (crt, GNUTLS_KEY_DIGITAL_SIGNATURE)) < 0
      || (r = gnutls_x509_crt_set_key_purpose_oid (crt, GNUTLS_KP_TLS_WWW_SERVER, 0)) < 0)
    goto fail;
  if (inet_pton (AF_INET, host, &lit) == 1)
    r = gnutls_x509_crt_set_subject_alt_name (crt, GNUTLS_SAN_IPADDRESS, &lit, 4, GNUTLS_FSAN_SET);
  else
    r = gnutls_x509_crt_set_subject_alt_name (crt, GNUTLS_SAN_DNSNAME, host,
                                              (unsigned)strlen (host), GNUTLS_FSAN_SET);
  if (r < 0)
    goto fail;
  serial (crt);
  if (ca_key_id_len)
    gnutls_x509_crt_set_authority_key_id (crt, ca_key_id, ca_key_id_len);
  if ((r = gnutls_x509_crt_sign2 (crt, ca_crt, ca_key, GNUTLS_DIG_SHA256, 0)) < 0
      || (r = gnutls_certificate_allocate_credentials (&cred)) < 0
      || (r = gnutls_certificate_set_x509_key (cred, &crt, 1, leaf_key)) < 0)
    goto fail;
  gnutls_x509_crt_deinit (crt);
  *out = cred;
  pthread_mutex_lock (&certs_lock);
  if (n_certs < CERTS_MAX)
    {
      hc = xmalloc0 (sizeof *hc);
      hc->host = xstrdup (host);
      hc->cred = cred;
      hc->next = certs;
      certs = hc;
      n_certs++;
    }
  pthread_mutex_unlock (&certs_lock);
  /* Past CERTS_MAX it is not kept, and lives as long as the process.  */
  return 0;
fail:
  if (cred)
    gnutls_certificate_free_credentials (cred);
  gnutls_x509_crt_deinit (crt);
  return tls_error (err, r, "certificate");
}

static ssize_t
pull (gnutls_transport_ptr_t p, void *buf, size_t len)
{
  struct conn *c = p;
  int one = 1;

  if (c->raw_off < c->raw_len)
    {
      size_t n = c->raw_len - c->raw_off;
      if (n > len)
        n = len;
      memcpy (buf, c->raw + c->raw_off, n);
      c->raw_off += n;
      return (ssize_t)n;
    }
  /* ACK at once: a peer that writes a head and a body in two segments
     (Nagle's algorithm on) would wait for the delayed ACK of the first.  */
  setsockopt (c->fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one);
  return TEMP_FAILURE_RETRY (recv (c->fd, buf, len, 0));
}

static ssize_t
push (gnutls_transport_ptr_t p, const void *buf, size_t len)
{
  struct conn *c = p;

  return TEMP_FAILURE_RETRY (send (c->fd, buf, len, MSG_NOSIGNAL));
}

static int
pull_timeout (gnutls_transport_ptr_t p, unsigned ms)
{
  struct conn *c = p;
  struct pollfd pfd = { .fd = c->fd, .events = POLLIN };

  if (c->raw_off < c->raw_len)
    return 1;
  return poll (&pfd, 1, ms == GNUTLS_INDEFINITE_TIMEOUT ? -1 : (int)ms);
}

static int
start (struct conn *c, unsigned flags, esbx_error_t *err)
{
  static const gnutls_datum_t h1 = { (unsigned char *)"http/1.1", 8 };
  int r;

  if ((r = gnutls_init (&c->tls, flags)) < 0)
    return tls_error (err, r, "TLS");
  gnutls_set_default_priority (c->tls);
  gnutls_transport_set_ptr (c->tls, c);
  gnutls_transport_set_pull_function (c->tls, pull);
  gnutls_transport_set_push_function (c->tls, push);
  gnutls_transport_set_pull_timeout_function (c->tls, pull_timeout);
  gnutls_handshake_set_timeout (c->tls, PROXY_IO_TIMEOUT * 1000);
  /* One request per connection, in HTTP/1.1: no HTTP/2 streams.  */
  gnutls_alpn_set_protocols (c->tls, &h1, 1, 0);
  return 0;
}

static int
handshake (struct conn *c, const char *what, esbx_error_t *err)
{
  int r;

  do
    r = gnutls_handshake (c->tls);
  while (r < 0 && !gnutls_error_is_fatal (r));
  if (r < 0)
    return tls_error (err, r, what);
  return 0;
}

int
proxy_tls_accept (struct conn *from, const char *host, esbx_error_t *err)
{
  gnutls_certificate_credentials_t cred = NULL;

  if (host_cred (host, &cred, err) < 0)
    return -1;
  /* What was read ahead is the TLS layer's now.  */
  from->raw = from->pending;
  from->raw_len = from->pending_len;
  from->raw_off = from->pending_off;
  from->pending = NULL;
  from->pending_len = from->pending_off = 0;
  if (start (from, GNUTLS_SERVER, err) < 0)
    return -1;
  gnutls_credentials_set (from->tls, GNUTLS_CRD_CERTIFICATE, cred);
  return handshake (from, "TLS with the session", err);
}

int
proxy_tls_connect (struct conn *up, const char *host, esbx_error_t *err)
{
  struct in_addr lit;

  if (start (up, GNUTLS_CLIENT, err) < 0)
    return -1;
  gnutls_credentials_set (up->tls, GNUTLS_CRD_CERTIFICATE, client_cred);
  if (inet_pton (AF_INET, host, &lit) != 1)
    gnutls_server_name_set (up->tls, GNUTLS_NAME_DNS, host, strlen (host));
  gnutls_session_set_verify_cert (up->tls, host, 0);
  return handshake (up, "TLS with the destination", err);
}
