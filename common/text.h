/* esbx: names, UTF-8, times and numbers as they appear on the command line,
   in records and in requests.  */
#ifndef ESBX_TEXT_H
#define ESBX_TEXT_H

#include "error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* The one name rule for projects, sessions and Docker volume names.  */
#define ESBX_NAME_RULE "^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"
bool esbx_name_valid (const char *name);
/* Check NAME against the rule; WHAT is "project", "session", ... */
int esbx_check_name (const char *what, const char *name, esbx_error_t *err);

bool esbx_utf8_valid (const char *s, size_t len);
/* Copy with every invalid byte replaced by U+FFFD.  */
char *esbx_utf8_sanitize (const char *s, size_t len);
/* Copy for one-line display: control characters and invalid bytes as \xNN.  */
char *esbx_quote_path (const char *s);
/* Copy for a log line: C0 and C1 control characters (newlines included),
   DEL, backslashes and invalid bytes as \xNN, so that nothing a request
   carries can start a line of its own or pass for one of these escapes.  */
char *esbx_escape_line (const char *s);
/* S percent-encoded as a URL path segment or query value: every byte but
   RFC 3986's unreserved characters.  */
char *esbx_url_escape (const char *s);

/* RFC 3339 in UTC with nanoseconds, e.g. 2026-11-30T04:00:00.123456789Z.  */
char *esbx_rfc3339 (const struct timespec *ts);
char *esbx_rfc3339_now (void);

/* Lower-case hex of LEN bytes.  */
char *esbx_hex (const unsigned char *bytes, size_t len);
/* LEN random bytes as hex (getrandom).  */
char *esbx_random_hex (size_t len);

/* "1048576", "512k", "64M", "2G" (powers of 1024).  */
int esbx_parse_size (const char *s, uint64_t *out, esbx_error_t *err);
/* "30s", "15m", "2h", "7d", or plain seconds.  */
int esbx_parse_duration (const char *s, int64_t *seconds, esbx_error_t *err);

bool esbx_has_prefix (const char *s, const char *prefix);

/* A field of /proc/self/mountinfo with its octal escapes (\040 for a
   space, tab, newline, backslash) decoded in place.  */
void esbx_unescape_mountinfo (char *s);

#endif
