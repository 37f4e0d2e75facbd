/* Bounded lifetimes (README, "Lifetimes"): a session may carry a time to
 * live from its creation ("ttl") and an idle time to live ("idle_ttl": no
 * exec, no Docker mount, no file operation for that long), with the
 * project's defaults in ROOT/projects/P/lifetime.json.  Use is the mtime
 * of ROOT/sessions/S/used, touched by the front ends: one utimensat, no
 * write to session.json on the hot path.  Who retires an expired session
 * (esbxd, or `esbx gc`) is the shim's business (sandbox_expire.c).  */
#include "internal.h"
#include "fs.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define USED_FILE   "used"
#define EXPIRY_FILE "expiry.json"

static int
check_on_expiry (const char *v, esbx_error_t *err)
{
  if (v && strcmp (v, "discard") != 0 && strcmp (v, "snapshot") != 0)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "invalid --on-expiry `%s`: expected discard or snapshot", v);
  return 0;
}

int
esbx_lifetime_check (const struct esbx_session_opts *o, esbx_error_t *err)
{
  if (o->ttl < 0 || o->idle_ttl < 0)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "a time to live cannot be negative");
  return check_on_expiry (o->on_expiry, err);
}

static json_t *
project_defaults (esbx_store_t *store, const char *project, esbx_error_t *err)
{
  _cleanup_free_ char *rel = esbx_project_file (project, "lifetime.json");

  if (!esbx_exists_at (store->rootfd, rel))
    return json_new (JSON_OBJECT);
  return json_parse_file_at (store->rootfd, rel, err);
}

int
esbx_lifetime_record (esbx_store_t *store, const char *project, const struct esbx_session_opts *o,
                      json_t *record, esbx_error_t *err)
{
  _cleanup_json_ json_t *d = project_defaults (store, project, err);
  int64_t ttl = o->ttl, idle = o->idle_ttl;
  const char *on_expiry = o->on_expiry;

  if (d == NULL)
    return esbx_error_wrap (err, "project `%s`: lifetime defaults", project);
  if (ttl == 0)
    json_get_int (d, "ttl", &ttl);
  if (idle == 0)
    json_get_int (d, "idle_ttl", &idle);
  if (on_expiry == NULL)
    on_expiry = json_get_string (d, "on_expiry");
  if (ttl > 0)
    json_set_int (record, "ttl", ttl);
  if (idle > 0)
    json_set_int (record, "idle_ttl", idle);
  if ((ttl > 0 || idle > 0) && on_expiry)
    json_set_string (record, "on_expiry", on_expiry);
  return 0;
}

int
esbx_lifetime_set_defaults (esbx_store_t *store, const char *project, int64_t ttl, int64_t idle_ttl,
                            const char *on_expiry, esbx_error_t *err)
{
  _cleanup_free_ char *dir = esbx_project_rel (project);
  _cleanup_json_ json_t *j = json_new (JSON_OBJECT);
  _cleanup_free_ char *text = NULL;
  _cleanup_close_ int dfd = -1;
  size_t len;

  if (esbx_check_name ("project", project, err) < 0 || check_on_expiry (on_expiry, err) < 0)
    return -1;
  if (ttl < 0 || idle_ttl < 0)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "a time to live cannot be negative");
  if (!esbx_project_exists (store, project))
    return esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0, "project `%s` does not exist",
                                 project);
  if (ttl > 0)
    json_set_int (j, "ttl", ttl);
  if (idle_ttl > 0)
    json_set_int (j, "idle_ttl", idle_ttl);
  if (on_expiry)
    json_set_string (j, "on_expiry", on_expiry);
  dfd = esbx_open_dir_at (store->rootfd, dir, err);
  if (dfd < 0)
    return -1;
  text = json_serialize (j, true, &len);
  return esbx_write_file_atomic_at (dfd, "lifetime.json", text, len, 0644, err);
}

json_t *
esbx_lifetime_defaults (esbx_store_t *store, const char *project, esbx_error_t *err)
{
  if (esbx_project_check (store, project, err) < 0)
    return NULL;
  return project_defaults (store, project, err);
}

