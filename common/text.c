#include "text.h"
#include "utils.h"

#include <ctype.h>
#include <inttypes.h>
#include <string.h>
#include <sys/random.h>

bool
esbx_name_valid (const char *name)
{
  size_t i, len;

  if (name == NULL)
    return false;
  len = strlen (name);
  if (len == 0 || len > 128 || !isalnum ((unsigned char)name[0]))
    return false;
  for (i = 1; i < len; i++)
    {
      unsigned char c = name[i];
      if (!(isalnum (c) || c == '_' || c == '.' || c == '-') || c > 127)
        return false;
    }
  return true;
}

int
esbx_check_name (const char *what, const char *name, esbx_error_t *err)
{
  _cleanup_free_ char *shown = NULL;

  if (esbx_name_valid (name))
    return 0;
  shown = esbx_quote_path (name ? name : "");
  return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "invalid %s name `%s`: must match %s", what,
                               shown, ESBX_NAME_RULE);
}

/* Length of the valid UTF-8 sequence at s (at most len bytes), 0 if none.  */
static size_t
utf8_seq (const unsigned char *s, size_t len)
{
  size_t n, i;
  uint32_t cp;

  if (s[0] < 0x80)
    return 1;
  if (s[0] >= 0xc2 && s[0] <= 0xdf)
    n = 2, cp = s[0] & 0x1f;
  else if (s[0] >= 0xe0 && s[0] <= 0xef)
    n = 3, cp = s[0] & 0x0f;
  else if (s[0] >= 0xf0 && s[0] <= 0xf4)
    n = 4, cp = s[0] & 0x07;
  else
    return 0;
  if (n > len)
    return 0;
  for (i = 1; i < n; i++)
    {
      if ((s[i] & 0xc0) != 0x80)
        return 0;
      cp = (cp << 6) | (s[i] & 0x3f);
    }
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff))
      || (cp >= 0xd800 && cp <= 0xdfff))
    return 0;
  return n;
}

bool
esbx_utf8_valid (const char *s, size_t len)
{
  const unsigned char *p = (const unsigned char *)s;
  size_t i = 0, n;

  while (i < len)
    {
      n = utf8_seq (p + i, len - i);
      if (n == 0)
        return false;
      i += n;
    }
  return true;
}

/* How a text is rewritten: what an unsafe sequence is, and what it
   becomes.  */
enum rewrite
{
  REPLACE_INVALID, /* invalid UTF-8 → U+FFFD */
  HEX_CONTROLS,    /* invalid UTF-8 and control bytes → \xHH */
  HEX_LINE,        /* also backslash and C1 controls, byte by byte */
};

/* Whether the N-byte sequence at P (N == 0: an invalid byte) is unsafe.  */
static bool
unsafe (enum rewrite how, const unsigned char *p, size_t n)
{
  if (n == 0)
    return true;
  if (how == REPLACE_INVALID)
    return false;
  if (n == 1)
    return p[0] < 0x20 || p[0] == 0x7f || (how == HEX_LINE && p[0] == '\\');
  /* U+0080..U+009F: some terminals take them as escape sequences.  */
  return how == HEX_LINE && n == 2 && p[0] == 0xc2 && p[1] < 0xa0;
}

/* LEN bytes at S, with every unsafe sequence rewritten as HOW says; at
   most four output bytes per input byte.  */
static char *
rewrite (const char *s, size_t len, enum rewrite how)
{
  const unsigned char *p = (const unsigned char *)s;
  char *out = xmalloc (len * 4 + 1), *o = out;
  size_t i = 0, n, k, span;

  while (i < len)
    {
      n = utf8_seq (p + i, len - i);
      if (!unsafe (how, p + i, n))
        {
          memcpy (o, p + i, n);
          o += n;
          i += n;
          continue;
        }
      if (how == REPLACE_INVALID)
        {
          memcpy (o, "\xef\xbf\xbd", 3);
          o += 3;
          i++;
          continue;
        }
      span = how == HEX_LINE && n ? n : 1;
      for (k = 0; k < span; k++)
        o += sprintf (o, "\\x%02x", p[i + k]);
      i += span;
    }
  *o = '\0';
  return out;
}

