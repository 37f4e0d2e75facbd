/* The names an egress session's resolver refused, from its log.  dnsmasq
 * runs with --log-queries and --log-facility=/run/esbx/egress/N.log, and
 * writes "config NAME is NXDOMAIN" for every query that the allow-list
 * does not forward (its `--address=/#/`).  The log is read from where the
 * last reading stopped (whole lines only) and cut once read to its end and
 * larger than ESBX_EGRESS_LOG_CUT: dnsmasq appends (O_APPEND), so it goes
 * on at the new end.  It never grows past ESBX_EGRESS_LOG_MAX, dnsmasq's
 * RLIMIT_FSIZE (a session flooding its resolver between two readings
 * would otherwise fill the host's /run): past that, queries are answered
 * but not logged until the next reading cuts the log.  NAME comes from the
 * session: only printable ASCII is kept.  */
#include "egress.h"
#include "utils.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOG_READ_MAX (4u << 20)
#define NAME_MAX_LEN 255
#define REFUSED_MARK ": config "
#define REFUSED_TAIL " is NXDOMAIN"

/* The refused name of LINE (LEN bytes, no newline), lower-cased into BUF
   (NAME_MAX_LEN + 1 bytes); false when LINE is no refusal.  */
static bool
refused_name (const char *line, size_t len, char *buf)
{
  const char *p = memmem (line, len, REFUSED_MARK, strlen (REFUSED_MARK));
  size_t tail = strlen (REFUSED_TAIL), n, i;

  if (p == NULL || len < tail || memcmp (line + len - tail, REFUSED_TAIL, tail) != 0)
    return false;
  p += strlen (REFUSED_MARK);
  if (p > line + len - tail)
    return false;
  n = (size_t)(line + len - tail - p);
  if (n == 0 || n > NAME_MAX_LEN)
    return false;
  for (i = 0; i < n; i++)
    {
      if (p[i] <= ' ' || p[i] > '~')
        return false;
      buf[i] = (char)tolower ((unsigned char)p[i]);
    }
  buf[n] = '\0';
  return true;
}

static void
count (json_t *names, const char *name, size_t max, int64_t *other_queries)
{
  int64_t n = 0;

  if (json_get_int (names, name, &n) || json_len (names) < max)
    json_set_int (names, name, n + 1);
  else
    (*other_queries)++;
}

json_t *
esbx_egress_refused_names (int dfd, int slot, int64_t *offset, size_t max, int64_t *other_queries,
                           bool *full)
{
  _cleanup_free_ char *name = xasprintf ("%d.log", slot), *buf = NULL;
  _cleanup_close_ int fd = -1;
  json_t *names = json_new (JSON_OBJECT);
  size_t want, got = 0, start, i;
  struct stat st;

  *other_queries = 0;
  *full = false;
  fd = TEMP_FAILURE_RETRY (openat (dfd, name, O_RDWR | O_CLOEXEC | O_NOFOLLOW));
  if (fd < 0 || fstat (fd, &st) < 0 || !S_ISREG (st.st_mode))
    return names;
  /* A line does not fit in what is left below the limit: nearly full is
     full.  */
  *full = st.st_size + 512 >= (off_t)ESBX_EGRESS_LOG_MAX;
  /* Cut by another reader, or a new log: from its start.  */
  if (*offset < 0 || *offset > st.st_size)
    *offset = 0;
  want = (size_t)(st.st_size - *offset) < LOG_READ_MAX ? (size_t)(st.st_size - *offset)
                                                       : LOG_READ_MAX;
  buf = xmalloc (want + 1);
  while (got < want)
    {
      ssize_t r = TEMP_FAILURE_RETRY (pread (fd, buf + got, want - got, *offset + (off_t)got));
      if (r <= 0)
        break;
      got += (size_t)r;
    }
  for (start = 0, i = 0; i < got; i++)
    {
      char n[NAME_MAX_LEN + 1];

      if (buf[i] != '\n')
        continue;
      if (refused_name (buf + start, i - start, n))
        count (names, n, max, other_queries);
      start = i + 1;
    }
  /* A line longer than a whole read would stop the reading for good.  */
  if (start == 0 && got == LOG_READ_MAX)
    start = got;
  *offset += (int64_t)start;
  /* A full log ends in the part of a line that did not fit: cut it with
     the rest, or dnsmasq could never write again.  */
  if (*offset > ESBX_EGRESS_LOG_CUT && fstat (fd, &st) == 0 && (st.st_size == *offset || *full)
      && ftruncate (fd, 0) == 0)
    *offset = 0;
  return names;
}
