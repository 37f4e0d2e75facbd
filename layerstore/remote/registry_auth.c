/* liblayerstore: the registry token protocol (distribution's "token
 * authentication", what `auth: token:` of docker-registry asks for).  A
 * request answered 401 with `WWW-Authenticate: Bearer realm=R,service=S,
 * scope=X` is sent again with `Authorization: Bearer TOKEN`, TOKEN being
 * what GET R?service=S&scope=X answered (JSON `token` or `access_token`),
 * asked for with the token file's basic credentials when it holds
 * user:password, anonymously otherwise.  Tokens are kept for the process
 * per realm, service, scope and credentials until most of their
 * `expires_in` has passed; a token the registry refuses is asked for
 * again.  The credentials go to a realm of another origin than the
 * registry's only over https (docs/SCALE-OUT.md).  */
#include "remote.h"
#include "hash.h"
#include "http_client.h"
#include "text.h"
#include "utils.h"

#include <pthread.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

/* The realm's answer is a small JSON document.  */
#define TOKEN_ANSWER_MAX (1024u * 1024)
/* What the token spec assumes when the answer has no expires_in.  */
#define DEFAULT_EXPIRES_S 60
#define MAX_CACHED        64
#define MAX_EXPIRES_S     (24 * 3600)

struct challenge
{
  char *realm;
  char *service;
  char *scope; /* space-separated scopes, as the registry wrote them */
  char *error; /* e.g. "insufficient_scope" */
};

static void
challenge_free (struct challenge *c)
{
  free (c->realm);
  free (c->service);
  free (c->scope);
  free (c->error);
  memset (c, 0, sizeof *c);
}

/* The parameters of a `Bearer k="v",k=v` challenge; false when V is none
   or names no realm.  */
static bool
parse_challenge (const char *v, struct challenge *c)
{
  memset (c, 0, sizeof *c);
  if (v == NULL || strncasecmp (v, "Bearer ", 7) != 0)
    return false;
  v += 7;
  while (*v)
    {
      const char *name;
      size_t name_len;
      char *value, **slot = NULL;
      size_t n = 0;

      while (*v == ' ' || *v == ',' || *v == '\t')
        v++;
      name = v;
      while (*v && *v != '=' && *v != ',' && *v != ' ')
        v++;
      name_len = (size_t)(v - name);
      if (*v != '=')
        continue;
      v++;
      value = xmalloc (strlen (v) + 1);
      if (*v == '"')
        for (v++; *v && *v != '"'; v++)
          {
            if (*v == '\\' && v[1])
              v++;
            value[n++] = *v;
          }
      else
        while (*v && *v != ',' && *v != ' ')
          value[n++] = *v++;
      if (*v == '"')
        v++;
      value[n] = '\0';
      if (name_len == 5 && strncasecmp (name, "realm", 5) == 0)
        slot = &c->realm;
      else if (name_len == 7 && strncasecmp (name, "service", 7) == 0)
        slot = &c->service;
      else if (name_len == 5 && strncasecmp (name, "scope", 5) == 0)
        slot = &c->scope;
      else if (name_len == 5 && strncasecmp (name, "error", 5) == 0)
        slot = &c->error;
      if (slot && *slot == NULL)
        *slot = value;
      else
        free (value);
    }
  if (c->realm == NULL)
    {
      challenge_free (c);
      return false;
    }
  return true;
}

/* Tokens of this process.  */
struct cached
{
  struct cached *next;
  char *base;  /* the registry's origin */
  char *key;   /* realm, service, scope, who: what the token is for */
  char *who;   /* sha256 of the credentials ("" anonymous) */
  char *scope; /* as challenged */
  char *token;
  time_t until; /* CLOCK_MONOTONIC seconds */
};

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cached *cache;

static time_t
now_s (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec;
}

static void
cached_free (struct cached *e)
{
  free (e->base);
  free (e->key);
  free (e->who);
  free (e->scope);
  explicit_bzero (e->token, strlen (e->token));
  free (e->token);
  free (e);
}

