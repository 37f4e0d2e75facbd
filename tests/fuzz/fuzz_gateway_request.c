/* libFuzzer harness: the gateway's request handling (authentication header,
 * route matching, path names, JSON bodies, target resolution and scope
 * checks), served in-process by esbx_gateway_start on a unix socket of an
 * empty temporary store.
 *
 * Input: "METHOD\nPATH\nBODY".  The harness sends it as one HTTP/1.1
 * request with a Content-Length and, unless the first byte of the method is
 * odd, the bearer secret of an observe-only token: manage and runtime routes
 * are refused after their bodies are decoded, observe routes read an empty
 * store, so no input changes the state the next one sees.  */
#include "gateway/audit.h"
#include "gateway/gateway.h"
#include "layerstore.h"
#include "metrics.h"
#include "utils.h"

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

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  static char tmpl[] = "/tmp/esbx-fuzz-gateway.XXXXXX";
  esbx_error_t err = NULL;
  esbx_store_t *store = NULL;
  struct esbx_audit *audit = NULL;
  struct esbx_gateway *gw = NULL;
  struct esbx_token *token = NULL;
  struct esbx_gateway_config cfg = { 0 };

  (void)argc;
  (void)argv;
  /* The gateway may close a connection before the whole request is
     written: the write must fail with EPIPE, not end the harness.  */
  signal (SIGPIPE, SIG_IGN);
  if (mkdtemp (tmpl) == NULL)
    abort ();
  snprintf (sock_path, sizeof sock_path, "%s/gw.sock", tmpl);
  cfg.socket_path = sock_path;
  if (esbx_store_open (tmpl, &store, &err) < 0
      || esbx_token_create (store, ESBX_SCOPE_OBSERVE, NULL, NULL, 0, NULL, &secret, &token, &err)
             < 0
      || esbx_audit_open (store, &audit, &err) < 0
      || esbx_gateway_start (store, esbx_metrics_new (store), audit, &cfg, &gw, &err) < 0)
    {
      fprintf (stderr, "fuzz_gateway_request: %s\n", err ? err->msg : "?");
      abort ();
    }
  esbx_token_free (token);
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

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  const uint8_t *end = data + size, *nl1, *nl2;
  _cleanup_free_ char *method = NULL, *path = NULL, *head = NULL;
  _cleanup_close_ int fd = -1;
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  char buf[65536];
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

  strcpy (addr.sun_path, sock_path);
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect (fd, (struct sockaddr *)&addr, sizeof addr) < 0)
    abort ();
  if (write (fd, head, strlen (head)) < 0 || (blen && write (fd, nl2 + 1, blen) < 0))
    return 0;
  shutdown (fd, SHUT_WR);
  /* Read the whole answer: the request is done when the server closes.  */
  while (read (fd, buf, sizeof buf) > 0)
    ;
  return 0;
}
