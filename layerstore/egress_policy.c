/* The allow-list of an egress session (`--network egress --allow ...`):
 * each entry is HOST[:PORT], *.DOMAIN[:PORT], ADDRESS[:PORT] or
 * CIDR[:PORT], IPv4 only, with methods and a path for an HTTP rule
 * (layerstore.h).  The record keeps the entries as given, once checked;
 * shim/lib/egress/egress.c turns the address entries into nftables rules,
 * and the egress proxy (shim/proxy/) decides the rest with
 * esbx_egress_decide.  */
#include "internal.h"
#include "text.h"
#include "utils.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define NAME_MAX_LEN  253
#define LABEL_MAX_LEN 63

void
esbx_egress_rule_clear (struct esbx_egress_rule *r)
{
  size_t i;

  free (r->name);
  r->name = NULL;
  for (i = 0; r->methods[i]; i++)
    {
      free (r->methods[i]);
      r->methods[i] = NULL;
    }
  free (r->path);
  r->path = NULL;
}

static bool
label_valid (const char *l, size_t n)
{
  size_t i;

  if (n == 0 || n > LABEL_MAX_LEN || l[0] == '-' || l[n - 1] == '-')
    return false;
  for (i = 0; i < n; i++)
    if (!(isalnum ((unsigned char)l[i]) || l[i] == '-'))
      return false;
  return true;
}

/* A DNS name of letters, digits and hyphens whose last label is not all
   digits (that would be a malformed address).  */
static bool
name_valid (const char *name)
{
  const char *p = name, *dot, *last = name;
  size_t i;

  if (strlen (name) > NAME_MAX_LEN)
    return false;
  for (;;)
    {
      dot = strchr (p, '.');
      if (!label_valid (p, dot ? (size_t)(dot - p) : strlen (p)))
        return false;
      last = p;
      if (dot == NULL)
        break;
      p = dot + 1;
    }
  for (i = 0; last[i]; i++)
    if (!isdigit ((unsigned char)last[i]))
      return true;
  return false;
}

static int
parse_port (const char *spec, const char *s, unsigned *port, esbx_error_t *err)
{
  char *end;
  long v;

  errno = 0;
  v = strtol (s, &end, 10);
  if (*s == '\0' || *end != '\0' || errno || v < 1 || v > 65535 || !isdigit ((unsigned char)*s))
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "allow `%s`: port `%s` is not a number from 1 to 65535", spec, s);
  *port = (unsigned)v;
  return 0;
}

static int
parse_cidr (const char *spec, char *host, struct esbx_egress_rule *r, esbx_error_t *err)
{
  char *slash = strchr (host, '/');
  struct in_addr a;
  long prefix = 32;
  char *end;

  if (slash)
    {
      *slash = '\0';
      errno = 0;
      prefix = strtol (slash + 1, &end, 10);
      if (slash[1] == '\0' || *end != '\0' || errno || prefix < 0 || prefix > 32)
        return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                     "allow `%s`: prefix length `%s` is not 0 to 32", spec,
                                     slash + 1);
    }
  if (inet_pton (AF_INET, host, &a) != 1)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "allow `%s`: `%s` is not an IPv4 address",
                                 spec, host);
  r->prefix = (unsigned)prefix;
  r->addr = ntohl (a.s_addr) & (prefix == 0 ? 0 : ~0u << (32 - prefix));
  return 0;
}

/* HOST[:PORT] (no path, no spaces) into R.  */
static int
parse_host (const char *spec, const char *text, struct esbx_egress_rule *r, esbx_error_t *err)
{
  _cleanup_free_ char *host = xstrdup (text);
  char *colon, *name, *p;

  colon = strchr (host, ':');
  if (colon && strchr (colon + 1, ':'))
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "allow `%s`: IPv6 destinations are not supported", spec);
  if (colon)
    {
      *colon = '\0';
      if (parse_port (spec, colon + 1, &r->port, err) < 0)
        return -1;
    }
  if (host[0] == '\0')
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "allow `%s`: no host", spec);
  p = host + strlen (host) - 1;
  if (isdigit ((unsigned char)*p) || strchr (host, '/'))
    /* A name never ends in a digit (name_valid): an address or CIDR.  */
    return parse_cidr (spec, host, r, err);
  for (p = host; *p; p++)
    *p = (char)tolower ((unsigned char)*p);
  name = strncmp (host, "*.", 2) == 0 ? host + 2 : host;
  if (!name_valid (name))
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "allow `%s`: expected a host name, *.DOMAIN, an IPv4 address or "
                                 "CIDR, each with an optional :PORT",
                                 spec);
  r->name = steal_pointer (&host);
  return 0;
}

