/* The gateway's operations: one handler per route, each the equivalent of
   a CLI verb, answering with the JSON view `esbx --json` prints (view.c)
   so that the remote CLI prints the same bytes.  Authorization has been
   decided before a handler runs (gateway.c, auth.c).  */
#include "routes.h"
#include "auth.h"
#include "events.h"
#include "exec.h"
#include "fs.h"
#include "metrics.h"
#include "path.h"
#include "ps.h"
#include "sandbox.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

/* Largest file the files endpoint returns in one answer.  */
#define MAX_FILE_READ      (64u * 1024 * 1024)
#define FOLLOW_INTERVAL_MS 200

/* ---- helpers ------------------------------------------------------------ */

static const char *
query (struct esbx_gateway_ctx *ctx, const char *key)
{
  return MHD_lookup_connection_value (ctx->conn, MHD_GET_ARGUMENT_KIND, key);
}

static void
reply_ok (struct esbx_gateway_ctx *ctx)
{
  esbx_gateway_reply_json (ctx, MHD_HTTP_OK, json_new (JSON_OBJECT));
}

/* {KEY: VALUE}: answers that carry one string (a name, a layer, a path, a
   report).  */
static void
reply_string (struct esbx_gateway_ctx *ctx, unsigned status, const char *key, const char *value)
{
  json_t *o = json_new (JSON_OBJECT);

  json_set_string (o, key, value);
  esbx_gateway_reply_json (ctx, status, o);
}

/* A JSON view from view.c (owned), or the error that stopped it (VIEW
   NULL).  */
static void
reply_view (struct esbx_gateway_ctx *ctx, json_t *view, esbx_error_t *err)
{
  if (view == NULL)
    return esbx_gateway_reply_err (ctx, err);
  esbx_gateway_reply_json (ctx, MHD_HTTP_OK, view);
}

/* An operation on the object named in the path that answers nothing but
   success: {}.  */
static void
reply_done (struct esbx_gateway_ctx *ctx, int (*op) (esbx_store_t *, const char *, esbx_error_t *))
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

/* ---- projects ----------------------------------------------------------- */

static void
h_whoami (struct esbx_gateway_ctx *ctx)
{
  esbx_gateway_reply_json (ctx, MHD_HTTP_OK, esbx_token_to_json (ctx->token));
}

static void
h_projects_list (struct esbx_gateway_ctx *ctx)
{
  _cleanup_strv_ char **names = NULL;
  esbx_error_t err = NULL;
  json_t *arr;
  size_t i;

  names = esbx_project_list (ctx->store, &err);
  if (names == NULL)
    return esbx_gateway_reply_err (ctx, &err);
  arr = json_new (JSON_ARRAY);
  for (i = 0; names[i]; i++)
    {
      json_t *o;

      if (!esbx_auth_sees_project (ctx->store, ctx->token, names[i]))
        continue;
      o = esbx_project_json (ctx->store, names[i], &err);
      if (o == NULL)
        {
          json_free (arr);
          return esbx_gateway_reply_err (ctx, &err);
        }
      json_append (arr, o);
    }
  esbx_gateway_reply_json (ctx, MHD_HTTP_OK, arr);
}

static void
h_project_create (struct esbx_gateway_ctx *ctx)
{
  static const char *const fields[] = { "name", NULL };
  esbx_error_t err = NULL;
  const char *name;

  if (esbx_gateway_check_body (ctx, fields, "s") < 0)
    return;
  name = json_get_string (ctx->json, "name");
  if (name == NULL)
    return esbx_gateway_reply_error (ctx, MHD_HTTP_BAD_REQUEST, ESBX_EXIT_USAGE,
                                     "field `name` is required");
  /* No `from`: importing would read host paths with the daemon's rights.  */
  if (esbx_project_create (ctx->store, name, NULL, &err) < 0)
    return esbx_gateway_reply_err (ctx, &err);
  reply_string (ctx, MHD_HTTP_CREATED, "name", name);
}

