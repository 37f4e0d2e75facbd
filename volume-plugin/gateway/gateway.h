/* esbxd: the authenticated gateway (DESIGN.md, "Gateway and permissions").
   HTTP+JSON on a unix socket (mode 0660, group configurable) and optionally
   on a loopback TCP port, with TLS (or, when the operator says so, in
   clear: anyone who can read loopback traffic then reads the tokens).
   Every request carries `Authorization: Bearer TOKEN`; a missing or bad
   token gets 401, a request outside the token's scopes, project or
   session 403, and neither changes anything.  Every request, allowed or
   denied, goes to the audit log.  */
#ifndef ESBX_PLUGIN_GATEWAY_GATEWAY_H
#define ESBX_PLUGIN_GATEWAY_GATEWAY_H

#include "audit.h"
#include "error.h"
#include "layerstore.h"
#include "metrics.h"

#include <stdbool.h>
#include <stdint.h>

#define ESBX_GATEWAY_DEFAULT_SOCKET "/run/esbx/gateway.sock"
/* Limits of each gateway listener (http.h): connections waiting for their
   request head (and, again, connections served), such connections of one
   client process, and the seconds a request head may take.  */
#define ESBX_GATEWAY_DEFAULT_CONNECTIONS  512
#define ESBX_GATEWAY_DEFAULT_WAITING      64
#define ESBX_GATEWAY_DEFAULT_HEAD_TIMEOUT 15

struct esbx_gateway_config
{
  const char *socket_path;         /* NULL: no unix socket */
  const char *group;               /* NULL: root's group */
  const char *tcp;                 /* NULL: no TCP listener; else a loopback ADDR:PORT */
  const char *tls_cert;            /* the TCP listener's certificate chain, a PEM file */
  const char *tls_key;             /* and its private key; both or neither */
  bool tcp_insecure;               /* plain HTTP on TCP: tokens cross loopback in clear */
  unsigned max_connections;        /* 0: the default */
  unsigned max_waiting_per_client; /* 0: the default */
  unsigned head_timeout;           /* seconds; 0: the default */
  uint64_t exec_log_limit;         /* bytes per stream in an exec's logs; 0: the shim's */
  struct esbx_samples *samples;    /* the dashboard's charts (samples.h), or NULL */
};

struct esbx_gateway;

/* Whether CFG's TCP listener may start: TLS with both files readable, or in
   clear with TCP_INSECURE; a usage error naming the options otherwise.
   esbx_gateway_start checks it too; this is for checking before anything
   starts.  */
int esbx_gateway_check_tcp (const struct esbx_gateway_config *cfg, esbx_error_t *err);

int esbx_gateway_start (esbx_store_t *store, struct esbx_metrics *metrics, struct esbx_audit *audit,
                        const struct esbx_gateway_config *cfg, struct esbx_gateway **out,
                        esbx_error_t *err);
void esbx_gateway_stop (struct esbx_gateway *gw);

#endif
