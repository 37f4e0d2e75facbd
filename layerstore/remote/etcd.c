/* liblayerstore: the two calls of etcd's v3 API that hold a project's head
 * (docs/SCALE-OUT.md), through its JSON gateway: POST /v3/kv/range and
 * POST /v3/kv/txn.  Keys and values travel base64-encoded; 64-bit numbers
 * are JSON strings.  */
#include "remote.h"
#include "http_client.h"
#include "text.h"
#include "utils.h"

#include <nettle/base64.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static char *
b64_encode (const char *s, size_t len)
{
  char *out = xmalloc (BASE64_ENCODE_RAW_LENGTH (len) + 1);

  base64_encode_raw ((char *)out, len, (const uint8_t *)s);
  out[BASE64_ENCODE_RAW_LENGTH (len)] = '\0';
  return out;
}

static int
b64_decode (const char *s, char **out, size_t *len)
{
  struct base64_decode_ctx ctx;
  size_t n = strlen (s), done;

  *out = xmalloc (BASE64_DECODE_LENGTH (n) + 1);
  base64_decode_init (&ctx);
  done = BASE64_DECODE_LENGTH (n);
  if (!base64_decode_update (&ctx, &done, (uint8_t *)*out, n, s) || !base64_decode_final (&ctx))
    {
      free (*out);
      *out = NULL;
      return -1;
    }
  *len = done;
  (*out)[done] = '\0';
  return 0;
}

static bool
get_int64 (const json_t *obj, const char *key, int64_t *out)
{
  const json_t *v = json_get (obj, key);
  char *end;

  *out = 0;
  if (v == NULL)
    return false;
  if (v->type == JSON_NUMBER)
    return json_int_value (v, out);
  if (v->type != JSON_STRING)
    return false;
  *out = strtoll (v->text, &end, 10);
  return *end == '\0';
}

void
esbx_etcd_hint (const struct esbx_remote *rm, esbx_error_t *err)
{
  char *msg;

  /* etcd's --client-cert-auth sends an alert ("sslv3 alert bad
     certificate") and closes.  Over TLS 1.3 the client has finished its
     handshake by then, so what curl reports depends on when the alert
     arrives: the alert, a reset connection, or getpeername() failing.  */
  if (rm->etcd_auth.cert || *err == NULL || !esbx_has_prefix (rm->etcd, "https://"))
    return;
  if (!(strstr ((*err)->msg, "alert") && strstr ((*err)->msg, "certificate"))
      && strstr ((*err)->msg, "getpeername") == NULL
      && strstr ((*err)->msg, "Connection reset by peer") == NULL)
    return;
  msg = xasprintf ("%s (etcd with --client-cert-auth closes connections without a client "
                   "certificate: remote set --cert FILE --key FILE)",
                   (*err)->msg);
  free ((*err)->msg);
  (*err)->msg = msg;
}

static int
call (const struct esbx_remote *rm, const char *path, const json_t *body, json_t **out,
      esbx_error_t *err)
{
  const char *url = rm->etcd;
  _cleanup_free_ char *full = xasprintf ("%s%s", url, path);
  _cleanup_free_ char *text = NULL;
  struct esbx_http_request rq;
  struct esbx_http_response rs;
  size_t len;

  text = json_serialize (body, false, &len);
  esbx_http_request_init (&rq, "POST", full);
  rq.content_type = "application/json";
  rq.body = text;
  rq.body_len = len;
  rq.auth = &rm->etcd_auth;
  if (esbx_http_do (&rq, &rs, err) < 0)
    {
      esbx_etcd_hint (rm, err);
      return esbx_error_wrap (err, "etcd `%s`", url);
    }
  if (rs.status != 200 || rs.body == NULL)
    {
      _cleanup_free_ char *why = esbx_escape_line (rs.body ? rs.body : "");
      esbx_make_error (err, 0, "etcd `%s`: %s: HTTP %ld %s", url, path, rs.status, why);
      esbx_http_response_free (&rs);
      return -1;
    }
  *out = json_parse (rs.body, rs.len, err);
  esbx_http_response_free (&rs);
  if (*out == NULL)
    return esbx_error_wrap (err, "etcd `%s`: %s", url, path);
  return 0;
}

void
esbx_etcd_kv_free (struct esbx_etcd_kv *kv)
{
  free (kv->value);
  memset (kv, 0, sizeof *kv);
}