static void
h_project_rm (struct esbx_gateway_ctx *ctx)
{
  reply_done (ctx, esbx_project_rm);
}

static void
h_project_squash (struct esbx_gateway_ctx *ctx)
{
  _cleanup_free_ char *id = NULL;
  esbx_error_t err = NULL;

  if (esbx_project_squash (ctx->store, ctx->arg, &id, &err) < 0)
    return esbx_gateway_reply_err (ctx, &err);
  reply_string (ctx, MHD_HTTP_OK, "layer", id);
}

static void
h_project_log (struct esbx_gateway_ctx *ctx)
{
  esbx_error_t err = NULL;

  reply_view (ctx, esbx_project_log_json (ctx->store, ctx->arg, &err), &err);
}

static void
h_project_blame (struct esbx_gateway_ctx *ctx)
{
  const char *path = query (ctx, "path");
  struct esbx_layer *l = NULL;
  esbx_error_t err = NULL;

  if (path == NULL)
    return esbx_gateway_reply_error (ctx, MHD_HTTP_BAD_REQUEST, ESBX_EXIT_USAGE,
                                     "query parameter `path` is required");
  if (esbx_blame (ctx->store, ctx->arg, path, &l, &err) < 0)
    return esbx_gateway_reply_err (ctx, &err);
  esbx_gateway_reply_json (ctx, MHD_HTTP_OK, esbx_layer_summary_json (l));
  esbx_layer_free (l);
}

/* ---- sessions ----------------------------------------------------------- */

static void
h_sessions_list (struct esbx_gateway_ctx *ctx)
{
  const char *project = query (ctx, "project");
  _cleanup_strv_ char **names = NULL;
  esbx_error_t err = NULL;
  json_t *arr;
  size_t i;

  if (project && esbx_check_name ("project", project, &err) < 0)
    return esbx_gateway_reply_err (ctx, &err);
  names = esbx_session_list (ctx->store, project, &err);
  if (names == NULL)
    return esbx_gateway_reply_err (ctx, &err);
  arr = json_new (JSON_ARRAY);
  for (i = 0; names[i]; i++)
    {
      struct esbx_session *s = NULL;

      if (esbx_session_load (ctx->store, names[i], &s, &err) < 0)
        {
          esbx_error_free (&err);
          continue;
        }
      if (esbx_auth_sees_session (ctx->store, ctx->token, s))
        json_append (arr, esbx_session_json (ctx->store, s, NULL));
      esbx_session_free (s);
    }
  esbx_gateway_reply_json (ctx, MHD_HTTP_OK, arr);
}

static void
h_session_create (struct esbx_gateway_ctx *ctx)
{
  static const char *const fields[] = { "project",   "name",   "base", "labels", "network",
                                        "workspace", "memory", "pids", "cpus",   NULL };
  struct esbx_session_opts o = { 0 };
  _cleanup_free_ char **labels = NULL;
  _cleanup_free_ char *name = NULL;
  const char *project, *s;
  esbx_error_t err = NULL;

  if (esbx_gateway_check_body (ctx, fields, "sssassssss") < 0)
    return;
  project = json_get_string (ctx->json, "project");
  if (project == NULL)
    return esbx_gateway_reply_error (ctx, MHD_HTTP_BAD_REQUEST, ESBX_EXIT_USAGE,
                                     "field `project` is required");
  o.name = json_get_string (ctx->json, "name");
  o.base = json_get_string (ctx->json, "base");
  o.network = json_get_string (ctx->json, "network");
  o.workspace = json_get_string (ctx->json, "workspace");
  o.cpus = json_get_string (ctx->json, "cpus");
  labels = esbx_gateway_strings (json_get (ctx->json, "labels"));
  o.labels = labels;
  if ((s = json_get_string (ctx->json, "memory")) && esbx_parse_size (s, &o.memory, &err) < 0)
    return esbx_gateway_reply_err (ctx, &err);
  if ((s = json_get_string (ctx->json, "pids")) && esbx_parse_size (s, &o.pids, &err) < 0)
    return esbx_gateway_reply_err (ctx, &err);
  if (esbx_session_create (ctx->store, project, &o, &name, &err) < 0)
    return esbx_gateway_reply_err (ctx, &err);
  reply_string (ctx, MHD_HTTP_CREATED, "name", name);
}

