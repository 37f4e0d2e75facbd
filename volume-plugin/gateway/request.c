#include "request.h"
#include "http.h"
#include "utils.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool
esbx_gateway_query_flag (struct MHD_Connection *conn, const char *key)
{
  const char *v = MHD_lookup_connection_value (conn, MHD_GET_ARGUMENT_KIND, key);

  return v && strcmp (v, "0") != 0 && strcmp (v, "false") != 0;
}

void
esbx_gateway_reply_json (struct esbx_gateway_ctx *ctx, unsigned status, json_t *doc)
{
  free (ctx->out);
  ctx->out = json_serialize (doc, false, &ctx->out_len);
  ctx->status = status;
  ctx->content_type = "application/json";
  json_free (doc);
}

/* {"error", "kind", "code"}: the message, the kind it was made with and
   the exit status the CLI gives it (a remote CLI takes the kind).  */
static void
reply_error (struct esbx_gateway_ctx *ctx, unsigned status, const struct esbx_error *e)
{
  json_t *o = json_new (JSON_OBJECT);

  json_set_error (o, e);
  free (ctx->reason);
  ctx->reason = xstrdup (e->msg);
  esbx_gateway_reply_json (ctx, status, o);
}

void
esbx_gateway_reply_fail (struct esbx_gateway_ctx *ctx, enum esbx_error_kind kind, int status,
                         const char *fmt, ...)
{
  _cleanup_free_ char *msg = NULL;
  struct esbx_error e = { .kind = kind, .status = status };
  va_list ap;

  va_start (ap, fmt);
  msg = xvasprintf (fmt, ap);
  va_end (ap);
  e.msg = msg;
  reply_error (ctx, esbx_http_status_of_error (&e), &e);
}

void
esbx_gateway_reply_refused (struct esbx_gateway_ctx *ctx, unsigned status,
                            enum esbx_error_kind kind, const char *msg)
{
  struct esbx_error e = { .kind = kind, .msg = (char *)msg };

  reply_error (ctx, status, &e);
}

void
esbx_gateway_reply_forbidden (struct esbx_gateway_ctx *ctx, char *reason)
{
  esbx_gateway_reply_fail (ctx, ESBX_ERR_FORBIDDEN, 0, "forbidden: %s", reason);
  free (reason);
}

/* A library error: its HTTP status and its exit status both follow from
   its kind.  */
void
esbx_gateway_reply_err (struct esbx_gateway_ctx *ctx, esbx_error_t *err)
{
  reply_error (ctx, esbx_http_status_of_error (*err), *err);
  esbx_error_free (err);
}

const char *
esbx_gateway_query (struct esbx_gateway_ctx *ctx, const char *key)
{
  return MHD_lookup_connection_value (ctx->conn, MHD_GET_ARGUMENT_KIND, key);
}

static void
reply_ok (struct esbx_gateway_ctx *ctx)
{
  esbx_gateway_reply_json (ctx, MHD_HTTP_OK, json_new (JSON_OBJECT));
}

void
esbx_gateway_reply_string (struct esbx_gateway_ctx *ctx, unsigned status, const char *key,
                           const char *value)
{
  json_t *o = json_new (JSON_OBJECT);

  json_set_string (o, key, value);
  esbx_gateway_reply_json (ctx, status, o);
}

void
esbx_gateway_reply_view (struct esbx_gateway_ctx *ctx, json_t *view, esbx_error_t *err)
{
  if (view == NULL)
    return esbx_gateway_reply_err (ctx, err);
  esbx_gateway_reply_json (ctx, MHD_HTTP_OK, view);
}

void
esbx_gateway_reply_done (struct esbx_gateway_ctx *ctx,
                         int (*op) (esbx_store_t *, const char *, esbx_error_t *))
{
  esbx_error_t err = NULL;

  if (op (ctx->store, ctx->arg, &err) < 0)
    return esbx_gateway_reply_err (ctx, &err);
  reply_ok (ctx);
}

static void
reply_raw (struct esbx_gateway_ctx *ctx, char *owned, size_t len, const char *content_type)
{
  free (ctx->out);
  ctx->out = owned;
  ctx->out_len = len;
  ctx->status = MHD_HTTP_OK;
  ctx->content_type = content_type;
}