static bool
methods_token (const char *t)
{
  const char *p;

  if (!isupper ((unsigned char)*t))
    return false;
  for (p = t; *p; p++)
    if (!(isupper ((unsigned char)*p) || (*p == ',' && isupper ((unsigned char)p[1]))))
      return false;
  return true;
}

static int
parse_methods (const char *spec, char *t, struct esbx_egress_rule *r, esbx_error_t *err)
{
  char *save = NULL, *m;
  size_t n = 0;

  if (r->methods[0])
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "allow `%s`: methods given twice", spec);
  for (m = strtok_r (t, ",", &save); m; m = strtok_r (NULL, ",", &save))
    {
      if (n == ESBX_EGRESS_METHODS_MAX || strlen (m) > 16)
        return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                     "allow `%s`: at most %d methods of 16 letters", spec,
                                     ESBX_EGRESS_METHODS_MAX);
      r->methods[n++] = xstrdup (m);
    }
  return 0;
}

/* A path: printable ASCII from `/`, without spaces; a `*` only last.  */
static int
parse_path (const char *spec, const char *t, struct esbx_egress_rule *r, esbx_error_t *err)
{
  const char *p;

  if (r->path)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "allow `%s`: a path given twice", spec);
  for (p = t; *p; p++)
    if (*p <= ' ' || *p > '~' || *p == '?' || *p == '#' || (*p == '*' && p[1] != '\0'))
      return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                   "allow `%s`: path `%s`: printable, no `?` or `#`, and `*` only "
                                   "at its end",
                                   spec, t);
  r->path = xstrdup (t);
  return 0;
}

/* A slash in TEXT that starts a path rather than a CIDR's prefix length.  */
static char *
path_slash (char *text)
{
  char *slash = strchr (text, '/'), *p;

  if (slash == NULL)
    return NULL;
  for (p = text; p < slash; p++)
    if (!(isdigit ((unsigned char)*p) || *p == '.'))
      return slash;
  /* ADDR/N[:PORT][/PATH] */
  return strchr (slash + 1, '/');
}

int
esbx_egress_rule_parse (const char *spec, struct esbx_egress_rule *out, esbx_error_t *err)
{
  _cleanup_free_ char *copy = xstrdup (spec);
  struct esbx_egress_rule r = { 0 };
  char *save = NULL, *t, *slash;
  bool host = false;

  memset (out, 0, sizeof *out);
  for (t = strtok_r (copy, " \t", &save); t; t = strtok_r (NULL, " \t", &save))
    {
      int ret;

      if (methods_token (t))
        ret = parse_methods (spec, t, &r, err);
      else if (t[0] == '/')
        ret = parse_path (spec, t, &r, err);
      else if (host)
        ret = esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "allow `%s`: more than one host", spec);
      else
        {
          host = true;
          if ((slash = path_slash (t)) != NULL)
            {
              ret = parse_path (spec, slash, &r, err);
              *slash = '\0';
            }
          else
            ret = 0;
          if (ret == 0)
            ret = parse_host (spec, t, &r, err);
        }
      if (ret < 0)
        {
          esbx_egress_rule_clear (&r);
          return -1;
        }
    }
  if (!host)
    {
      esbx_egress_rule_clear (&r);
      return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "allow `%s`: no host", spec);
    }
  *out = r;
  return 0;
}

int
esbx_egress_allow_parse (char *const *allow, json_t **out, esbx_error_t *err)
{
  _cleanup_json_ json_t *arr = json_new (JSON_ARRAY);
  size_t i;

  for (i = 0; allow && allow[i]; i++)
    {
      struct esbx_egress_rule r;

      if (esbx_egress_rule_parse (allow[i], &r, err) < 0)
        return -1;
      esbx_egress_rule_clear (&r);
      json_append (arr, json_new_string (allow[i]));
    }
  *out = steal_pointer (&arr);
  return 0;
}

static bool
name_matches (const char *rule, const char *host)
{
  size_t hl = strlen (host), dl;

  if (strncmp (rule, "*.", 2) != 0)
    return strcasecmp (rule, host) == 0;
  /* Subdomains only.  */
  dl = strlen (rule + 1);
  return hl > dl && strcasecmp (host + hl - dl, rule + 1) == 0;
}

