/* Redaction: a secret's value becomes ***NAME*** before a byte of it
 * reaches the caller, the logs or the gateway: in an exec's output, its
 * events, `ps`, and the names and link targets diff shows.  A value may
 * arrive split across reads, so a tail of a read that could start a value
 * is held until the next read completes or refutes it (or the stream
 * ends).  Where two values match at one place, the longer wins.  */
#include "secret_redact.h"
#include "utils.h"

#include <string.h>

void
esbx_redactor_init (struct esbx_redactor *r, const struct esbx_secret *v, size_t n)
{
  memset (r, 0, sizeof *r);
  r->v = v;
  r->n = n;
}

void
esbx_redactor_free (struct esbx_redactor *r)
{
  if (r->held)
    explicit_bzero (r->held, r->nheld);
  free (r->held);
  r->held = NULL;
  r->nheld = 0;
}

struct out
{
  char *p;
  size_t len, cap;
};

static void
put (struct out *o, const char *s, size_t n)
{
  if (o->len + n + 1 > o->cap)
    {
      o->cap = (o->len + n + 1) * 2;
      o->p = xrealloc (o->p, o->cap);
    }
  /* The last call of a stream passes no bytes (and may pass NULL).  */
  if (n)
    memcpy (o->p + o->len, s, n);
  o->len += n;
  o->p[o->len] = '\0';
}

/* The secret whose whole value starts at BUF (AVAIL bytes), the longest;
   -1 if none.  *PARTIAL: some value could start there and run past AVAIL.  */
static ssize_t
match_at (const struct esbx_secret *v, size_t n, const char *buf, size_t avail, bool *partial)
{
  ssize_t best = -1;
  size_t i;

  *partial = false;
  for (i = 0; i < n; i++)
    {
      const struct esbx_secret *s = &v[i];

      if (s->len == 0 || s->value == NULL || s->value[0] != buf[0])
        continue;
      if (s->len <= avail)
        {
          if (memcmp (buf, s->value, s->len) == 0 && (best < 0 || s->len > v[best].len))
            best = (ssize_t)i;
        }
      else if (memcmp (buf, s->value, avail) == 0)
        *partial = true;
    }
  return best;
}

static void
redact_into (struct out *o, const struct esbx_secret *v, size_t n, const char *buf, size_t len,
             bool last, size_t *consumed)
{
  size_t i = 0;

  while (i < len)
    {
      bool partial;
      ssize_t k = match_at (v, n, buf + i, len - i, &partial);

      if (k >= 0)
        {
          _cleanup_free_ char *mark = xasprintf ("***%s***", v[k].name);
          put (o, mark, strlen (mark));
          i += v[k].len;
          continue;
        }
      if (partial && !last)
        break;
      put (o, buf + i, 1);
      i++;
    }
  *consumed = i;
}

char *
esbx_redact (struct esbx_redactor *r, const char *in, size_t len, bool last, size_t *outlen)
{
  struct out o = { 0 };
  _cleanup_free_ char *buf = NULL;
  size_t total = r->nheld + len, used;

  put (&o, "", 0);
  if (r->n == 0)
    {
      put (&o, in, len);
      *outlen = o.len;
      return o.p;
    }
  buf = xmalloc (total + 1);
  if (r->nheld)
    memcpy (buf, r->held, r->nheld);
  if (len)
    memcpy (buf + r->nheld, in, len);
  esbx_redactor_free (r);
  redact_into (&o, r->v, r->n, buf, total, last, &used);
  if (used < total)
    {
      r->nheld = total - used;
      r->held = xmalloc (r->nheld);
      memcpy (r->held, buf + used, r->nheld);
    }
  explicit_bzero (buf, total);
  *outlen = o.len;
  return o.p;
}

char *
esbx_redact_string (const struct esbx_secret *v, size_t n, const char *s)
{
  struct out o = { 0 };
  size_t used;

  put (&o, "", 0);
  redact_into (&o, v, n, s, strlen (s), true, &used);
  return o.p;
}

/* *S with every value of V replaced, when it holds one.  */
static void
redact_in_place (const struct esbx_secret *v, size_t n, char **s)
{
  char *shown;

  if (*s == NULL)
    return;
  shown = esbx_redact_string (v, n, *s);
  if (strcmp (shown, *s) == 0)
    {
      free (shown);
      return;
    }
  explicit_bzero (*s, strlen (*s));
  free (*s);
  *s = shown;
}

int
esbx_redact_changes (esbx_store_t *store, const char *session, struct esbx_changeset *cs,
                     esbx_error_t *err)
{
  struct esbx_session *s = NULL;
  struct esbx_secret *v = NULL;
  size_t n = 0, i;

  if (esbx_session_load (store, session, &s, err) < 0)
    return -1;
  if (esbx_session_secrets (store, s, &v, &n, err) < 0)
    {
      esbx_session_free (s);
      return -1;
    }
  esbx_session_free (s);
  for (i = 0; n && i < cs->n; i++)
    {
      redact_in_place (v, n, &cs->v[i].path);
      redact_in_place (v, n, &cs->v[i].target);
      redact_in_place (v, n, &cs->v[i].link);
    }
  esbx_secrets_free (v, n);
  return 0;
}