void
esbx_session_touch (esbx_store_t *store, const char *name)
{
  _cleanup_free_ char *rel = NULL;
  int fd;

  if (!esbx_name_valid (name))
    return;
  rel = esbx_session_file (name, "%s", USED_FILE);
  if (utimensat (store->rootfd, rel, NULL, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT)
    return;
  fd = TEMP_FAILURE_RETRY (
      openat (store->rootfd, rel, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (fd >= 0)
    close (fd);
}

/* Seconds since the epoch of an RFC 3339 UTC time ("2024-01-02T03:04:05Z",
   fractions ignored); 0 when it does not parse.  */
static int64_t
parse_time (const char *s)
{
  struct tm tm = { 0 };
  const char *end;

  if (s == NULL || (end = strptime (s, "%Y-%m-%dT%H:%M:%S", &tm)) == NULL)
    return 0;
  return (int64_t)timegm (&tm);
}

int64_t
esbx_session_last_used (esbx_store_t *store, const struct esbx_session *s)
{
  _cleanup_free_ char *rel = esbx_session_file (s->name, "%s", USED_FILE);
  struct stat st;

  if (fstatat (store->rootfd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0)
    return (int64_t)st.st_mtim.tv_sec;
  return parse_time (s->created);
}

int64_t
esbx_session_expires (esbx_store_t *store, const struct esbx_session *s, const char **why)
{
  int64_t ttl = 0, idle = 0, at = 0, t;

  *why = NULL;
  json_get_int (s->record, "ttl", &ttl);
  json_get_int (s->record, "idle_ttl", &idle);
  if (ttl > 0)
    {
      at = parse_time (s->created) + ttl;
      *why = "ttl";
    }
  if (idle > 0)
    {
      t = esbx_session_last_used (store, s) + idle;
      if (at == 0 || t < at)
        {
          at = t;
          *why = "idle-ttl";
        }
    }
  return at;
}

void
esbx_expiry_state_load (esbx_store_t *store, const char *name, struct esbx_expiry_state *st)
{
  _cleanup_free_ char *rel = NULL;
  _cleanup_json_ json_t *j = NULL;
  const char *e;

  memset (st, 0, sizeof *st);
  if (!esbx_name_valid (name))
    return;
  rel = esbx_session_file (name, "%s", EXPIRY_FILE);
  if (!esbx_exists_at (store->rootfd, rel)
      || (j = json_parse_file_at (store->rootfd, rel, NULL)) == NULL)
    return;
  json_get_int (j, "failures", &st->failures);
  json_get_int (j, "next_ms", &st->next_ms);
  if ((e = json_get_string (j, "error")) != NULL)
    st->error = xstrdup (e);
}

int
esbx_expiry_state_save (esbx_store_t *store, const char *name, const struct esbx_expiry_state *st,
                        esbx_error_t *err)
{
  _cleanup_free_ char *dir = esbx_session_rel (name);
  _cleanup_json_ json_t *j = json_new (JSON_OBJECT);
  _cleanup_free_ char *text = NULL;
  _cleanup_close_ int dfd = -1;
  size_t len;

  if (esbx_check_name ("session", name, err) < 0)
    return -1;
  json_set_int (j, "failures", st->failures);
  json_set_int (j, "next_ms", st->next_ms);
  if (st->error)
    json_set_string (j, "error", st->error);
  dfd = esbx_open_dir_at (store->rootfd, dir, err);
  if (dfd < 0)
    return -1;
  text = json_serialize (j, true, &len);
  /* Losing it in a crash only resets the count.  */
  return esbx_replace_file_at (dfd, EXPIRY_FILE, text, len, 0644, err);
}

void
esbx_expiry_state_clear (struct esbx_expiry_state *st)
{
  free (st->error);
  st->error = NULL;
}

json_t *
esbx_session_lifetime_json (esbx_store_t *store, const struct esbx_session *s)
{
  json_t *o = json_new (JSON_OBJECT);
  int64_t now = (int64_t)time (NULL), created = parse_time (s->created), v;
  const char *why;
  int64_t at = esbx_session_expires (store, s, &why);

  json_set_int (o, "age", created ? now - created : 0);
  json_set_int (o, "idle", now - esbx_session_last_used (store, s));
  if (json_get_int (s->record, "ttl", &v))
    json_set_int (o, "ttl", v);
  if (json_get_int (s->record, "idle_ttl", &v))
    json_set_int (o, "idle_ttl", v);
  if (at)
    {
      struct timespec ts = { .tv_sec = (time_t)at };
      _cleanup_free_ char *when = esbx_rfc3339 (&ts);
      json_set_string (o, "expires", when);
      json_set_int (o, "expires_in", at - now);
      json_set_string (o, "expires_by", why);
      json_set_string (o, "on_expiry",
                       json_get_string (s->record, "on_expiry")
                           ? json_get_string (s->record, "on_expiry")
                           : "discard");
    }
  {
    struct esbx_expiry_state st;

    esbx_expiry_state_load (store, s->name, &st);
    if (st.failures > 0)
      {
        json_set_int (o, "expiry_failures", st.failures);
        if (st.error)
          json_set_string (o, "expiry_error", st.error);
      }
    esbx_expiry_state_clear (&st);
  }
  return o;
}