char *
esbx_utf8_sanitize (const char *s, size_t len)
{
  return rewrite (s, len, REPLACE_INVALID);
}

char *
esbx_quote_path (const char *s)
{
  return rewrite (s, strlen (s), HEX_CONTROLS);
}

char *
esbx_escape_line (const char *s)
{
  return rewrite (s, strlen (s), HEX_LINE);
}

char *
esbx_rfc3339 (const struct timespec *ts)
{
  struct tm tm;
  char buf[64];

  gmtime_r (&ts->tv_sec, &tm);
  strftime (buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return xasprintf ("%s.%09ldZ", buf, (long)ts->tv_nsec);
}

char *
esbx_rfc3339_now (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_REALTIME, &ts);
  return esbx_rfc3339 (&ts);
}

char *
esbx_hex (const unsigned char *bytes, size_t len)
{
  static const char digits[] = "0123456789abcdef";
  char *out = xmalloc (len * 2 + 1);
  size_t i;

  for (i = 0; i < len; i++)
    {
      out[2 * i] = digits[bytes[i] >> 4];
      out[2 * i + 1] = digits[bytes[i] & 0xf];
    }
  out[2 * len] = '\0';
  return out;
}

char *
esbx_random_hex (size_t len)
{
  unsigned char buf[64];
  size_t got = 0;
  ssize_t r;

  if (len > sizeof buf)
    abort ();
  while (got < len)
    {
      r = getrandom (buf + got, len - got, 0);
      if (r < 0 && errno != EINTR)
        abort ();
      if (r > 0)
        got += r;
    }
  return esbx_hex (buf, len);
}

static int
parse_suffixed (const char *s, const char *units, const uint64_t *mult, uint64_t *out)
{
  char *end;
  const char *u;
  unsigned long long v;

  if (s == NULL || !isdigit ((unsigned char)s[0]))
    return -1;
  errno = 0;
  v = strtoull (s, &end, 10);
  if (errno != 0)
    return -1;
  if (*end == '\0')
    {
      *out = v;
      return 0;
    }
  if (end[1] != '\0' || (u = strchr (units, *end)) == NULL)
    return -1;
  if (v > UINT64_MAX / mult[u - units])
    return -1;
  *out = v * mult[u - units];
  return 0;
}

int
esbx_parse_size (const char *s, uint64_t *out, esbx_error_t *err)
{
  static const uint64_t mult[]
      = { 1024ull, 1024ull, 1024ull << 10, 1024ull << 10, 1024ull << 20, 1024ull << 20 };

  if (parse_suffixed (s, "kKmMgG", mult, out) < 0)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "invalid size `%s`: expected a number with k, M or G", s);
  return 0;
}

int
esbx_parse_duration (const char *s, int64_t *seconds, esbx_error_t *err)
{
  static const uint64_t mult[] = { 1, 60, 3600, 86400 };
  uint64_t v;

  if (parse_suffixed (s, "smhd", mult, &v) < 0 || v > INT64_MAX)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "invalid duration `%s`: expected e.g. 30s, 15m, 2h or 7d", s);
  *seconds = (int64_t)v;
  return 0;
}

bool
esbx_has_prefix (const char *s, const char *prefix)
{
  return strncmp (s, prefix, strlen (prefix)) == 0;
}

char *
esbx_url_escape (const char *s)
{
  static const char hex[] = "0123456789ABCDEF";
  char *out = xmalloc (strlen (s) * 3 + 1), *o = out;

  for (; *s; s++)
    {
      unsigned char c = (unsigned char)*s;

      if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'
          || c == '.' || c == '_' || c == '~')
        *o++ = (char)c;
      else
        {
          *o++ = '%';
          *o++ = hex[c >> 4];
          *o++ = hex[c & 15];
        }
    }
  *o = '\0';
  return out;
}

void
esbx_unescape_mountinfo (char *s)
{
  char *w = s;

  for (; *s; s++)
    {
      if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' && s[3] >= '0'
          && s[3] <= '7')
        {
          *w++ = (char)(((s[1] - '0') << 6) | ((s[2] - '0') << 3) | (s[3] - '0'));
          s += 3;
        }
      else
        *w++ = *s;
    }
  *w = '\0';
}
