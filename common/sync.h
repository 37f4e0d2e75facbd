/* esbx: messages from a child process to its parent over a pipe or a
 * socket, the one protocol of every such pair (the holder and its
 * launcher, an exec's command, monitor and caller, the confined import
 * child, the gateway's exec child, which writes to a memfd read once it
 * has ended).  Like crun's sync socket.
 *
 * A message is one write of at most PIPE_BUF bytes, so that it is never
 * interleaved or torn: a type byte chosen by the pair (for instance 'R'
 * ready, 'P' a pid), an integer, and an optional text.  An error travels
 * whole (kind, errno and message) as type ESBX_SYNC_ERROR and is made
 * again on the other side.  */
#ifndef ESBX_SYNC_H
#define ESBX_SYNC_H

#include "error.h"

#include <stdbool.h>

#define ESBX_SYNC_ERROR 'E'

struct esbx_sync_msg
{
  char type;
  int value;
  char *text; /* owned; "" when none was sent */
};

/* Send TYPE, VALUE and TEXT (may be NULL; cut to fit one write).  */
int esbx_sync_send (int fd, char type, int value, const char *text);
/* Send ERR (NULL: "failed") as an error message.  */
int esbx_error_send (int fd, const esbx_error_t *err);

/* Read the next message.  Returns 1 with *MSG filled, 0 at end of file,
   < 0 with ERR set when the stream is broken.  An error message is turned
   back into *REMOTE (kind, errno and text as sent) and returns 1 with type
   ESBX_SYNC_ERROR.  */
int esbx_sync_recv (int fd, struct esbx_sync_msg *msg, esbx_error_t *remote, esbx_error_t *err);
void esbx_sync_msg_clear (struct esbx_sync_msg *msg);

#endif
