/* The logs of a slot, under ESBX_EGRESS_RUN, both bounded by
   ESBX_EGRESS_LOG_MAX (a session flooding the proxy between two readings
   cannot fill the host's /run; past it, lines are dropped until the
   reader cuts the log):
     N.requests  one JSON line per request: host, port, method, path
                 (without its query), status, bytes sent and received,
                 verdict and why; never a body, a header or a query
     N.log       "config NAME is NXDOMAIN" for each name the resolver
                 refused, as egress_names.c reads it  */
#include "proxy.h"
#include "egress.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void
append (int slot, const char *suffix, const char *line, size_t len)
{
  _cleanup_free_ char *path = xasprintf (ESBX_EGRESS_RUN "/%d.%s", slot, suffix);
  _cleanup_close_ int fd = -1;
  struct stat st;

  fd = TEMP_FAILURE_RETRY (
      open (path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (fd < 0 || fstat (fd, &st) < 0 || !S_ISREG (st.st_mode)
      || (uint64_t)st.st_size + len > ESBX_EGRESS_LOG_MAX)
    return;
  /* One write: lines of concurrent requests never interleave.  */
  (void)!write (fd, line, len);
}

void
proxy_log_request (int slot, const struct proxy_request_log *r)
{
  _cleanup_json_ json_t *o = json_new (JSON_OBJECT);
  _cleanup_free_ char *text = NULL, *line = NULL, *now = esbx_rfc3339_now ();
  _cleanup_free_ char *path
      = esbx_utf8_sanitize (r->path ? r->path : "", strlen (r->path ? r->path : ""));
  size_t len;

  json_set_string (o, "time", now);
  json_set_string (o, "host", r->host ? r->host : "");
  json_set_int (o, "port", r->port);
  json_set_string (o, "method", r->method ? r->method : "");
  json_set_string (o, "path", path);
  json_set_int (o, "status", r->status);
  json_set_int (o, "sent", (int64_t)r->sent);
  json_set_int (o, "received", (int64_t)r->received);
  json_set_string (o, "verdict", r->verdict ? r->verdict : "refused");
  if (r->reason)
    json_set_string (o, "reason", r->reason);
  if (r->rule)
    json_set_string (o, "rule", r->rule);
  if (r->secrets)
    json_set_string (o, "secrets", r->secrets);
  if (r->intercepted)
    json_set (o, "intercepted", json_new_bool (true));
  text = json_serialize (o, false, &len);
  line = xasprintf ("%s\n", text);
  append (slot, "requests", line, len + 1);
}

void
proxy_log_refused_name (int slot, const char *name)
{
  _cleanup_free_ char *line = xasprintf ("esbx-proxy: config %s is NXDOMAIN\n", name);

  append (slot, "log", line, strlen (line));
}
