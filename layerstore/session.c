/* Sessions: a project's base plus a private upper directory, mounted as one
   overlay under ROOT/sessions/S/merged.  */
#include "internal.h"
#include "fs.h"
#include "hash.h"
#include "log.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>

char *
esbx_session_dir (esbx_store_t *store, const char *name)
{
  _cleanup_free_ char *rel = esbx_session_rel (name);

  return esbx_store_abs (store, rel);
}

char *
esbx_session_merged (esbx_store_t *store, const char *name)
{
  _cleanup_free_ char *rel = esbx_session_file (name, "merged");

  return esbx_store_abs (store, rel);
}

char *
esbx_session_upper (esbx_store_t *store, const char *name)
{
  _cleanup_free_ char *rel = esbx_session_file (name, "upper");

  return esbx_store_abs (store, rel);
}

int
esbx_session_open_dir (esbx_store_t *store, const char *name, esbx_error_t *err)
{
  _cleanup_free_ char *rel = NULL;
  int fd;

  if (esbx_check_name ("session", name, err) < 0)
    return -1;
  rel = esbx_session_rel (name);
  fd = TEMP_FAILURE_RETRY (
      openat (store->rootfd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
  if (fd < 0 && errno == ENOENT)
    return esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0, "session `%s` does not exist", name);
  if (fd < 0)
    return esbx_make_error (err, errno, "open `%s/%s`", store->root, rel);
  return fd;
}

bool
esbx_session_exists (esbx_store_t *store, const char *name)
{
  _cleanup_free_ char *path = NULL;

  if (!esbx_name_valid (name))
    return false;
  path = esbx_session_file (name, "session.json");
  return esbx_exists_at (store->rootfd, path);
}

void
esbx_session_free (struct esbx_session *s)
{
  if (s == NULL)
    return;
  free (s->id);
  free (s->name);
  free (s->project);
  free (s->base);
  {
    char **p;
    for (p = s->published; p && *p; p++)
      free (*p);
    free (s->published);
  }
  free (s->network);
  free (s->workspace);
  free (s->created);
  free (s->cpus);
  free (s->rootfs);
  free (s->snapshot);
  cleanup_strvp (&s->frozen);
  if (s->view)
    {
      esbx_error_t ignored = NULL;
      if (esbx_rm_rf_at (AT_FDCWD, s->view, &ignored) < 0)
        esbx_error_free (&ignored);
      close (s->view_lock);
      free (s->view);
    }
  json_free (s->labels);
  json_free (s->env);
  json_free (s->record);
  free (s);
}

/* The session's id.  A record written before sessions had ids gets one
   derived from its name, project and creation time: stable for that
   session, and never the id of a session created since, which stores a
   random one.  */
static char *
record_id (const json_t *j, const char *name)
{
  const char *id = json_get_string (j, "id"), *project = json_get_string (j, "project");
  const char *created = json_get_string (j, "created");
  _cleanup_free_ char *seed = NULL;
  char hash[ESBX_SHA256_HEX_LEN + 1];

  if (id)
    return xstrdup (id);
  seed = xasprintf ("%s\n%s\n%s", name, project, created ? created : "");
  esbx_sha256_buf (seed, strlen (seed), hash);
  return xstrndup (hash, ESBX_SESSION_ID_BYTES * 2);
}

/* session.json at PATH beneath DIRFD, parsed.  Only esbx writes it, in a
   directory no session reaches (a session's own files are in upper/): one
   open that neither follows a symlink nor waits on a FIFO, and a check
   that it is a regular file, not the O_PATH and /proc reopen of files a
   session may have made.  Every walk of the sessions reads each one.  */
static json_t *
read_record (int dirfd, const char *path, const char *name, esbx_error_t *err)
{
  _cleanup_close_ int fd
      = TEMP_FAILURE_RETRY (openat (dirfd, path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  _cleanup_free_ char *buf = NULL;
  size_t len = 0, cap;
  struct stat st;
  json_t *j;

  if (fd < 0 && (errno == ENOENT || errno == ENOTDIR))
    return esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0, "session `%s` does not exist", name),
           NULL;
  if (fd < 0 || fstat (fd, &st) < 0)
    return esbx_make_error (err, errno, "session `%s`: open `%s`", name, path), NULL;
  if (!S_ISREG (st.st_mode) || (size_t)st.st_size > JSON_MAX_DOCUMENT)
    return esbx_make_error (err, EINVAL, "session `%s`: `%s` is not a record", name, path), NULL;
  cap = (size_t)st.st_size + 1;
  buf = xmalloc (cap + 1);
  for (;;)
    {
      ssize_t n = TEMP_FAILURE_RETRY (read (fd, buf + len, cap - len));
      if (n < 0)
        return esbx_make_error (err, errno, "session `%s`: read `%s`", name, path), NULL;
      if (n == 0)
        break;
      len += (size_t)n;
      /* A record is replaced whole, never grown: a short read of it is
         its end (one read(2) less for each of thousands in a walk).  */
      if (len < cap && len == (size_t)st.st_size)
        break;
      if (len == cap)
        {
          if (cap > JSON_MAX_DOCUMENT)
            return esbx_make_error (err, EFBIG, "session `%s`: `%s`", name, path), NULL;
          cap *= 2;
          buf = xrealloc (buf, cap + 1);
        }
    }
  buf[len] = '\0';
  j = json_parse (buf, len, err);
  if (j == NULL)
    esbx_error_wrap (err, "session `%s`", name);
  return j;
}

/* The record of session NAME, session.json at PATH beneath DIRFD.  */
static int
load_record (int dirfd, const char *path, const char *name, struct esbx_session **out,
             esbx_error_t *err)
{
  struct esbx_session *s;
  struct strv pub = { 0 };
  json_t *j, *arr, *item;
  int64_t v;
  size_t i;

  j = read_record (dirfd, path, name, err);
  if (j == NULL)
    return -1;
  if (json_get_string (j, "project") == NULL || json_get_string (j, "base") == NULL)
    {
      json_free (j);
      return esbx_make_error (err, 0, "session `%s`: record without project or base", name);
    }
  s = xmalloc0 (sizeof *s);
  s->record = j;
  s->id = record_id (j, name);
  s->name = xstrdup (name);
  s->project = xstrdup (json_get_string (j, "project"));
  s->base = xstrdup (json_get_string (j, "base"));
  s->network = xstrdup (json_get_string (j, "network") ? json_get_string (j, "network") : "none");
  s->workspace = xstrdup (json_get_string (j, "workspace") ? json_get_string (j, "workspace")
                                                           : "/workspace");
  s->created = xstrdup (json_get_string (j, "created"));
  s->cpus = xstrdup (json_get_string (j, "cpus"));
  s->rootfs = xstrdup (json_get_string (j, "rootfs"));
  s->snapshot = xstrdup (json_get_string (j, "snapshot"));
  if (s->snapshot && !esbx_name_valid (s->snapshot))
    {
      esbx_session_free (s);
      return esbx_make_error (err, 0, "session `%s`: record with a malformed snapshot", name);
    }
  if (s->rootfs && !esbx_rootfs_valid_key (s->rootfs))
    {
      esbx_session_free (s);
      return esbx_make_error (err, 0, "session `%s`: record with a malformed rootfs", name);
    }
  if (json_get_int (j, "memory", &v))
    s->memory = (uint64_t)v;
  if (json_get_int (j, "pids", &v))
    s->pids = (uint64_t)v;
  if (json_get_int (j, "tmpfs_size", &v) && v > 0)
    s->tmpfs_size = (uint64_t)v;
  if (json_get_int (j, "shm_size", &v) && v > 0)
    s->shm_size = (uint64_t)v;
  if (json_get_int (j, "disk", &v) && v > 0)
    s->disk = v;
  arr = json_get (j, "published");
  if (arr && arr->type == JSON_ARRAY)
    json_array_foreach (arr, i, item)
      if (item->type == JSON_STRING)
        strv_push (&pub, xstrdup (item->text));
  s->published = pub.v ? pub.v : xmalloc0 (sizeof (char *));
  if (esbx_frozen_ids (j, &s->frozen) < 0)
    {
      esbx_session_free (s);
      return esbx_make_error (err, 0, "session `%s`: record with a malformed frozen layer", name);
    }
  s->labels = esbx_labels_copy (json_get (j, "labels"));
  s->env = esbx_session_env_copy (json_get (j, "env"));
  *out = s;
  return 0;
}

int
esbx_session_load (esbx_store_t *store, const char *name, struct esbx_session **out,
                   esbx_error_t *err)
{
  _cleanup_free_ char *path = NULL;

  if (esbx_check_name ("session", name, err) < 0)
    return -1;
  path = esbx_session_file (name, "session.json");
  return load_record (store->rootfd, path, name, out, err);
}

int
esbx_session_load_at (int dfd, const char *name, struct esbx_session **out, esbx_error_t *err)
{
  if (esbx_check_name ("session", name, err) < 0)
    return -1;
  return load_record (dfd, "session.json", name, out, err);
}

/* Write session.json of an existing session atomically.  */
int
esbx_session_save (esbx_store_t *store, const char *name, const json_t *record, esbx_error_t *err)
{
  _cleanup_free_ char *dir = esbx_session_rel (name);
  _cleanup_free_ char *text = NULL;
  _cleanup_close_ int dfd = -1;
  size_t len;

  dfd = esbx_open_dir_at (store->rootfd, dir, err);
  if (dfd < 0)
    return esbx_error_wrap (err, "session `%s`", name);
  text = json_serialize (record, true, &len);
  if (esbx_write_file_atomic_at (dfd, "session.json", text, len, 0644, err) < 0)
    return esbx_error_wrap (err, "session `%s`", name);
  return 0;
}

int
esbx_session_lock (esbx_store_t *store, const char *name, esbx_error_t *err)
{
  _cleanup_free_ char *path = NULL;
  int fd;

  if (esbx_check_name ("session", name, err) < 0)
    return -1;
  path = esbx_session_file (name, "lock");
  fd = esbx_lock_at (store->rootfd, path, true, true, err);
  if (fd < 0)
    return esbx_error_wrap (err, "session `%s`", name);
  return fd;
}

int
esbx_sessions_open (esbx_store_t *store, const char *project, struct esbx_sessions *it,
                    esbx_error_t *err)
{
  memset (it, 0, sizeof *it);
  it->store = store;
  it->project = project ? xstrdup (project) : NULL;
  it->names = esbx_list_dir_at (store->rootfd, "sessions", err);
  return it->names ? 0 : -1;
}

struct esbx_session *
esbx_sessions_next (struct esbx_sessions *it)
{
  esbx_session_free (it->cur);
  it->cur = NULL;
  while (it->names && it->names[it->i])
    {
      const char *name = it->names[it->i++];
      esbx_error_t ignored = NULL;

      /* Discarded while the walk goes on, or not a session: skipped (the
         load says so: NOT_FOUND).  */
      if (esbx_session_load (it->store, name, &it->cur, &ignored) < 0)
        {
          bool gone = ignored && ignored->kind == ESBX_ERR_NOT_FOUND;
          esbx_error_free (&ignored);
          if (!gone && esbx_session_exists (it->store, name))
            it->unreadable++;
          continue;
        }
      if (it->project == NULL || strcmp (it->cur->project, it->project) == 0)
        return it->cur;
      esbx_session_free (it->cur);
      it->cur = NULL;
    }
  return NULL;
}

void
esbx_sessions_close (struct esbx_sessions *it)
{
  esbx_session_free (it->cur);
  cleanup_strvp (&it->names);
  free (it->project);
  memset (it, 0, sizeof *it);
}

char **
esbx_session_list (esbx_store_t *store, const char *project, esbx_error_t *err)
{
  _cleanup_sessions_ struct esbx_sessions it = { 0 };
  struct esbx_session *s;
  struct strv out = { 0 };

  /* Without a project, the names alone: no record is read.  */
  if (project == NULL)
    {
      _cleanup_strv_ char **names = esbx_list_dir_at (store->rootfd, "sessions", err);
      size_t i;

      if (names == NULL)
        return NULL;
      for (i = 0; names[i]; i++)
        if (esbx_session_exists (store, names[i]))
          strv_push (&out, xstrdup (names[i]));
      return out.v ? out.v : xmalloc0 (sizeof (char *));
    }
  if (esbx_sessions_open (store, project, &it, err) < 0)
    return NULL;
  while ((s = esbx_sessions_next (&it)))
    strv_push (&out, xstrdup (s->name));
  return out.v ? out.v : xmalloc0 (sizeof (char *));
}

/* NAME in ARR (strings)?  */
static bool
has_name (const json_t *arr, const char *name)
{
  const json_t *v;
  size_t i;

  json_array_foreach (arr, i, v)
    if (v->type == JSON_STRING && strcmp (v->text, name) == 0)
      return true;
  return false;
}

json_t *
esbx_session_secret_names (const struct esbx_session *s)
{
  const json_t *attached = json_get (s->record, "secrets"), *kept, *a;
  json_t *names = json_new (JSON_ARRAY);
  size_t i;

  json_array_foreach (attached, i, a)
    {
      const char *name = a->type == JSON_OBJECT ? json_get_string (a, "name") : NULL;
      if (name && !has_name (names, name))
        json_append (names, json_new_string (name));
    }
  kept = json_get (s->record, "kept_secrets");
  json_array_foreach (kept, i, a)
    if (a->type == JSON_STRING && esbx_name_valid (a->text) && !has_name (names, a->text))
      json_append (names, json_new_string (a->text));
  return names;
}