static void
h_session_inspect (struct esbx_gateway_ctx *ctx)
{
  struct esbx_session *s = NULL;
  esbx_error_t err = NULL;

  if (esbx_session_load (ctx->store, ctx->arg, &s, &err) < 0)
    return esbx_gateway_reply_err (ctx, &err);
  esbx_gateway_reply_json (
      ctx, MHD_HTTP_OK,
      esbx_session_json (ctx->store, s, esbx_sandbox_status (ctx->store, s->name)));
  esbx_session_free (s);
}

static void
h_session_path (struct esbx_gateway_ctx *ctx)
{
  _cleanup_free_ char *merged = NULL;
  esbx_error_t err = NULL;

  if (esbx_session_mount (ctx->store, ctx->arg, &err) < 0)
    return esbx_gateway_reply_err (ctx, &err);
  merged = esbx_session_merged (ctx->store, ctx->arg);
  reply_string (ctx, MHD_HTTP_OK, "path", merged);
}

static void
h_session_discard (struct esbx_gateway_ctx *ctx)
{
  reply_done (ctx, esbx_sandbox_discard);
}

static void
h_session_diff (struct esbx_gateway_ctx *ctx)
{
  struct esbx_changeset cs = { 0 };
  esbx_error_t err = NULL;
  json_t *arr;

  if (esbx_gateway_query_flag (ctx->conn, "patch"))
    {
      _cleanup_close_ int fd = memfd_create ("esbx-patch", MFD_CLOEXEC);
      _cleanup_file_ FILE *f = NULL;
      char *buf;
      size_t len;

      if (fd < 0 || (f = fdopen (dup (fd), "w")) == NULL)
        return esbx_gateway_reply_error (ctx, MHD_HTTP_INTERNAL_SERVER_ERROR, ESBX_EXIT_ERROR,
                                         "memfd: %s", strerror (errno));
      if (esbx_session_patch (ctx->store, ctx->arg, f, &err) < 0)
        return esbx_gateway_reply_err (ctx, &err);
      fflush (f);
      buf = slurp_fd (fd, MAX_FILE_READ, &len);
      return reply_raw (ctx, buf, len, "text/x-diff; charset=utf-8");
    }
  if (esbx_session_changes (ctx->store, ctx->arg, &cs, &err) < 0)
    return esbx_gateway_reply_err (ctx, &err);
  arr = esbx_changeset_json (&cs);
  esbx_changeset_free (&cs);
  esbx_gateway_reply_json (ctx, MHD_HTTP_OK, arr);
}

static int
collect_event (const json_t *ev, void *data)
{
  json_t *arr = data;
  _cleanup_free_ char *s = json_serialize (ev, false, NULL);
  esbx_error_t err = NULL;
  json_t *copy = json_parse (s, strlen (s), &err);

  esbx_error_free (&err);
  if (copy)
    json_append (arr, copy);
  return 0;
}

/* The follow stream: JSON lines until the session is discarded.  */
struct follow
{
  esbx_store_t *store;
  char *session;
  off_t offset;
  char *pending;
  size_t len, pos;
};

static int
append_line (const json_t *ev, void *data)
{
  struct follow *f = data;
  size_t l;
  _cleanup_free_ char *s = json_serialize (ev, false, &l);

  f->pending = xrealloc (f->pending, f->len + l + 1);
  memcpy (f->pending + f->len, s, l);
  f->pending[f->len + l] = '\n';
  f->len += l + 1;
  return 0;
}