/* Drop the expired entries and the one holding TOKEN, if any; under
   cache_lock.  */
static void
cache_prune (const char *token)
{
  struct cached **p = &cache, *e;
  time_t now = now_s ();
  int n = 0;

  while ((e = *p) != NULL)
    if (e->until <= now || (token && strcmp (e->token, token) == 0) || n >= MAX_CACHED)
      {
        *p = e->next;
        cached_free (e);
      }
    else
      {
        n++;
        p = &e->next;
      }
}

/* A copy of the token cached under KEY, NULL if none.  */
static char *
cache_get (const char *key)
{
  struct cached *e;
  char *token = NULL;

  pthread_mutex_lock (&cache_lock);
  cache_prune (NULL);
  for (e = cache; e; e = e->next)
    if (strcmp (e->key, key) == 0)
      {
        token = xstrdup (e->token);
        break;
      }
  pthread_mutex_unlock (&cache_lock);
  return token;
}

/* The newest token that WHO got for R's repository, NULL if none: a
   handle's first request sends it instead of waiting for a challenge.  */
static char *
cache_get_for_repo (const struct esbx_registry *r, const char *who)
{
  _cleanup_free_ char *needle = xasprintf ("repository:%s:", r->repo);
  struct cached *e, *best = NULL;
  char *token = NULL;

  pthread_mutex_lock (&cache_lock);
  cache_prune (NULL);
  /* The newest, and one that may push before one that may only pull:
     a publish's first request is an upload.  */
  for (e = cache; e; e = e->next)
    if (strcmp (e->base, r->base) == 0 && strcmp (e->who, who) == 0
        && strstr (e->scope, needle) != NULL
        && (best == NULL || (strstr (e->scope, "push") && !strstr (best->scope, "push"))))
      best = e;
  if (best)
    token = xstrdup (best->token);
  pthread_mutex_unlock (&cache_lock);
  return token;
}

static int
compare_strings (const void *a, const void *b)
{
  return strcmp (*(char *const *)a, *(char *const *)b);
}

/* The words of TEXT cut at SEP (TEXT is changed), sorted, joined by JOIN
   into a new string; EACH, when not NULL, rewrites every word first.  */
static char *
sorted_words (char *text, const char *sep, char join, char *(*each) (char *))
{
  struct strv words = { 0 };
  char *save = NULL, *w, *out;
  size_t i, len = 0;

  for (w = strtok_r (text, sep, &save); w; w = strtok_r (NULL, sep, &save))
    strv_push (&words, each ? each (w) : xstrdup (w));
  if (words.n == 0)
    return xstrdup ("");
  esbx_sort (words.v, words.n, sizeof *words.v, compare_strings);
  for (i = 0; i < words.n; i++)
    len += strlen (words.v[i]) + 1;
  out = xmalloc0 (len);
  for (i = 0; i < words.n; i++)
    {
      if (i)
        out[strlen (out)] = join;
      strcat (out, words.v[i]);
    }
  strv_free (&words);
  return out;
}

/* "repository:NAME:ACTIONS" with its actions sorted.  */
static char *
scope_item_key (char *item)
{
  char *colon = strrchr (item, ':');
  _cleanup_free_ char *actions = NULL;

  if (colon == NULL)
    return xstrdup (item);
  *colon = '\0';
  actions = sorted_words (colon + 1, ",", ',', NULL);
  return xasprintf ("%s:%s", item, actions);
}

/* SCOPE as a cache key: its items and each item's actions in one order
   ("repository:r:push,pull" and "repository:r:pull,push" are one scope,
   and registries write either).  */
static char *
scope_key (const char *scope)
{
  _cleanup_free_ char *copy = xstrdup (scope);

  return sorted_words (copy, " ", ' ', scope_item_key);
}

