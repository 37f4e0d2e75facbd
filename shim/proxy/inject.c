/* Secrets put into requests.  A session given `--secret NAME,inject`
 * holds a placeholder; for a request to a host the secret is bound to
 * (secret create --for), the proxy replaces the placeholder with the value
 * wherever it is in the head: a header's value, the credentials of a
 * Basic Authorization (decoded and encoded again) and the query, and then
 * sets the header, Basic credentials or query parameter the secret's form
 * names.  A request to any other host that carries a placeholder or a
 * value, in the same places, is refused.  A value with a line break or a
 * NUL is never put into a header.  */
#include "proxy.h"
#include "utils.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static char *
replace_all (const char *s, const char *needle, const char *with, size_t with_len)
{
  size_t nl = strlen (needle), n = 0, len;
  const char *p;
  char *out, *o;

  for (p = s; (p = strstr (p, needle)) != NULL; p += nl)
    n++;
  len = strlen (s) + n * with_len - n * nl;
  out = o = xmalloc (len + 1);
  for (p = s; *p;)
    {
      if (strncmp (p, needle, nl) == 0)
        {
          memcpy (o, with, with_len);
          o += with_len;
          p += nl;
        }
      else
        *o++ = *p++;
    }
  *o = '\0';
  return out;
}

static char *
b64_decode (const char *s)
{
  gnutls_datum_t in = { (unsigned char *)s, (unsigned)strlen (s) }, out = { 0 };
  char *r;

  if (gnutls_base64_decode2 (&in, &out) < 0)
    return NULL;
  r = xstrndup ((char *)out.data, out.size);
  explicit_bzero (out.data, out.size);
  gnutls_free (out.data);
  return r;
}

static char *
b64_encode (const char *s)
{
  gnutls_datum_t in = { (unsigned char *)s, (unsigned)strlen (s) }, out = { 0 };
  char *r;

  if (gnutls_base64_encode2 (&in, &out) < 0)
    abort ();
  r = xstrndup ((char *)out.data, out.size);
  gnutls_free (out.data);
  return r;
}

/* The decoded credentials of a `Basic` VALUE, or NULL.  */
static char *
basic_of (const char *value)
{
  if (strncasecmp (value, "basic ", 6) != 0)
    return NULL;
  return b64_decode (value + 6);
}

static char *
pct_encode (const char *s, size_t len)
{
  char *out = xmalloc (len * 3 + 1), *o = out;
  size_t i;

  for (i = 0; i < len; i++)
    {
      unsigned char ch = (unsigned char)s[i];
      if (isalnum (ch) || strchr ("-_.~", ch))
        *o++ = (char)ch;
      else
        o += sprintf (o, "%%%02X", ch);
    }
  *o = '\0';
  return out;
}

/* Whether the head carries TEXT (a placeholder or a value).  */
static bool
carries (const struct http_head *h, const char *target, const char *text)
{
  size_t i;

  if (strstr (target, text))
    return true;
  for (i = 0; i < h->n; i++)
    {
      _cleanup_free_ char *cred = NULL;

      if (h->name[i] == NULL)
        continue;
      if (strstr (h->value[i], text))
        return true;
      if (strcasecmp (h->name[i], "authorization") == 0 && (cred = basic_of (h->value[i])) != NULL
          && strstr (cred, text))
        {
          explicit_bzero (cred, strlen (cred));
          return true;
        }
    }
  return false;
}

/* TARGET with query parameter PARAM set to VALUE (percent-encoded).  */
static char *
set_query (const char *target, const char *param, const char *value, size_t len)
{
  _cleanup_free_ char *enc = pct_encode (value, len), *base = NULL;
  const char *q = strchr (target, '?');
  struct strv kept = { 0 };
  char *out, *save = NULL, *tok, *copy;
  size_t i, pl = strlen (param);

  if (q == NULL)
    return xasprintf ("%s?%s=%s", target, param, enc);
  base = xstrndup (target, (size_t)(q - target));
  copy = xstrdup (q + 1);
  for (tok = strtok_r (copy, "&", &save); tok; tok = strtok_r (NULL, "&", &save))
    if (!(strncmp (tok, param, pl) == 0 && (tok[pl] == '=' || tok[pl] == '\0')))
      strv_push (&kept, xstrdup (tok));
  free (copy);
  out = xasprintf ("%s?%s=%s", base, param, enc);
  for (i = 0; kept.v && kept.v[i]; i++)
    {
      char *old = out;
      out = xasprintf ("%s&%s", old, kept.v[i]);
      free (old);
    }
  strv_free (&kept);
  return out;
}