static ssize_t
follow_read (void *cls, uint64_t pos, char *buf, size_t max)
{
  struct follow *f = cls;
  esbx_error_t err = NULL;
  size_t n;

  while (f->pos == f->len)
    {
      struct timespec ts = { 0, FOLLOW_INTERVAL_MS * 1000000L };

      free (f->pending);
      f->pending = NULL;
      f->len = f->pos = 0;
      if (esbx_events_read (f->store, f->session, &f->offset, append_line, f, &err) < 0)
        esbx_error_free (&err);
      if (f->len)
        break;
      if (!esbx_session_exists (f->store, f->session))
        return MHD_CONTENT_READER_END_OF_STREAM;
      nanosleep (&ts, NULL);
    }
  n = f->len - f->pos < max ? f->len - f->pos : max;
  memcpy (buf, f->pending + f->pos, n);
  f->pos += n;
  return (ssize_t)n;
}

static void
follow_free (void *cls)
{
  struct follow *f = cls;
  free (f->session);
  free (f->pending);
  free (f);
}

static void
h_session_events (struct esbx_gateway_ctx *ctx)
{
  const char *off = query (ctx, "offset"), *follow = query (ctx, "follow");
  esbx_error_t err = NULL;
  off_t offset = 0;
  json_t *arr, *o;
  char *end;

  if (esbx_gateway_session_must_exist (ctx) < 0)
    return;
  if (off)
    {
      errno = 0;
      offset = (off_t)strtoll (off, &end, 10);
      if (*off == '\0' || *end || errno || offset < 0)
        return esbx_gateway_reply_error (ctx, MHD_HTTP_BAD_REQUEST, ESBX_EXIT_USAGE,
                                         "query parameter `offset` must be a byte offset");
    }
  if (follow && strcmp (follow, "0") != 0 && strcmp (follow, "false") != 0)
    {
      struct follow *f = xmalloc0 (sizeof *f);
      f->store = ctx->store;
      f->session = xstrdup (ctx->arg);
      f->offset = offset;
      ctx->stream
          = MHD_create_response_from_callback (MHD_SIZE_UNKNOWN, 4096, follow_read, f, follow_free);
      if (ctx->stream == NULL)
        {
          follow_free (f);
          return esbx_gateway_reply_error (ctx, MHD_HTTP_INTERNAL_SERVER_ERROR, ESBX_EXIT_ERROR,
                                           "cannot start the event stream");
        }
      MHD_add_response_header (ctx->stream, MHD_HTTP_HEADER_CONTENT_TYPE, "application/x-ndjson");
      ctx->status = MHD_HTTP_OK;
      return;
    }
  arr = json_new (JSON_ARRAY);
  if (esbx_events_read (ctx->store, ctx->arg, &offset, collect_event, arr, &err) < 0)
    {
      json_free (arr);
      return esbx_gateway_reply_err (ctx, &err);
    }
  o = json_new (JSON_OBJECT);
  json_set (o, "events", arr);
  json_set_int (o, "offset", (int64_t)offset);
  esbx_gateway_reply_json (ctx, MHD_HTTP_OK, o);
}

static void
reply_conflict (struct esbx_gateway_ctx *ctx, esbx_error_t *err,
                const struct esbx_publish_result *r)
{
  json_t *o = json_new (JSON_OBJECT);

  json_set_string (o, "error", (*err)->msg);
  json_set_int (o, "code", ESBX_EXIT_CONFLICT);
  json_set (o, "conflicts", esbx_conflicts_json (r));
  free (ctx->reason);
  ctx->reason = xstrdup ((*err)->msg);
  esbx_error_free (err);
  esbx_gateway_reply_json (ctx, MHD_HTTP_CONFLICT, o);
}