static bool
host_matches (const struct esbx_egress_rule *r, const char *host)
{
  struct in_addr a;
  uint32_t addr, mask;

  if (inet_pton (AF_INET, host, &a) == 1)
    {
      if (r->name)
        return false;
      addr = ntohl (a.s_addr);
      mask = r->prefix == 0 ? 0 : ~0u << (32 - r->prefix);
      return (addr & mask) == r->addr;
    }
  return r->name && name_matches (r->name, host);
}

static bool
method_matches (const struct esbx_egress_rule *r, const char *method)
{
  size_t i;

  if (r->methods[0] == NULL)
    return true;
  for (i = 0; r->methods[i]; i++)
    if (strcmp (r->methods[i], method) == 0)
      return true;
  return false;
}

static bool
path_matches (const struct esbx_egress_rule *r, const char *path)
{
  size_t n;

  if (r->path == NULL)
    return true;
  n = strlen (r->path);
  if (n && r->path[n - 1] == '*')
    return strncmp (path, r->path, n - 1) == 0;
  return strcmp (path, r->path) == 0;
}

bool
esbx_egress_rules_any (const json_t *allow,
                       bool (*fn) (const struct esbx_egress_rule *r, const char *text, void *data),
                       void *data)
{
  const json_t *a;
  size_t i;
  bool done = false;

  json_array_foreach (allow, i, a)
    {
      struct esbx_egress_rule r;
      esbx_error_t e = NULL;

      if (a->type != JSON_STRING || esbx_egress_rule_parse (a->text, &r, &e) < 0)
        {
          esbx_error_free (&e);
          continue;
        }
      done = fn (&r, a->text, data);
      esbx_egress_rule_clear (&r);
      if (done)
        break;
    }
  return done;
}

struct decide
{
  const char *host;
  unsigned port;
  const char *method, *path;
  struct esbx_egress_verdict *v;
  bool host_seen;
};

/* Whether R decides D's request: allowed; else notes that a rule for its
   host and port was seen, and for a connection whose requests are not
   seen, that an HTTP rule needs them inspected.  */
static bool
decide_rule (const struct esbx_egress_rule *r, const char *text, void *data)
{
  struct decide *d = data;

  if (!host_matches (r, d->host) || (r->port != 0 && r->port != d->port))
    return false;
  d->host_seen = true;
  if (d->method == NULL && !(r->methods[0] || r->path))
    {
      d->v->allowed = true;
      d->v->inspect = false;
      d->v->rule = text;
      return true;
    }
  if (d->method == NULL)
    {
      d->v->inspect = true;
      d->v->rule = d->v->rule ? d->v->rule : text;
      return false;
    }
  if (method_matches (r, d->method) && path_matches (r, d->path))
    {
      d->v->allowed = true;
      d->v->rule = text;
      return true;
    }
  return false;
}

void
esbx_egress_decide (const json_t *allow, const char *host, unsigned port, const char *method,
                    const char *path, struct esbx_egress_verdict *v)
{
  struct decide d = { .host = host, .port = port, .method = method, .path = path, .v = v };
  bool host_seen;

  memset (v, 0, sizeof *v);
  if (esbx_egress_rules_any (allow, decide_rule, &d))
    return;
  host_seen = d.host_seen;
  if (v->inspect)
    {
      v->allowed = true;
      return;
    }
  v->reason = host_seen ? (method ? "method or path not allowed" : "not allowed")
                        : "host not on the allow-list";
}

static bool
name_rule (const struct esbx_egress_rule *r, const char *text, void *data)
{
  (void)text;
  return r->name && name_matches (r->name, data);
}

bool
esbx_egress_name_allowed (const json_t *allow, const char *name)
{
  return esbx_egress_rules_any (allow, name_rule, (void *)name);
}

static bool
addr_rule (const struct esbx_egress_rule *r, const char *text, void *data)
{
  uint32_t addr = *(const uint32_t *)data;

  (void)text;
  return r->name == NULL && (addr & (r->prefix == 0 ? 0 : ~0u << (32 - r->prefix))) == r->addr;
}

bool
esbx_egress_addr_listed (const json_t *allow, uint32_t addr)
{
  return esbx_egress_rules_any (allow, addr_rule, &addr);
}