int
esbx_etcd_get (const struct esbx_remote *rm, const char *key, struct esbx_etcd_kv *kv,
               esbx_error_t *err)
{
  _cleanup_json_ json_t *body = json_new (JSON_OBJECT), *ans = NULL;
  _cleanup_free_ char *k = b64_encode (key, strlen (key));
  const json_t *first;
  const char *value;

  memset (kv, 0, sizeof *kv);
  json_set_string (body, "key", k);
  if (call (rm, "/v3/kv/range", body, &ans, err) < 0)
    return -1;
  first = json_at (json_get (ans, "kvs"), 0);
  if (first == NULL)
    return 0;
  value = json_get_string (first, "value");
  if (!get_int64 (first, "mod_revision", &kv->mod_revision)
      || b64_decode (value ? value : "", &kv->value, &kv->len) < 0)
    return esbx_make_error (err, 0, "etcd `%s`: key `%s`: malformed answer", rm->etcd, key);
  return 0;
}

/* One transaction: OP (a request_put or request_delete_range, its body
   OPBODY with "key" added) if KEY's mod_revision is still MOD_REVISION;
   *DONE says whether it was.  */
static int
txn_if (const struct esbx_remote *rm, const char *key, int64_t mod_revision, const char *op,
        json_t *opbody, bool *done, esbx_error_t *err)
{
  _cleanup_json_ json_t *body = json_new (JSON_OBJECT), *ans = NULL;
  _cleanup_free_ char *k = b64_encode (key, strlen (key));
  _cleanup_free_ char *rev = xasprintf ("%lld", (long long)mod_revision);
  json_t *cmp = json_new (JSON_OBJECT), *o = json_new (JSON_OBJECT), *arr;

  json_set_string (cmp, "key", k);
  json_set_string (cmp, "target", "MOD");
  json_set_string (cmp, "result", "EQUAL");
  json_set_string (cmp, "mod_revision", rev);
  arr = json_new (JSON_ARRAY);
  json_append (arr, cmp);
  json_set (body, "compare", arr);
  json_set_string (opbody, "key", k);
  json_set (o, op, opbody);
  arr = json_new (JSON_ARRAY);
  json_append (arr, o);
  json_set (body, "success", arr);
  if (call (rm, "/v3/kv/txn", body, &ans, err) < 0)
    return -1;
  if (json_get (ans, "header") == NULL)
    return esbx_make_error (err, 0, "etcd `%s`: txn on `%s`: malformed answer", rm->etcd, key);
  *done = json_get_bool (ans, "succeeded", false);
  return 0;
}

int
esbx_etcd_put_if (const struct esbx_remote *rm, const char *key, const char *value,
                  int64_t mod_revision, bool *won, esbx_error_t *err)
{
  _cleanup_free_ char *v = b64_encode (value, strlen (value));
  json_t *put = json_new (JSON_OBJECT);

  json_set_string (put, "value", v);
  return txn_if (rm, key, mod_revision, "request_put", put, won, err);
}

int
esbx_etcd_delete_if (const struct esbx_remote *rm, const char *key, int64_t mod_revision,
                     bool *done, esbx_error_t *err)
{
  return txn_if (rm, key, mod_revision, "request_delete_range", json_new (JSON_OBJECT), done, err);
}

int
esbx_etcd_any_under (const struct esbx_remote *rm, const char *prefix,
                     bool (*fn) (const char *value, size_t len, void *data), void *data,
                     bool *found, esbx_error_t *err)
{
  _cleanup_json_ json_t *body = json_new (JSON_OBJECT), *ans = NULL;
  _cleanup_free_ char *end = xstrdup (prefix), *k = NULL, *e = NULL;
  size_t n = strlen (end), i;
  const json_t *kv;

  *found = false;
  /* The keys from PREFIX up to the next prefix of its length.  */
  if (n == 0 || (unsigned char)end[n - 1] == 0xff)
    return esbx_make_error (err, EINVAL, "etcd: prefix `%s`", prefix);
  end[n - 1]++;
  k = b64_encode (prefix, n);
  e = b64_encode (end, n);
  json_set_string (body, "key", k);
  json_set_string (body, "range_end", e);
  if (call (rm, "/v3/kv/range", body, &ans, err) < 0)
    return -1;
  json_array_foreach (json_get (ans, "kvs"), i, kv)
    {
      _cleanup_free_ char *value = NULL;
      size_t len;
      const char *v = json_get_string (kv, "value");

      if (b64_decode (v ? v : "", &value, &len) < 0)
        return esbx_make_error (err, 0, "etcd `%s`: keys under `%s`: malformed answer", rm->etcd,
                                prefix);
      if (fn (value, len, data))
        {
          *found = true;
          return 0;
        }
    }
  return 0;
}

/* For etcd_watch.c.  */
char *
esbx_etcd_b64 (const char *s, size_t len)
{
  return b64_encode (s, len);
}

int
esbx_etcd_unb64 (const char *s, char **out, size_t *len)
{
  return b64_decode (s, out, len);
}

bool
esbx_etcd_int64 (const json_t *obj, const char *key, int64_t *out)
{
  return get_int64 (obj, key, out);
}