static void
h_session_publish (struct esbx_gateway_ctx *ctx)
{
  static const char *const fields[] = { "message", "discard", NULL };
  struct esbx_publish_result r = { 0 };
  esbx_error_t err = NULL;
  json_t *o;

  if (esbx_gateway_check_body (ctx, fields, "sb") < 0)
    return;
  if (esbx_session_publish (ctx->store, ctx->arg, json_get_string (ctx->json, "message"), &r, &err)
      < 0)
    {
      if (r.n_conflicts)
        {
          esbx_metrics_publish (ctx->metrics, true);
          reply_conflict (ctx, &err, &r);
        }
      else
        esbx_gateway_reply_err (ctx, &err);
      esbx_publish_result_free (&r);
      return;
    }
  esbx_metrics_publish (ctx->metrics, false);
  o = esbx_publish_result_json (&r);
  esbx_publish_result_free (&r);
  if (json_get_bool (ctx->json, "discard", false)
      && esbx_sandbox_discard (ctx->store, ctx->arg, &err) < 0)
    {
      json_free (o);
      return esbx_gateway_reply_err (ctx, &err);
    }
  esbx_gateway_reply_json (ctx, MHD_HTTP_OK, o);
}

static void
h_session_rebase (struct esbx_gateway_ctx *ctx)
{
  static const char *const fields[] = { NULL };
  struct esbx_publish_result r = { 0 };
  esbx_error_t err = NULL;
  json_t *o;

  if (esbx_gateway_check_body (ctx, fields, "") < 0 || esbx_gateway_session_must_exist (ctx) < 0)
    return;
  if (esbx_sandbox_rebase (ctx->store, ctx->arg, &r, &err) < 0)
    {
      if (r.n_conflicts)
        reply_conflict (ctx, &err, &r);
      else
        esbx_gateway_reply_err (ctx, &err);
      esbx_publish_result_free (&r);
      return;
    }
  o = esbx_rebase_result_json (&r);
  esbx_publish_result_free (&r);
  esbx_gateway_reply_json (ctx, MHD_HTTP_OK, o);
}

static void
h_session_ps (struct esbx_gateway_ctx *ctx)
{
  esbx_error_t err = NULL;

  reply_view (ctx, esbx_ps_list (ctx->store, ctx->arg, &err), &err);
}

/* ---- runtime: exec and files -------------------------------------------- */

/* The session's merged view, mounted on demand, as a directory fd that
   every request path is resolved beneath.  */
static int
open_session_root (struct esbx_gateway_ctx *ctx)
{
  _cleanup_free_ char *merged = NULL;
  esbx_error_t err = NULL;
  int fd;

  if (esbx_gateway_session_must_exist (ctx) < 0)
    return -1;
  if (esbx_session_mount (ctx->store, ctx->arg, &err) < 0)
    {
      esbx_gateway_reply_err (ctx, &err);
      return -1;
    }
  merged = esbx_session_merged (ctx->store, ctx->arg);
  fd = esbx_open_dir_at (AT_FDCWD, merged, &err);
  if (fd < 0)
    esbx_gateway_reply_err (ctx, &err);
  return fd;
}

static int
clean_request_path (struct esbx_gateway_ctx *ctx, bool allow_root, char **rel)
{
  const char *path = query (ctx, "path");
  esbx_error_t err = NULL;

  if (path == NULL)
    {
      esbx_gateway_reply_error (ctx, MHD_HTTP_BAD_REQUEST, ESBX_EXIT_USAGE,
                                "query parameter `path` is required");
      return -1;
    }
  if (esbx_clean_relpath (path, allow_root, rel, &err) < 0)
    {
      esbx_gateway_reply_error (ctx, MHD_HTTP_BAD_REQUEST, ESBX_EXIT_USAGE, "path `%s`: %s", path,
                                err->msg);
      esbx_error_free (&err);
      return -1;
    }
  return 0;
}

static const char *
type_of (mode_t m)
{
  return S_ISREG (m)    ? "file"
         : S_ISDIR (m)  ? "dir"
         : S_ISLNK (m)  ? "symlink"
         : S_ISFIFO (m) ? "fifo"
                        : "other";
}