static void
cache_put (const struct esbx_registry *r, const char *key, const char *who, const char *scope,
           const char *token, int64_t expires_in)
{
  struct cached *e = xmalloc (sizeof *e);

  e->base = xstrdup (r->base);
  e->key = xstrdup (key);
  e->who = xstrdup (who);
  e->scope = xstrdup (scope);
  e->token = xstrdup (token);
  /* Loosely: a token is used for three quarters of its life, so that
     one fetched at the end of it does not expire on the way.  */
  e->until = now_s () + (time_t)(expires_in - expires_in / 4);
  pthread_mutex_lock (&cache_lock);
  e->next = cache;
  cache = e;
  cache_prune (NULL);
  pthread_mutex_unlock (&cache_lock);
}

static void
cache_forget (const char *token)
{
  pthread_mutex_lock (&cache_lock);
  cache_prune (token);
  pthread_mutex_unlock (&cache_lock);
}

/* "NAME=VALUE&" appended to *URL.  */
static void
append_param (char **url, const char *name, const char *value)
{
  _cleanup_free_ char *e = esbx_url_escape (value), *u = *url;
  *url = xasprintf ("%s%s=%s&", u, name, e);
}

static bool
same_origin (const char *a, const char *b)
{
  _cleanup_free_ char *oa = esbx_http_origin (a), *ob = esbx_http_origin (b);
  return strcasecmp (oa, ob) == 0;
}

/* A bearer token goes into a header line: printable, no spaces.  */
static bool
token_valid (const char *t)
{
  if (*t == '\0')
    return false;
  for (; *t; t++)
    if (*t <= ' ' || *t >= 127)
      return false;
  return true;
}

/* The realm's refusal: its status and the first error message of an OCI
   style body, or its `details`.  */
static int
realm_status_error (const char *shown, const struct esbx_http_response *rs, bool anonymous,
                    esbx_error_t *err)
{
  _cleanup_json_ json_t *j = NULL;
  _cleanup_free_ char *why = NULL;
  esbx_error_t ignored = NULL;
  const char *msg = NULL;

  if (rs->body && (j = json_parse_limit (rs->body, rs->len, TOKEN_ANSWER_MAX, &ignored)) != NULL)
    {
      msg = json_get_string (json_at (json_get (j, "errors"), 0), "message");
      if (msg == NULL)
        msg = json_get_string (j, "details");
    }
  esbx_error_free (&ignored);
  why = msg ? esbx_escape_line (msg) : NULL;
  return esbx_make_error_kind (err, rs->status == 401 || rs->status == 403 ? ESBX_ERR_FORBIDDEN : 0,
                               0, "token realm `%s`: HTTP %ld%s%s%s", shown, rs->status,
                               why ? ": " : "", why ? why : "",
                               anonymous && rs->status == 401 ? " (asked anonymously)" : "");
}

static bool
insufficient_scope (const struct challenge *c)
{
  return c->error && strcmp (c->error, "insufficient_scope") == 0;
}

/* A token for challenge C: from the cache unless FRESH or it is REFUSED
   (the one the registry just turned down), else from the realm (*FETCHED
   says so).  */
