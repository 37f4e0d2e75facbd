#include "sync.h"
#include "fs.h"
#include "utils.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* On the wire, in host byte order (both ends run on one host).  */
struct header
{
  uint8_t type;
  uint8_t kind;  /* of an error */
  uint16_t len;  /* of the text that follows */
  int32_t value; /* the integer, or an error's errno */
};

#define TEXT_MAX (PIPE_BUF - sizeof (struct header))

static int
send_raw (int fd, char type, int kind, int value, const char *text)
{
  char buf[PIPE_BUF];
  struct header h = { .type = (uint8_t)type, .kind = (uint8_t)kind, .value = value };
  size_t len = text ? strlen (text) : 0;

  if (len > TEXT_MAX)
    len = TEXT_MAX;
  h.len = (uint16_t)len;
  memcpy (buf, &h, sizeof h);
  if (len)
    memcpy (buf + sizeof h, text, len);
  return esbx_write_all (fd, buf, sizeof h + len);
}

int
esbx_sync_send (int fd, char type, int value, const char *text)
{
  return send_raw (fd, type, 0, value, text);
}

int
esbx_error_send (int fd, const esbx_error_t *err)
{
  const struct esbx_error *e = err ? *err : NULL;

  if (e == NULL)
    return send_raw (fd, ESBX_SYNC_ERROR, ESBX_ERR_FAILED, 0, "failed");
  /* The message already ends with strerror (status): the status travels
     for the kind and the caller's tests, not to be printed twice.  */
  return send_raw (fd, ESBX_SYNC_ERROR, (int)e->kind, e->status, e->msg);
}

static int
read_full (int fd, void *buf, size_t len)
{
  size_t got = 0;

  while (got < len)
    {
      ssize_t n = TEMP_FAILURE_RETRY (read (fd, (char *)buf + got, len - got));
      if (n < 0)
        return -1;
      if (n == 0)
        break;
      got += (size_t)n;
    }
  return (int)got;
}

int
esbx_sync_recv (int fd, struct esbx_sync_msg *msg, esbx_error_t *remote, esbx_error_t *err)
{
  struct header h;
  char text[PIPE_BUF];
  int n;

  memset (msg, 0, sizeof *msg);
  n = read_full (fd, &h, sizeof h);
  if (n == 0)
    return 0;
  if (n != (int)sizeof h || h.len > TEXT_MAX)
    return esbx_make_error (err, n < 0 ? errno : EPROTO, "read a message of a child");
  if (read_full (fd, text, h.len) != h.len)
    return esbx_make_error (err, EPROTO, "read a message of a child");
  text[h.len] = '\0';
  msg->type = (char)h.type;
  msg->value = h.value;
  msg->text = xstrdup (text);
  if (msg->type == ESBX_SYNC_ERROR && remote)
    {
      struct esbx_error *e = xmalloc0 (sizeof *e);

      e->kind = (enum esbx_error_kind)h.kind;
      e->status = h.value;
      e->msg = xstrdup (text);
      esbx_error_free (remote);
      *remote = e;
    }
  return 1;
}

void
esbx_sync_msg_clear (struct esbx_sync_msg *msg)
{
  free (msg->text);
  msg->text = NULL;
}
