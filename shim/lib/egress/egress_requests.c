/* The requests the store's proxy logged for a slot
 * (ESBX_EGRESS_RUN/N.requests, one JSON object a line: shim/proxy/reqlog.c).
 * Each line read past the offset kept in N.seen becomes an
 * "egress.request" event; the log is cut once read to its end and larger
 * than ESBX_EGRESS_LOG_CUT (the proxy appends, so it goes on at the new
 * end).  A line is the proxy's, but its host and path came from the
 * session: the object is parsed, and only known members of known types
 * are kept.  */
#include "egress.h"
#include "events.h"
#include "fs.h"
#include "utils.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define READ_MAX        (4u << 20)
#define REQUESTS_OFFSET "requests offset"

static json_t *
entry (const char *line, size_t len)
{
  static const char *const strs[]
      = { "time", "host", "method", "path", "verdict", "reason", "rule", "secrets" };
  static const char *const ints[] = { "port", "status", "sent", "received" };
  esbx_error_t e = NULL;
  _cleanup_json_ json_t *j = json_parse (line, len, &e);
  json_t *o;
  size_t i;

  esbx_error_free (&e);
  if (j == NULL || j->type != JSON_OBJECT)
    return NULL;
  o = json_new (JSON_OBJECT);
  for (i = 0; i < ARRAY_SIZE (strs); i++)
    if (json_get_string (j, strs[i]))
      json_set_string (o, strs[i], json_get_string (j, strs[i]));
  for (i = 0; i < ARRAY_SIZE (ints); i++)
    {
      int64_t v;
      if (json_get_int (j, ints[i], &v))
        json_set_int (o, ints[i], v);
    }
  if (json_get_bool (j, "intercepted", false))
    json_set (o, "intercepted", json_new_bool (true));
  return o;
}

/* The lines of SLOT's log from OFFSET, at most READ_MAX bytes, whole lines
   only: FN (line, len, data) for each; the offset past the last.  */
static int64_t
each_line (int fd, int64_t offset, void (*fn) (const char *, size_t, void *), void *data)
{
  _cleanup_free_ char *buf = NULL;
  struct stat st;
  size_t want, got = 0, start = 0, i;

  if (fstat (fd, &st) < 0 || !S_ISREG (st.st_mode))
    return offset;
  if (offset < 0 || offset > st.st_size)
    offset = 0;
  want = (size_t)(st.st_size - offset) < READ_MAX ? (size_t)(st.st_size - offset) : READ_MAX;
  buf = xmalloc (want + 1);
  while (got < want)
    {
      ssize_t r = TEMP_FAILURE_RETRY (pread (fd, buf + got, want - got, offset + (off_t)got));
      if (r <= 0)
        break;
      got += (size_t)r;
    }
  for (i = 0; i < got; i++)
    if (buf[i] == '\n')
      {
        fn (buf + start, i - start, data);
        start = i + 1;
      }
  if (start == 0 && got == READ_MAX)
    start = got;
  return offset + (int64_t)start;
}

struct record_ctx
{
  esbx_store_t *store;
  const char *session;
};

static void
record_one (const char *line, size_t len, void *data)
{
  struct record_ctx *c = data;
  json_t *o = entry (line, len);

  if (o)
    esbx_event_append (c->store, c->session, "egress.request", o, NULL);
}

void
esbx_egress_record_requests (esbx_store_t *store, const char *session, int dfd, int slot,
                             json_t *seen)
{
  _cleanup_free_ char *name = xasprintf ("%d.requests", slot);
  _cleanup_close_ int fd = -1;
  struct record_ctx c = { store, session };
  int64_t offset = 0;
  struct stat st;

  fd = TEMP_FAILURE_RETRY (openat (dfd, name, O_RDWR | O_CLOEXEC | O_NOFOLLOW));
  if (fd < 0)
    return;
  json_get_int (seen, REQUESTS_OFFSET, &offset);
  offset = each_line (fd, offset, record_one, &c);
  if (offset > ESBX_EGRESS_LOG_CUT && fstat (fd, &st) == 0 && st.st_size == offset
      && ftruncate (fd, 0) == 0)
    offset = 0;
  json_set_int (seen, REQUESTS_OFFSET, offset);
}

struct recent_ctx
{
  json_t *arr;
  size_t max;
};

static void
keep_recent (const char *line, size_t len, void *data)
{
  struct recent_ctx *c = data;
  json_t *o = entry (line, len);

  if (o == NULL)
    return;
  json_append (c->arr, o);
}

json_t *
esbx_egress_recent_requests (int dfd, int slot, size_t max)
{
  _cleanup_free_ char *name = xasprintf ("%d.requests", slot);
  _cleanup_close_ int fd = -1;
  struct recent_ctx c = { json_new (JSON_ARRAY), max };

  fd = TEMP_FAILURE_RETRY (openat (dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (fd >= 0)
    each_line (fd, 0, keep_recent, &c);
  if (json_len (c.arr) > max)
    {
      json_t *last = json_new (JSON_ARRAY);
      size_t i;

      for (i = json_len (c.arr) - max; i < json_len (c.arr); i++)
        json_append (last, json_take_at (c.arr, i));
      json_free (c.arr);
      return last;
    }
  return c.arr;
}
