/* esbxd's configuration file (/etc/esbx/esbxd.conf by default): settings
   an operator changes without restarting the daemon, read at start and
   again on SIGHUP.  One `key = value` per line; `#` starts a comment.

     default-project = NAME   project of Docker volumes created without
                              `-o project=` (volumes-without-options)
     registry = URL           the store's remote (docs/SCALE-OUT.md), over
     etcd = URL               $ESBX_REGISTRY/$ESBX_ETCD and ROOT/remote.json
     gateway-tls-cert = FILE  TLS of the gateway's TCP listener (PEM); read
     gateway-tls-key = FILE   at start only: a change takes a restart */
#ifndef ESBX_PLUGIN_CONFIG_H
#define ESBX_PLUGIN_CONFIG_H

#include "error.h"

#include <stdbool.h>

#define ESBX_CONFIG_DEFAULT_PATH "/etc/esbx/esbxd.conf"

struct esbx_config
{
  char *default_project; /* NULL: none */
  char *registry;        /* NULL: none */
  char *etcd;
  char *tls_cert; /* NULL: none */
  char *tls_key;
};

/* Read PATH into *OUT (cleared first).  A missing file is an empty
   configuration unless MUST_EXIST; a line it cannot use is an error naming
   the file and the line, and *OUT is left empty.  */
int esbx_config_load (const char *path, bool must_exist, struct esbx_config *out,
                      esbx_error_t *err);
void esbx_config_clear (struct esbx_config *c);

#endif