static int
get_token (struct esbx_registry *r, const struct challenge *c, const char *refused, bool fresh,
           char **token, bool *fetched, esbx_error_t *err)
{
  const char *userpwd = r->auth.userpwd, *scope = c->scope ? c->scope : "";
  _cleanup_free_ char *shown = NULL, *url = NULL, *key = NULL, *user = NULL;
  _cleanup_json_ json_t *j = NULL;
  char who[ESBX_SHA256_HEX_LEN + 1] = "";
  struct esbx_http_auth auth = { .ca = r->auth.ca, .cert = r->auth.cert, .key = r->auth.key };
  struct esbx_http_request rq;
  struct esbx_http_response rs;
  const char *t, *s, *end;
  int64_t expires_in = DEFAULT_EXPIRES_S;

  {
    _cleanup_free_ char *realm = xstrndup (c->realm, strcspn (c->realm, "?#"));
    shown = esbx_escape_line (realm);
  }
  if (!esbx_has_prefix (c->realm, "https://") && !esbx_has_prefix (c->realm, "http://"))
    return esbx_make_error (err, 0, "token realm `%s` is not an http(s) URL", shown);
  for (s = c->realm; *s; s++)
    if (*s <= ' ' || *s >= 127)
      return esbx_make_error (err, 0, "token realm `%s` is not an http(s) URL", shown);
  if (userpwd)
    {
      if (!esbx_has_prefix (c->realm, "https://") && !same_origin (c->realm, r->base))
        return esbx_make_error_kind (err, ESBX_ERR_FORBIDDEN, 0,
                                     "token realm `%s` is plain http on another origin than the "
                                     "registry: credentials are sent to it only over https",
                                     shown);
      esbx_sha256_buf (userpwd, strlen (userpwd), who);
      user = xstrndup (userpwd, strcspn (userpwd, ":"));
    }
  {
    _cleanup_free_ char *sk = scope_key (scope);
    key = xasprintf ("%s\n%s\n%s\n%s", c->realm, c->service ? c->service : "", sk, who);
  }
  /* A token refused for another reason than its scope is no good for
     any scope.  */
  if (refused && !insufficient_scope (c))
    cache_forget (refused);
  *token = fresh ? NULL : cache_get (key);
  if (*token && refused && strcmp (*token, refused) == 0)
    {
      explicit_bzero (*token, strlen (*token));
      free (steal_pointer (token));
    }
  if (*token)
    return 0;
  *fetched = true;

  url = xasprintf ("%s%c", c->realm, strchr (c->realm, '?') ? '&' : '?');
  if (c->service)
    append_param (&url, "service", c->service);
  /* One scope parameter per scope of the challenge.  */
  for (s = scope; *(s += strspn (s, " ")); s = end)
    {
      _cleanup_free_ char *one = NULL;
      end = s + strcspn (s, " ");
      one = xstrndup (s, (size_t)(end - s));
      append_param (&url, "scope", one);
    }
  if (user && user[0])
    append_param (&url, "account", user);
  url[strlen (url) - 1] = '\0';
  auth.userpwd = userpwd;
  esbx_http_request_init (&rq, "GET", url);
  rq.auth = &auth;
  if (esbx_http_do (&rq, &rs, err) < 0)
    return esbx_error_wrap (err, "token realm `%s`", shown);
  if (rs.status != 200)
    {
      realm_status_error (shown, &rs, userpwd == NULL, err);
      esbx_http_response_free (&rs);
      return -1;
    }
  j = rs.body ? json_parse_limit (rs.body, rs.len, TOKEN_ANSWER_MAX, err) : NULL;
  if (rs.body)
    explicit_bzero (rs.body, rs.len);
  esbx_http_response_free (&rs);
  if (j == NULL)
    {
      esbx_error_free (err);
      return esbx_make_error (err, 0, "token realm `%s`: the answer is not JSON", shown);
    }
  t = json_get_string (j, "token");
  if (t == NULL || t[0] == '\0')
    t = json_get_string (j, "access_token");
  if (t == NULL || !token_valid (t))
    return esbx_make_error (err, 0, "token realm `%s`: the answer has no usable token", shown);
  if (!json_get_int (j, "expires_in", &expires_in) || expires_in <= 0)
    expires_in = DEFAULT_EXPIRES_S;
  /* A realm's word, capped: now + INT64_MAX overflows time_t.  */
  if (expires_in > MAX_EXPIRES_S)
    expires_in = MAX_EXPIRES_S;
  *token = xstrdup (t);
  cache_put (r, key, who, scope, t, expires_in);
  return 0;
}

