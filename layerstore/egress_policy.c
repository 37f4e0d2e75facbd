/* The allow-list of an egress session (`--network egress --allow ...`):
 * each entry is HOST[:PORT], *.DOMAIN[:PORT], ADDRESS[:PORT] or
 * CIDR[:PORT], IPv4 only.  The record keeps the entries as given, once
 * checked; shim/lib/egress.c turns them into nftables rules and resolver
 * options.  */
#include "internal.h"
#include "text.h"
#include "utils.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define NAME_MAX_LEN  253
#define LABEL_MAX_LEN 63

void
esbx_egress_rule_clear (struct esbx_egress_rule *r)
{
  free (r->name);
  r->name = NULL;
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

int
esbx_egress_rule_parse (const char *spec, struct esbx_egress_rule *out, esbx_error_t *err)
{
  _cleanup_free_ char *host = xstrdup (spec);
  struct esbx_egress_rule r = { 0 };
  char *colon, *name, *p;

  memset (out, 0, sizeof *out);
  colon = strchr (host, ':');
  if (colon && strchr (colon + 1, ':'))
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "allow `%s`: IPv6 destinations are not supported", spec);
  if (colon)
    {
      *colon = '\0';
      if (parse_port (spec, colon + 1, &r.port, err) < 0)
        return -1;
    }
  if (host[0] == '\0')
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "allow `%s`: no host", spec);
  p = host + strlen (host) - 1;
  if (isdigit ((unsigned char)*p) || strchr (host, '/'))
    {
      /* A name never ends in a digit (name_valid): an address or CIDR.  */
      if (parse_cidr (spec, host, &r, err) < 0)
        return -1;
      *out = r;
      return 0;
    }
  for (p = host; *p; p++)
    *p = (char)tolower ((unsigned char)*p);
  name = strncmp (host, "*.", 2) == 0 ? host + 2 : host;
  if (!name_valid (name))
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "allow `%s`: expected a host name, *.DOMAIN, an IPv4 address or "
                                 "CIDR, each with an optional :PORT",
                                 spec);
  r.name = steal_pointer (&host);
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
