/* `esbx egress check S URL`: what the store's proxy would do with a
   request of session S, decided as it decides (esbx_egress_decide and the
   secrets bound to the host), without sending anything.  */
#include "egress.h"
#include "utils.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int
parse_url (const char *url, bool *tls, char **host, unsigned *port, char **path, esbx_error_t *err)
{
  const char *a, *e, *colon;
  char *end, *p;

  if (strncasecmp (url, "http://", 7) == 0)
    *tls = false;
  else if (strncasecmp (url, "https://", 8) == 0)
    *tls = true;
  else
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "egress check: URL `%s`: expected http:// or https://", url);
  a = url + (*tls ? 8 : 7);
  e = a + strcspn (a, "/?#");
  if (e == a || memchr (a, '@', (size_t)(e - a)))
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "egress check: URL `%s`: expected a host and no user", url);
  colon = memchr (a, ':', (size_t)(e - a));
  *port = *tls ? 443 : 80;
  if (colon)
    {
      unsigned long v = strtoul (colon + 1, &end, 10);
      if (end != e || v == 0 || v > 65535)
        return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "egress check: URL `%s`: bad port",
                                     url);
      *port = (unsigned)v;
    }
  *host = xstrndup (a, (size_t)((colon ? colon : e) - a));
  for (p = *host; *p; p++)
    *p = (char)tolower ((unsigned char)*p);
  *path = *e == '/' ? xstrndup (e, strcspn (e, "?#")) : xstrdup ("/");
  return 0;
}

json_t *
esbx_egress_check (esbx_store_t *store, const char *session, const char *method, const char *url,
                   esbx_error_t *err)
{
  _cleanup_free_ char *host = NULL, *path = NULL;
  struct esbx_session *s = NULL;
  struct esbx_egress_verdict v, tunnel;
  const json_t *allow, *secrets, *a;
  json_t *o, *names;
  bool tls = false, inject = false;
  unsigned port = 0;
  size_t i;

  if (parse_url (url, &tls, &host, &port, &path, err) < 0)
    return NULL;
  if (esbx_session_load (store, session, &s, err) < 0)
    return NULL;
  if (s->network == NULL || strcmp (s->network, "egress") != 0)
    {
      esbx_session_free (s);
      esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                            "egress check: session `%s` has no egress network (--network egress)",
                            session);
      return NULL;
    }
  allow = json_get (s->record, "allow");
  secrets = json_get (s->record, "secrets");
  names = json_new (JSON_ARRAY);
  json_array_foreach (secrets, i, a)
    {
      const char *name = json_get_string (a, "name");
      _cleanup_json_ json_t *rec = NULL;

      if (name == NULL || !json_get_bool (a, "inject", false))
        continue;
      inject = true;
      rec = esbx_secret_inject_read (store, name);
      if (rec && esbx_secret_inject_binds (rec, host))
        json_append (names, json_new_string (name));
    }
  esbx_egress_decide (allow, host, port, NULL, NULL, &tunnel);
  esbx_egress_decide (allow, host, port, method, path, &v);
  o = json_new (JSON_OBJECT);
  json_set_string (o, "session", session);
  json_set_string (o, "method", method);
  json_set_string (o, "host", host);
  json_set_int (o, "port", port);
  json_set_string (o, "path", path);
  /* Seen by the proxy request by request: plain HTTP, or TLS it ends.  */
  json_set (o, "intercepted", json_new_bool (tls && tunnel.allowed && (tunnel.inspect || inject)));
  if (tls && tunnel.allowed && !tunnel.inspect && !inject)
    v = tunnel;
  json_set (o, "allowed", json_new_bool (v.allowed));
  if (v.rule)
    json_set_string (o, "rule", v.rule);
  if (!v.allowed)
    json_set_string (o, "reason", v.reason);
  json_set (o, "secrets", names);
  esbx_session_free (s);
  return o;
}