/* Everything readable from FD (from offset 0), up to LIMIT bytes.  */
static char *
slurp_fd (int fd, size_t limit, size_t *len)
{
  struct stat st;
  char *buf;
  size_t n = 0;
  ssize_t r;

  if (fstat (fd, &st) < 0)
    st.st_size = 0;
  if ((size_t)st.st_size < limit)
    limit = (size_t)st.st_size;
  buf = xmalloc (limit + 1);
  while (n < limit && (r = TEMP_FAILURE_RETRY (pread (fd, buf + n, limit - n, (off_t)n))) > 0)
    n += (size_t)r;
  buf[n] = '\0';
  *len = n;
  return buf;
}

void
esbx_gateway_reply_file (struct esbx_gateway_ctx *ctx, int fd, const char *content_type)
{
  size_t len;
  char *buf = slurp_fd (fd, ESBX_GATEWAY_MAX_FILE_READ, &len);

  reply_raw (ctx, buf, len, content_type);
}

static bool
field_allowed (const char *key, const char *const *allowed)
{
  for (; *allowed; allowed++)
    if (strcmp (key, *allowed) == 0)
      return true;
  return false;
}

/* The items of an array, or the members of an object, are all strings.  */
static bool
all_strings (const json_t *v)
{
  size_t i;

  for (i = 0; i < json_len (v); i++)
    if (json_at (v, i)->type != JSON_STRING)
      return false;
  return true;
}

/* Refuse unknown fields and fields of the wrong type.  TYPES holds one
   letter per allowed field: s string, b bool, a array of strings, o
   object of strings.  */
int
esbx_gateway_check_body (struct esbx_gateway_ctx *ctx, const char *const *allowed,
                         const char *types)
{
  const json_t *v;
  const char *key;
  size_t i, k;

  json_object_foreach (ctx->json, i, key, v)
    {
      char want;

      if (!field_allowed (key, allowed))
        {
          esbx_gateway_reply_fail (ctx, ESBX_ERR_USAGE, 0, "unknown field `%s` in the request body",
                                   key);
          return -1;
        }
      for (k = 0; strcmp (allowed[k], key) != 0; k++)
        ;
      want = types[k];
      if (v->type == JSON_NULL)
        continue;
      if ((want == 's' && v->type != JSON_STRING) || (want == 'b' && v->type != JSON_BOOL)
          || (want == 'a' && v->type != JSON_ARRAY) || (want == 'o' && v->type != JSON_OBJECT)
          || ((want == 'a' || want == 'o') && !all_strings (v)))
        {
          esbx_gateway_reply_fail (ctx, ESBX_ERR_USAGE, 0, "field `%s` must be %s", key,
                                   want == 's'   ? "a string"
                                   : want == 'b' ? "true or false"
                                   : want == 'a' ? "an array of strings"
                                                 : "an object of strings");
          return -1;
        }
    }
  return 0;
}

/* A NULL-terminated vector borrowing the strings of a JSON array.  */
char **
esbx_gateway_strings (const json_t *arr)
{
  size_t n = arr && arr->type == JSON_ARRAY ? json_len (arr) : 0, i;
  char **v = xmalloc0 ((n + 1) * sizeof *v);

  for (i = 0; i < n; i++)
    v[i] = json_at (arr, i)->text;
  return v;
}

int
esbx_gateway_session_must_exist (struct esbx_gateway_ctx *ctx)
{
  if (esbx_session_exists (ctx->store, ctx->arg))
    return 0;
  esbx_gateway_reply_fail (ctx, ESBX_ERR_NOT_FOUND, 0, "session `%s` does not exist", ctx->arg);
  return -1;
}

void
esbx_gateway_reply_report (struct esbx_gateway_ctx *ctx, esbx_gateway_report_fn report)
{
  _cleanup_free_ char *text = NULL;
  esbx_error_t err = NULL;
  size_t len = 0;
  FILE *f = open_memstream (&text, &len);
  int r;

  if (f == NULL)
    return esbx_gateway_reply_fail (ctx, ESBX_ERR_FAILED, errno, "open_memstream: %s",
                                    strerror (errno));
  r = report (ctx, f, &err);
  fclose (f);
  if (r < 0)
    return esbx_gateway_reply_err (ctx, &err);
  esbx_gateway_reply_string (ctx, MHD_HTTP_OK, "report", text ? text : "");
}
