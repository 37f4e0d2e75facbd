/* libFuzzer harness: the gateway's request handling (authentication header,
 * route matching, path names, JSON bodies, target resolution and scope
 * checks), served in-process by esbx_gateway_start on a unix socket of an
 * empty temporary store.
 *
 * Input: "METHOD\nPATH\nBODY".  The harness sends it as one HTTP/1.1
 * request with a Content-Length and, unless the first byte of the method is
 * odd, the bearer secret of an observe-only token: manage and runtime routes
 * are refused after their bodies are decoded, observe routes read an empty
 * store, so no input changes the state the next one sees.
 *
 * The gateway starts and stops around each input: stopping joins the
 * threads that served it, so nothing of one input is still running when
 * libFuzzer counts what it left allocated (a request still being served
 * looked like a leak).  */
#include "gateway/audit.h"
#include "gateway/gateway.h"
#include "layerstore.h"
#include "metrics.h"
#include "utils.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int LLVMFuzzerInitialize (int *argc, char ***argv);
int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static char sock_path[108];
static char *secret;
static esbx_store_t *store;
static struct esbx_metrics *metrics;
static struct esbx_audit *audit;

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  static char tmpl[] = "/tmp/esbx-fuzz-gateway.XXXXXX";
  esbx_error_t err = NULL;
  struct esbx_token *token = NULL;

  (void)argc;
  (void)argv;
  /* The gateway may close a connection before the whole request is
     written: the write must fail with EPIPE, not end the harness.  */
  signal (SIGPIPE, SIG_IGN);
  if (mkdtemp (tmpl) == NULL)
    abort ();
  snprintf (sock_path, sizeof sock_path, "%s/gw.sock", tmpl);
  if (esbx_store_open (tmpl, &store, &err) < 0
      || esbx_token_create (store, ESBX_SCOPE_OBSERVE, NULL, NULL, 0, NULL, &secret, &token, &err)
             < 0
      || esbx_audit_open (store, &audit, &err) < 0)
    {
      fprintf (stderr, "fuzz_gateway_request: %s\n", err ? err->msg : "?");
      abort ();
    }
  esbx_token_free (token);
  metrics = esbx_metrics_new (store);
  return 0;
}

/* Printable, single-line request-line parts: the HTTP parser is
   libmicrohttpd's, not ours.  */
static char *
token_of (const uint8_t *p, size_t n, const char *dflt)
{
  char *s = xmalloc (n + 1);
  size_t i, k = 0;

  for (i = 0; i < n; i++)
    if (p[i] > ' ' && p[i] < 0x7f)
      s[k++] = (char)p[i];
  s[k] = '\0';
  if (k == 0)
    {
      free (s);
      return xstrdup (dflt);
    }
  return s;
}

/* The whole of the N bytes at P, through interruptions (libFuzzer's timer
   is a signal without SA_RESTART).  */
static bool
send_all (int fd, const char *p, size_t n)
{
  while (n > 0)
    {
      ssize_t w = write (fd, p, n);

      if (w < 0 && errno == EINTR)
        continue;
      if (w <= 0)
        return false;
      p += w;
      n -= (size_t)w;
    }
  return true;
}

/* One request on a fresh connection, its answer read to the end.  */
static void
exchange (const char *head, const uint8_t *body, size_t blen)
{
  _cleanup_close_ int fd = -1;
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  char buf[65536];
  ssize_t n;

  strcpy (addr.sun_path, sock_path);
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect (fd, (struct sockaddr *)&addr, sizeof addr) < 0)
    abort ();
  if (!send_all (fd, head, strlen (head)) || !send_all (fd, (const char *)body, blen))
    return;
  shutdown (fd, SHUT_WR);
  /* The request is done when the server closes.  */
  while ((n = read (fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
    ;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  const uint8_t *end = data + size, *nl1, *nl2;
  _cleanup_free_ char *method = NULL, *path = NULL, *head = NULL;
  struct esbx_gateway_config cfg = { .socket_path = sock_path };
  struct esbx_gateway *gw = NULL;
  esbx_error_t err = NULL;
  bool auth;
  size_t blen;

  nl1 = memchr (data, '\n', size);
  if (nl1 == NULL)
    return 0;
  nl2 = memchr (nl1 + 1, '\n', (size_t)(end - nl1 - 1));
  if (nl2 == NULL)
    nl2 = end;
  auth = size > 0 && (data[0] & 1) == 0;
  method = token_of (data, (size_t)(nl1 - data), "GET");
  path = token_of (nl1 + 1, (size_t)(nl2 - nl1 - 1), "/");
  blen = nl2 < end ? (size_t)(end - nl2 - 1) : 0;
  head = xasprintf ("%s %s HTTP/1.1\r\nHost: esbx\r\nConnection: close\r\n%s%s%s"
                    "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                    method, path, auth ? "Authorization: Bearer " : "", auth ? secret : "",
                    auth ? "\r\n" : "", blen);
  if (esbx_gateway_start (store, metrics, audit, &cfg, &gw, &err) < 0)
    {
      fprintf (stderr, "fuzz_gateway_request: %s\n", err->msg);
      abort ();
    }
  exchange (head, blen ? nl2 + 1 : NULL, blen);
  esbx_gateway_stop (gw);
  return 0;
}
