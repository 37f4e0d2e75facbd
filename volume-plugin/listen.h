/* esbxd: the sockets the gateway and the metrics endpoint listen on.  */
#ifndef ESBX_PLUGIN_LISTEN_H
#define ESBX_PLUGIN_LISTEN_H

#include "error.h"

/* Check that SPEC ("127.0.0.1:9595", "[::1]:9595", "localhost:9595") names
   a loopback address; anything else is a usage error, because what listens
   there is reachable without a token (metrics) or without TLS (gateway).  */
int esbx_loopback_check (const char *what, const char *spec, esbx_error_t *err);

/* Take over the listening sockets a service manager passed the systemd
   way (LISTEN_PID, LISTEN_FDS: fds 3 and up); returns how many.  The
   listeners below use the one bound to their address instead of making
   their own.  Call before anything else opens a descriptor.  */
int esbx_listen_adopt (esbx_error_t *err);
/* Remove the socket file at PATH when a listener stops, unless the service
   manager passed it (it outlives esbxd, queueing requests for the next
   start).  */
void esbx_listen_unlink (const char *path);
/* Close, with a warning, the passed sockets no listener claimed.  */
void esbx_listen_adopted_leftovers (void);

/* Bind and listen on the loopback address SPEC (or take the passed socket
   bound there); returns the socket.  */
int esbx_listen_loopback (const char *what, const char *spec, esbx_error_t *err);

/* Bind and listen on a unix socket at PATH, mode 0660, owned by GROUP when
   not NULL (or take the passed socket bound there, as it is).  A socket file nobody answers on is a
   leftover and is replaced; one that answers is refused.  */
int esbx_listen_unix (const char *path, const char *group, esbx_error_t *err);

#endif