static void
list_dir (struct esbx_gateway_ctx *ctx, int fd)
{
  _cleanup_dir_ DIR *d = fdopendir (dup (fd));
  json_t *arr;
  struct dirent *de;

  if (d == NULL)
    return esbx_gateway_reply_error (ctx, MHD_HTTP_INTERNAL_SERVER_ERROR, ESBX_EXIT_ERROR,
                                     "opendir: %s", strerror (errno));
  arr = json_new (JSON_ARRAY);
  while ((de = readdir (d)))
    {
      struct stat st;
      json_t *o;

      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
        continue;
      if (fstatat (dirfd (d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        continue;
      o = json_new (JSON_OBJECT);
      json_set_string (o, "name", de->d_name);
      json_set_string (o, "type", type_of (st.st_mode));
      json_set_int (o, "size", (int64_t)st.st_size);
      json_set_int (o, "mode", st.st_mode & 07777);
      json_append (arr, o);
    }
  esbx_gateway_reply_json (ctx, MHD_HTTP_OK, arr);
}

static void
h_files_get (struct esbx_gateway_ctx *ctx)
{
  _cleanup_close_ int root = -1, fd = -1;
  _cleanup_free_ char *rel = NULL;
  esbx_error_t err = NULL;
  struct stat st;
  char *buf;
  size_t len;

  if (clean_request_path (ctx, true, &rel) < 0 || (root = open_session_root (ctx)) < 0)
    return;
  /* O_NOFOLLOW on every component: a symlink is refused, never followed.  */
  fd = rel[0] ? esbx_open_beneath (root, rel, O_RDONLY | O_NONBLOCK, 0, &err) : dup (root);
  if (fd < 0)
    {
      if (err)
        return esbx_gateway_reply_err (ctx, &err);
      return esbx_gateway_reply_error (ctx, MHD_HTTP_INTERNAL_SERVER_ERROR, ESBX_EXIT_ERROR, "dup");
    }
  if (fstat (fd, &st) < 0)
    return esbx_gateway_reply_error (ctx, MHD_HTTP_INTERNAL_SERVER_ERROR, ESBX_EXIT_ERROR,
                                     "stat: %s", strerror (errno));
  if (S_ISDIR (st.st_mode))
    return list_dir (ctx, fd);
  if (!S_ISREG (st.st_mode))
    return esbx_gateway_reply_error (ctx, MHD_HTTP_BAD_REQUEST, ESBX_EXIT_ERROR,
                                     "`%s` is a %s, not a regular file", rel, type_of (st.st_mode));
  if ((uint64_t)st.st_size > MAX_FILE_READ)
    return esbx_gateway_reply_error (ctx, MHD_HTTP_CONTENT_TOO_LARGE, ESBX_EXIT_ERROR,
                                     "`%s` is larger than %u bytes", rel, MAX_FILE_READ);
  buf = slurp_fd (fd, MAX_FILE_READ, &len);
  reply_raw (ctx, buf, len, "application/octet-stream");
}

static void
h_files_put (struct esbx_gateway_ctx *ctx)
{
  _cleanup_close_ int root = -1, dir = -1, fd = -1;
  _cleanup_free_ char *rel = NULL, *base = NULL;
  const char *mode_s = query (ctx, "mode");
  esbx_error_t err = NULL;
  unsigned long mode = 0644;
  char *end;
  json_t *o;

  if (mode_s)
    {
      mode = strtoul (mode_s, &end, 8);
      if (*mode_s == '\0' || *end || mode > 0777)
        return esbx_gateway_reply_error (ctx, MHD_HTTP_BAD_REQUEST, ESBX_EXIT_USAGE,
                                         "query parameter `mode` must be octal permission bits (no "
                                         "setuid, setgid or sticky)");
    }
  if (clean_request_path (ctx, false, &rel) < 0 || (root = open_session_root (ctx)) < 0)
    return;
  dir = esbx_open_parent_beneath (root, rel, &base, &err);
  if (dir < 0)
    return esbx_gateway_reply_err (ctx, &err);
  /* O_NOFOLLOW: writing through a symlink planted in the session could land
     outside it.  */
  fd = openat (dir, base, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK,
               (mode_t)mode);
  if (fd < 0)
    return esbx_gateway_reply_error (
        ctx, errno == ELOOP ? MHD_HTTP_BAD_REQUEST : MHD_HTTP_INTERNAL_SERVER_ERROR,
        ESBX_EXIT_ERROR, "write `%s`: %s", rel,
        errno == ELOOP ? "is a symlink; refusing to follow it" : strerror (errno));
  {
    struct stat st;
    if (fstat (fd, &st) < 0 || !S_ISREG (st.st_mode))
      return esbx_gateway_reply_error (ctx, MHD_HTTP_BAD_REQUEST, ESBX_EXIT_ERROR,
                                       "write `%s`: not a regular file", rel);
  }
  if (esbx_write_all (fd, ctx->body, ctx->len) < 0 || fchmod (fd, (mode_t)mode) < 0)
    return esbx_gateway_reply_error (ctx, MHD_HTTP_INTERNAL_SERVER_ERROR, ESBX_EXIT_ERROR,
                                     "write `%s`: %s", rel, strerror (errno));
  o = json_new (JSON_OBJECT);
  json_set_string (o, "path", rel);
  json_set_int (o, "size", (int64_t)ctx->len);
  esbx_gateway_reply_json (ctx, MHD_HTTP_OK, o);
}

/* ---- export and maintenance --------------------------------------------- */

static void
h_export (struct esbx_gateway_ctx *ctx)
{
  const char *ref = query (ctx, "ref"), *format = query (ctx, "format");
  enum esbx_export_format fmt = ESBX_EXPORT_TAR;
  _cleanup_free_ char *rand = esbx_random_hex (8), *file = NULL;
  esbx_error_t err = NULL;
  struct stat st;
  int fd;

  if (ref == NULL)
    return esbx_gateway_reply_error (ctx, MHD_HTTP_BAD_REQUEST, ESBX_EXIT_USAGE,
                                     "query parameter `ref` is required");
  if (format && strcmp (format, "oci-layer") == 0)
    fmt = ESBX_EXPORT_OCI_LAYER;
  else if (format && strcmp (format, "tar") != 0)
    return esbx_gateway_reply_error (ctx, MHD_HTTP_BAD_REQUEST, ESBX_EXIT_USAGE,
                                     "unknown format `%s`: expected tar or oci-layer", format);
  file = xasprintf ("%s/tmp/export-%s.tar", ctx->store->root, rand);
  if (esbx_export (ctx->store, ref, file, fmt, &err) < 0)
    return esbx_gateway_reply_err (ctx, &err);
  fd = open (file, O_RDONLY | O_CLOEXEC);
  unlink (file);
  if (fd < 0 || fstat (fd, &st) < 0)
    {
      if (fd >= 0)
        close (fd);
      return esbx_gateway_reply_error (ctx, MHD_HTTP_INTERNAL_SERVER_ERROR, ESBX_EXIT_ERROR,
                                       "export: %s", strerror (errno));
    }
  /* MHD sends the file and closes FD.  */
  ctx->stream = MHD_create_response_from_fd ((uint64_t)st.st_size, fd);
  if (ctx->stream == NULL)
    {
      close (fd);
      return esbx_gateway_reply_error (ctx, MHD_HTTP_INTERNAL_SERVER_ERROR, ESBX_EXIT_ERROR,
                                       "export: cannot send the archive");
    }
  MHD_add_response_header (ctx->stream, MHD_HTTP_HEADER_CONTENT_TYPE, "application/x-tar");
  ctx->status = MHD_HTTP_OK;
}

static void
reply_report (struct esbx_gateway_ctx *ctx, bool fsck)
{
  _cleanup_free_ char *text = NULL;
  esbx_error_t err = NULL;
  size_t len = 0;
  FILE *f = open_memstream (&text, &len);
  int r;

  if (f == NULL)
    return esbx_gateway_reply_error (ctx, MHD_HTTP_INTERNAL_SERVER_ERROR, ESBX_EXIT_ERROR,
                                     "open_memstream: %s", strerror (errno));
  r = fsck ? esbx_fsck (ctx->store, ctx->project, f, &err) : esbx_sandbox_gc (ctx->store, f, &err);
  fclose (f);
  if (r < 0)
    return esbx_gateway_reply_err (ctx, &err);
  reply_string (ctx, MHD_HTTP_OK, "report", text ? text : "");
}

static void
h_fsck (struct esbx_gateway_ctx *ctx)
{
  reply_report (ctx, true);
}

static void
h_gc (struct esbx_gateway_ctx *ctx)
{
  reply_report (ctx, false);
}

#define M ESBX_SCOPE_MANAGE
#define R ESBX_SCOPE_RUNTIME
#define O ESBX_SCOPE_OBSERVE

const struct esbx_gateway_route esbx_gateway_routes[] = {
  { "GET", "/v1/whoami", "whoami", 0, GATEWAY_TARGET_TOKEN, false, h_whoami, NULL },
  { "GET", "/v1/projects", "project_list", O, GATEWAY_TARGET_LIST, false, h_projects_list, NULL },
  { "POST", "/v1/projects", "project_create", M, GATEWAY_TARGET_BODY_NAME, true, h_project_create,
    NULL },
  { "DELETE", "/v1/projects/*", "project_rm", M, GATEWAY_TARGET_PROJECT, false, h_project_rm,
    NULL },
  { "POST", "/v1/projects/*/squash", "project_squash", M, GATEWAY_TARGET_PROJECT, false,
    h_project_squash, NULL },
  { "GET", "/v1/projects/*/log", "project_log", O, GATEWAY_TARGET_PROJECT, false, h_project_log,
    NULL },
  { "GET", "/v1/projects/*/blame", "project_blame", O, GATEWAY_TARGET_PROJECT, false,
    h_project_blame, NULL },
  { "GET", "/v1/sessions", "session_list", O, GATEWAY_TARGET_LIST, false, h_sessions_list, NULL },
  { "POST", "/v1/sessions", "session_create", M, GATEWAY_TARGET_BODY_PROJECT, true,
    h_session_create, NULL },
  { "GET", "/v1/sessions/*", "session_inspect", O, GATEWAY_TARGET_SESSION, false, h_session_inspect,
    NULL },
  { "DELETE", "/v1/sessions/*", "session_discard", M, GATEWAY_TARGET_SESSION, false,
    h_session_discard, NULL },
  { "GET", "/v1/sessions/*/path", "session_path", O, GATEWAY_TARGET_SESSION, false, h_session_path,
    NULL },
  { "GET", "/v1/sessions/*/diff", "session_diff", O, GATEWAY_TARGET_SESSION, false, h_session_diff,
    "patch" },
  { "GET", "/v1/sessions/*/events", "session_events", O, GATEWAY_TARGET_SESSION, false,
    h_session_events, NULL },
  { "GET", "/v1/sessions/*/ps", "session_ps", O, GATEWAY_TARGET_SESSION, false, h_session_ps,
    NULL },
  { "POST", "/v1/sessions/*/publish", "session_publish", M, GATEWAY_TARGET_SESSION, true,
    h_session_publish, NULL },
  { "POST", "/v1/sessions/*/rebase", "session_rebase", M, GATEWAY_TARGET_SESSION, true,
    h_session_rebase, NULL },
  { "POST", "/v1/sessions/*/exec", "session_exec", R, GATEWAY_TARGET_SESSION, true,
    esbx_gateway_session_exec, NULL },
  { "GET", "/v1/sessions/*/files", "file_read", R, GATEWAY_TARGET_SESSION, false, h_files_get,
    NULL },
  { "PUT", "/v1/sessions/*/files", "file_write", R, GATEWAY_TARGET_SESSION, false, h_files_put,
    NULL },
  { "GET", "/v1/export", "export", M, GATEWAY_TARGET_QUERY_REF, false, h_export, NULL },
  { "POST", "/v1/fsck", "fsck", M, GATEWAY_TARGET_QUERY_PROJECT, false, h_fsck, NULL },
  { "POST", "/v1/gc", "gc", M, GATEWAY_TARGET_STORE, false, h_gc, NULL },
};
const size_t esbx_gateway_n_routes = ARRAY_SIZE (esbx_gateway_routes);