static void
put_in (struct http_head *h, const char *ph, const char *value, size_t len, char **target)
{
  size_t i;

  for (i = 0; i < h->n; i++)
    {
      _cleanup_free_ char *cred = NULL;

      if (h->name[i] == NULL)
        continue;
      if (strcasecmp (h->name[i], "authorization") == 0 && (cred = basic_of (h->value[i])) != NULL
          && strstr (cred, ph))
        {
          _cleanup_free_ char *now = replace_all (cred, ph, value, len);
          _cleanup_free_ char *enc = b64_encode (now);
          http_header_set (h, h->name[i], xasprintf ("Basic %s", enc));
          explicit_bzero (now, strlen (now));
          explicit_bzero (cred, strlen (cred));
          continue;
        }
      if (strstr (h->value[i], ph))
        http_header_set (h, h->name[i], replace_all (h->value[i], ph, value, len));
    }
  if (strstr (*target, ph))
    {
      _cleanup_free_ char *enc = pct_encode (value, len);
      char *old = *target;
      *target = replace_all (old, ph, enc, strlen (enc));
      free (old);
    }
}

static void
add_used (char **used, const char *name)
{
  char *old = *used;

  *used = old ? xasprintf ("%s,%s", old, name) : xstrdup (name);
  free (old);
}

int
proxy_inject (const struct proxy_client *cl, const char *host, const char *method,
              const char *target, struct http_head *h, char **out_target, char **used,
              const char **reason)
{
  char *t = xstrdup (target);
  size_t i;

  (void)method;
  *used = NULL;
  /* The request as the session sent it, before any value is put in.  */
  for (i = 0; i < cl->n_secrets; i++)
    {
      const struct esbx_secret *s = &cl->secrets[i];

      if (!s->inject || cl->inject[i] == NULL || esbx_secret_inject_binds (cl->inject[i], host))
        continue;
      if (carries (h, t, s->placeholder) || (s->len >= 4 && carries (h, t, s->value)))
        {
          free (t);
          *reason = "the request carries a secret to a host it is not bound to";
          return -1;
        }
    }
  for (i = 0; i < cl->n_secrets; i++)
    {
      const struct esbx_secret *s = &cl->secrets[i];
      const json_t *inj = cl->inject[i];
      const char *form;

      if (!s->inject || inj == NULL || !esbx_secret_inject_binds (inj, host))
        continue;
      if (memchr (s->value, '\n', s->len) || memchr (s->value, '\r', s->len)
          || memchr (s->value, '\0', s->len))
        {
          free (t);
          *reason = "a secret's value holds a line break or a NUL: never put in a header";
          return -1;
        }
      put_in (h, s->placeholder, s->value, s->len, &t);
      if ((form = json_get_string (inj, "header")) != NULL)
        {
          const char *colon = strchr (form, ':'), *v = colon + 1;
          _cleanup_free_ char *name = xstrndup (form, (size_t)(colon - form));
          _cleanup_free_ char *val = NULL;

          while (*v == ' ')
            v++;
          val = replace_all (v, "{}", s->value, s->len);
          http_header_set (h, name, xstrdup (val));
          explicit_bzero (val, strlen (val));
        }
      else if ((form = json_get_string (inj, "basic")) != NULL)
        {
          _cleanup_free_ char *cred = xasprintf ("%s:%.*s", form, (int)s->len, s->value);
          _cleanup_free_ char *enc = b64_encode (cred);
          http_header_set (h, "Authorization", xasprintf ("Basic %s", enc));
          explicit_bzero (cred, strlen (cred));
        }
      else if ((form = json_get_string (inj, "query")) != NULL)
        {
          char *old = t;
          t = set_query (old, form, s->value, s->len);
          free (old);
        }
      add_used (used, s->name);
    }
  *out_target = t;
  return 0;
}