/* The registry refused the token it asked for: why, in one line.  */
static int
refused_error (const struct esbx_registry *r, const struct challenge *c, long status,
               esbx_error_t *err)
{
  _cleanup_free_ char *realm = xstrndup (c->realm, strcspn (c->realm, "?#"));
  _cleanup_free_ char *shown = esbx_escape_line (realm);
  /* Its actions sorted: registries name them in either order.  */
  _cleanup_free_ char *key = scope_key (c->scope ? c->scope : "");
  _cleanup_free_ char *scope = esbx_escape_line (key);
  _cleanup_free_ char *as = NULL;

  if (r->auth.userpwd)
    {
      _cleanup_free_ char *user = xstrndup (r->auth.userpwd, strcspn (r->auth.userpwd, ":"));
      _cleanup_free_ char *user_shown = esbx_escape_line (user);
      as = xasprintf (" to user `%s`", user_shown);
    }
  else
    as = xstrdup (" (asked anonymously)");
  if (insufficient_scope (c))
    return esbx_make_error_kind (err, ESBX_ERR_FORBIDDEN, 0,
                                 "HTTP %ld: the token of realm `%s` does not grant `%s`%s", status,
                                 shown, scope, as);
  return esbx_make_error_kind (err, ESBX_ERR_FORBIDDEN, 0,
                               "HTTP %ld: the registry refuses the token of realm `%s` for `%s`%s",
                               status, shown, scope, as);
}

/* R's token, from the cache when the handle has none yet.  */
static void
token_for_repo (struct esbx_registry *r)
{
  char who[ESBX_SHA256_HEX_LEN + 1] = "";

  if (r->token)
    return;
  if (r->auth.userpwd)
    esbx_sha256_buf (r->auth.userpwd, strlen (r->auth.userpwd), who);
  r->token = cache_get_for_repo (r, who);
}

void
esbx_registry_auth_now (struct esbx_registry *r, struct esbx_http_auth *auth)
{
  token_for_repo (r);
  *auth = r->auth;
  if (r->token)
    {
      auth->userpwd = NULL;
      auth->bearer = r->token;
    }
}

bool
esbx_registry_challenged (const struct esbx_http_response *rs)
{
  struct challenge c;

  if (rs->status != 401 || !parse_challenge (rs->www_authenticate, &c))
    return false;
  challenge_free (&c);
  return true;
}

/* At most three sends: with the token the handle has, with one of the
   cache for the challenged scope, with a new one of the realm; a token
   fresh from the realm that is refused ends it.  */
static int
send_with_tokens (struct esbx_registry *r, struct esbx_http_request *rq,
                  struct esbx_http_response *rs, esbx_error_t *err)
{
  struct esbx_http_auth auth;
  bool fetched = false, cached = false;

  for (;;)
    {
      struct challenge c;
      char *token = NULL;

      esbx_registry_auth_now (r, &auth);
      rq->auth = &auth;
      if (esbx_http_do (rq, rs, err) < 0)
        return -1;
      if (rs->status != 401 || !parse_challenge (rs->www_authenticate, &c))
        return 0;
      if (fetched)
        {
          refused_error (r, &c, rs->status, err);
          challenge_free (&c);
          esbx_http_response_free (rs);
          return -1;
        }
      esbx_http_response_free (rs);
      if (get_token (r, &c, r->token, cached, &token, &fetched, err) < 0)
        {
          challenge_free (&c);
          return -1;
        }
      cached = true;
      challenge_free (&c);
      esbx_registry_forget_token (r);
      r->token = token;
      /* The 401's body went there.  */
      if (rq->out_fd >= 0 && (ftruncate (rq->out_fd, 0) < 0 || lseek (rq->out_fd, 0, SEEK_SET) < 0))
        return esbx_make_error (err, errno, "truncate the answer");
    }
}

int
esbx_registry_send (struct esbx_registry *r, struct esbx_http_request *rq,
                    struct esbx_http_response *rs, esbx_error_t *err)
{
  int ret = send_with_tokens (r, rq, rs, err);

  rq->auth = &r->auth;
  return ret;
}

void
esbx_registry_forget_token (struct esbx_registry *r)
{
  if (r->token)
    explicit_bzero (r->token, strlen (r->token));
  free (r->token);
  r->token = NULL;
}
