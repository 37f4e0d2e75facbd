#include "events.h"
#include "fs.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>

#define EVENTS_FILE "events.jsonl"
#define EVENTS_LOCK "events.lock"
#define MAX_LINE    (1024 * 1024)

/* Append TYPE to the log of SESSION, whose directory is DFD.  */
static int
append_at (int dfd, const char *session, const char *type, json_t *fields, esbx_error_t *err)
{
  _cleanup_json_ json_t *owned = fields;
  _cleanup_json_ json_t *ev = json_new (JSON_OBJECT);
  _cleanup_free_ char *now = esbx_rfc3339_now ();
  _cleanup_free_ char *line = NULL;
  _cleanup_close_ int lock = -1;
  _cleanup_close_ int fd = -1;
  size_t len, i;

  json_set_string (ev, "time", now);
  json_set_string (ev, "type", type);
  if (owned && owned->type == JSON_OBJECT)
    for (i = 0; i < json_len (owned); i++)
      json_set (ev, json_key_at (owned, i), json_take_at (owned, i));
  line = json_serialize (ev, false, &len);
  line = xrealloc (line, len + 2);
  line[len++] = '\n';
  line[len] = '\0';

  lock = esbx_lock_at (dfd, EVENTS_LOCK, true, true, err);
  if (lock < 0)
    return -1;
  fd = TEMP_FAILURE_RETRY (
      openat (dfd, EVENTS_FILE, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (fd < 0)
    return esbx_make_error (err, errno, "open `%s` of session `%s`", EVENTS_FILE, session);
  if (esbx_write_all (fd, line, len) < 0)
    return esbx_make_error (err, errno, "write `%s` of session `%s`", EVENTS_FILE, session);
  return 0;
}

int
esbx_event_append (esbx_store_t *store, const char *session, const char *type, json_t *fields,
                   esbx_error_t *err)
{
  _cleanup_close_ int dfd = -1;

  dfd = esbx_session_open_dir (store, session, err);
  if (dfd < 0)
    {
      json_free (fields);
      return -1;
    }
  return append_at (dfd, session, type, fields, err);
}

int
esbx_event_append_to (const struct esbx_sandbox_session *ss, const char *type, json_t *fields,
                      esbx_error_t *err)
{
  return append_at (ss->dfd, ss->name, type, fields, err);
}

int
esbx_events_read (esbx_store_t *store, const char *session, off_t *offset, esbx_event_fn fn,
                  void *data, esbx_error_t *err)
{
  _cleanup_close_ int dfd = -1;
  _cleanup_file_ FILE *f = NULL;
  _cleanup_free_ char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  int fd;

  dfd = esbx_session_open_dir (store, session, err);
  if (dfd < 0)
    return -1;
  fd = TEMP_FAILURE_RETRY (openat (dfd, EVENTS_FILE, O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (fd < 0 && errno == ENOENT)
    return 0;
  if (fd < 0)
    return esbx_make_error (err, errno, "open `%s` of session `%s`", EVENTS_FILE, session);
  f = fdopen (fd, "r");
  if (f == NULL)
    {
      esbx_make_error (err, errno, "fdopen `%s`", EVENTS_FILE);
      close (fd);
      return -1;
    }
  if (fseeko (f, *offset, SEEK_SET) < 0)
    return esbx_make_error (err, errno, "seek `%s`", EVENTS_FILE);
  while ((n = getline (&line, &cap, f)) > 0)
    {
      _cleanup_json_ json_t *ev = NULL;
      esbx_error_t perr = NULL;

      /* A line still being written has no newline yet: read it next time.  */
      if (line[n - 1] != '\n')
        break;
      *offset += n;
      if (n > MAX_LINE)
        continue;
      ev = json_parse (line, (size_t)n, &perr);
      if (ev == NULL)
        {
          esbx_error_free (&perr);
          continue;
        }
      if (fn (ev, data) < 0)
        break;
    }
  return 0;
}
