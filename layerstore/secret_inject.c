/* Where the egress proxy puts a secret: its hosts and the form.
 *
 *   ROOT/secrets/.inject/NAME   {"for": [HOST...], "header": "NAME: T{}"?,
 *                                "basic": USER?, "query": PARAM?}, 0600
 *
 * A secret with this record may be attached with `--secret NAME,inject`:
 * the session then holds a placeholder (random, kept in its record) and
 * the proxy (shim/proxy/inject.c) puts the value into requests to the
 * hosts of "for" only.  HOST is a name or *.DOMAIN, checked as an
 * allow-list entry's host.  Written before the value appears and removed
 * after it has gone, under the secrets' lock (secret.c), as the owner.  */
#include "internal.h"
#include "fs.h"
#include "text.h"
#include "utils.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define INJECT_DIR "secrets/.inject"

static int
check_header (const char *name, const char *h, esbx_error_t *err)
{
  const char *colon = strchr (h, ':'), *p;

  if (colon == NULL || colon == h || strstr (colon, "{}") == NULL)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "secret `%s`: --header `%s`: expected `NAME: TEXT` with `{}` "
                                 "where the value goes",
                                 name, h);
  for (p = h; p < colon; p++)
    if (!(isalnum ((unsigned char)*p) || *p == '-' || *p == '_'))
      return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                   "secret `%s`: --header `%s`: bad header name", name, h);
  for (p = colon; *p; p++)
    if ((unsigned char)*p < ' ' || *p == 0x7f)
      return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                   "secret `%s`: --header `%s`: control characters", name, h);
  return 0;
}

static int
check_token (const char *name, const char *what, const char *v, esbx_error_t *err)
{
  const char *p;

  if (*v == '\0' || strlen (v) > 128)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "secret `%s`: %s: 1 to 128 characters",
                                 name, what);
  for (p = v; *p; p++)
    if (!(isalnum ((unsigned char)*p) || strchr ("-_.~", *p)))
      return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                   "secret `%s`: %s `%s`: letters, digits and -_.~ only", name,
                                   what, v);
  return 0;
}

int
esbx_secret_inject_parse (const char *name, char *const *hosts, const char *header,
                          const char *basic, const char *query, json_t **out, esbx_error_t *err)
{
  _cleanup_json_ json_t *o = NULL;
  json_t *arr;
  size_t i, forms = (header != NULL) + (basic != NULL) + (query != NULL);

  *out = NULL;
  if (hosts == NULL || hosts[0] == NULL)
    {
      if (forms)
        return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                     "secret `%s`: --header, --basic and --query need --for HOST",
                                     name);
      return 0;
    }
  if (forms > 1)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "secret `%s`: one of --header, --basic and --query", name);
  o = json_new (JSON_OBJECT);
  arr = json_new (JSON_ARRAY);
  json_set (o, "for", arr);
  for (i = 0; hosts[i]; i++)
    {
      struct esbx_egress_rule r;

      if (esbx_egress_rule_parse (hosts[i], &r, err) < 0)
        return esbx_error_wrap (err, "secret `%s`: --for", name);
      if (r.name == NULL || r.port || r.path || r.methods[0])
        {
          esbx_egress_rule_clear (&r);
          return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                       "secret `%s`: --for `%s`: expected a host name or *.DOMAIN",
                                       name, hosts[i]);
        }
      json_append (arr, json_new_string (r.name));
      esbx_egress_rule_clear (&r);
    }
  if (header && check_header (name, header, err) < 0)
    return -1;
  if (basic && check_token (name, "--basic", basic, err) < 0)
    return -1;
  if (query && check_token (name, "--query", query, err) < 0)
    return -1;
  if (header)
    json_set_string (o, "header", header);
  if (basic)
    json_set_string (o, "basic", basic);
  if (query)
    json_set_string (o, "query", query);
  *out = steal_pointer (&o);
  return 0;
}

static int
open_inject_dir (esbx_store_t *store, bool create, esbx_error_t *err)
{
  int fd;

  if (create && mkdirat (store->rootfd, INJECT_DIR, 0700) < 0 && errno != EEXIST)
    return esbx_make_error (err, errno, "mkdir `%s/" INJECT_DIR "`", store->root);
  fd = TEMP_FAILURE_RETRY (
      openat (store->rootfd, INJECT_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (fd < 0)
    return esbx_make_error (err, errno, "open `%s/" INJECT_DIR "`", store->root);
  return fd;
}

int
esbx_secret_inject_write (esbx_store_t *store, const char *name, const json_t *inject,
                          esbx_error_t *err)
{
  _cleanup_free_ char *text = NULL;
  _cleanup_close_ int dfd = -1;
  size_t len;

  if (inject == NULL)
    {
      esbx_secret_inject_remove (store, name);
      return 0;
    }
  dfd = open_inject_dir (store, true, err);
  if (dfd < 0)
    return esbx_error_wrap (err, "secret `%s`", name);
  text = json_serialize (inject, true, &len);
  if (esbx_write_file_atomic_at (dfd, name, text, len, 0600, err) < 0)
    return esbx_error_wrap (err, "secret `%s`: its hosts", name);
  return 0;
}

void
esbx_secret_inject_remove (esbx_store_t *store, const char *name)
{
  _cleanup_close_ int dfd = -1;

  if (!esbx_exists_at (store->rootfd, INJECT_DIR))
    return;
  dfd = open_inject_dir (store, false, NULL);
  if (dfd >= 0)
    unlinkat (dfd, name, 0);
}

json_t *
esbx_secret_inject_read (esbx_store_t *store, const char *name)
{
  _cleanup_close_ int dfd = -1;
  esbx_error_t e = NULL;
  json_t *j;

  if (!esbx_name_valid (name) || !esbx_exists_at (store->rootfd, INJECT_DIR))
    return NULL;
  dfd = open_inject_dir (store, false, &e);
  if (dfd < 0 || !esbx_exists_at (dfd, name))
    {
      esbx_error_free (&e);
      return NULL;
    }
  j = json_parse_file_at (dfd, name, &e);
  esbx_error_free (&e);
  if (j && (json_get (j, "for") == NULL || json_get (j, "for")->type != JSON_ARRAY))
    {
      json_free (j);
      return NULL;
    }
  return j;
}

bool
esbx_secret_inject_binds (const json_t *inject, const char *host)
{
  const json_t *h;
  size_t i, hl = strlen (host);

  json_array_foreach (json_get (inject, "for"), i, h)
    {
      const char *d = h->text;

      if (h->type != JSON_STRING)
        continue;
      if (strncmp (d, "*.", 2) == 0)
        {
          size_t dl = strlen (d + 1);
          if (hl > dl && strcasecmp (host + hl - dl, d + 1) == 0)
            return true;
        }
      else if (strcasecmp (d, host) == 0)
        return true;
    }
  return false;
}
