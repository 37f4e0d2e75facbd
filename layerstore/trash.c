/* The trash: a discarded session that still had unpublished changes is
   moved whole (upper/ and session.json, or the image of its own disk,
   unmounted; a rename within the store's filesystem) to ROOT/trash/ENTRY
   instead of being deleted, and kept there for the trash's keeping time.
   ENTRY/trash.json says what it was and until when it is kept; gc purges
   entries past that time.  Restore mounts a disk again.  */
#include "internal.h"
#include "fs.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TRASH_META "trash.json"
/* Entries of one session deleted within the same second get a suffix.  */
#define TRASH_MAX_SUFFIX 100

/* "NAME.20250101T120000Z", NAME cut so that the entry, with a suffix,
   still follows the name rule (esbx_name_valid) and can be named in a
   gateway path.  */
#define TRASH_NAME_MAX 107

static int
no_entry (esbx_error_t *err, const char *entry)
{
  _cleanup_free_ char *shown = esbx_quote_path (entry ? entry : "");
  return esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0, "trash entry `%s` does not exist",
                               shown);
}

/* 24h, 1d, 90m, 45s: the largest unit that divides SECONDS.  */
char *
esbx_trash_ttl_string (int64_t seconds)
{
  static const struct
  {
    int64_t n;
    char unit;
  } units[] = { { 86400, 'd' }, { 3600, 'h' }, { 60, 'm' } };
  size_t i;

  for (i = 0; seconds > 0 && i < ARRAY_SIZE (units); i++)
    if (seconds % units[i].n == 0)
      return xasprintf ("%" PRId64 "%c", seconds / units[i].n, units[i].unit);
  return xasprintf ("%" PRId64 "s", seconds);
}

int
esbx_trash_ttl (esbx_store_t *store, int64_t *seconds, esbx_error_t *err)
{
  const char *env = getenv ("ESBX_TRASH_TTL");
  _cleanup_free_ char *text = NULL;
  size_t len;
  char *nl;

  if (env && env[0])
    {
      /* Not a usage error of the verb at hand: the environment's.  */
      if (esbx_parse_duration (env, seconds, NULL) < 0)
        return esbx_make_error (err, 0,
                                "ESBX_TRASH_TTL: invalid duration `%s`: expected e.g. 30s, 15m, "
                                "2h, 7d or 0",
                                env);
      return 0;
    }
  *seconds = ESBX_TRASH_DEFAULT_TTL;
  if (!esbx_exists_at (store->rootfd, "trash/ttl"))
    return 0;
  if (esbx_read_file_at (store->rootfd, "trash/ttl", 64, &text, &len, err) < 0)
    return esbx_error_wrap (err, "trash keeping time");
  if ((nl = strchr (text, '\n')) != NULL)
    *nl = '\0';
  if (esbx_parse_duration (text, seconds, NULL) < 0)
    return esbx_make_error (err, 0, "%s/trash/ttl: invalid duration `%s`", store->root, text);
  return 0;
}

static int
trash_dir (esbx_store_t *store, esbx_error_t *err)
{
  if (mkdirat (store->rootfd, "trash", 0700) < 0 && errno != EEXIST)
    return esbx_make_error (err, errno, "mkdir `%s/trash`", store->root);
  return 0;
}

int
esbx_trash_set_ttl (esbx_store_t *store, const char *duration, esbx_error_t *err)
{
  _cleanup_close_ int dfd = -1;
  _cleanup_free_ char *text = NULL;
  int64_t seconds;

  if (esbx_parse_duration (duration, &seconds, err) < 0)
    return -1;
  if (trash_dir (store, err) < 0)
    return -1;
  dfd = esbx_open_dir_at (store->rootfd, "trash", err);
  if (dfd < 0)
    return -1;
  text = xasprintf ("%s\n", duration);
  return esbx_write_file_atomic_at (dfd, "ttl", text, strlen (text), 0644, err);
}

int
esbx_trash_put (esbx_store_t *store, const struct esbx_session *s, const char *rel, int64_t changes,
                int64_t ttl, char **entry_out, char **expires_out, esbx_error_t *err)
{
  _cleanup_json_ json_t *meta = json_new (JSON_OBJECT);
  _cleanup_free_ char *text = NULL, *deleted = NULL, *expires = NULL, *stamp = NULL;
  _cleanup_free_ char *upper = xasprintf ("%s/upper", rel);
  _cleanup_close_ int dfd = -1;
  unsigned long long size = 0;
  esbx_error_t ignored = NULL;
  struct timespec now = { 0 }, until;
  struct tm tm;
  char buf[32];
  size_t len;
  int k;

  clock_gettime (CLOCK_REALTIME, &now);
  now.tv_nsec = 0;
  until = now;
  until.tv_sec += (time_t)ttl;
  deleted = esbx_rfc3339 (&now);
  expires = esbx_rfc3339 (&until);
  /* The size is what the entry holds on disk; a tree that cannot be
     walked whole still goes to the trash.  */
  if (esbx_du_at (store->rootfd, upper, &size, &ignored) < 0)
    esbx_error_free (&ignored);
  /* A session's own disk goes with it, unmounted: its image is what the
     entry holds.  */
  size += esbx_session_disk_allocated_at (store->rootfd, rel);
  json_set_string (meta, "session", s->name);
  json_set_string (meta, "project", s->project);
  json_set_string (meta, "base", s->base);
  json_set_int (meta, "changes", changes);
  json_set_int (meta, "size", (int64_t)size);
  json_set_string (meta, "deleted", deleted);
  json_set_string (meta, "expires", expires);
  json_set_int (meta, "expires_unix", (int64_t)until.tv_sec);
  text = json_serialize (meta, true, &len);
  dfd = esbx_open_dir_at (store->rootfd, rel, err);
  if (dfd < 0 || esbx_write_file_atomic_at (dfd, TRASH_META, text, len, 0644, err) < 0)
    return -1;
  if (trash_dir (store, err) < 0)
    return -1;
  gmtime_r (&now.tv_sec, &tm);
  strftime (buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  stamp = xasprintf ("%.*s.%s", TRASH_NAME_MAX, s->name, buf);
  for (k = 1; k <= TRASH_MAX_SUFFIX; k++)
    {
      _cleanup_free_ char *entry = k == 1 ? xstrdup (stamp) : xasprintf ("%s-%d", stamp, k);
      _cleanup_free_ char *dest = xasprintf ("trash/%s", entry);

      if (renameat2 (store->rootfd, rel, store->rootfd, dest, RENAME_NOREPLACE) == 0)
        {
          fsync (store->rootfd);
          *entry_out = steal_pointer (&entry);
          *expires_out = steal_pointer (&expires);
          return 0;
        }
      if (errno != EEXIST)
        return esbx_make_error (err, errno, "move `%s` to `%s/%s`", rel, store->root, dest);
    }
  return esbx_make_error (err, EEXIST, "move `%s` to the trash", rel);
}

/* trash.json of ENTRY.  */
static json_t *
entry_meta (esbx_store_t *store, const char *entry, esbx_error_t *err)
{
  _cleanup_free_ char *path = NULL;
  json_t *meta;

  if (!esbx_name_valid (entry))
    return no_entry (err, entry), NULL;
  path = xasprintf ("trash/%s/" TRASH_META, entry);
  if (!esbx_exists_at (store->rootfd, path))
    return no_entry (err, entry), NULL;
  meta = json_parse_file_at (store->rootfd, path, err);
  if (meta == NULL)
    esbx_error_wrap (err, "trash entry `%s`", entry);
  return meta;
}

static char **
entries (esbx_store_t *store, esbx_error_t *err)
{
  struct strv out = { 0 };
  _cleanup_strv_ char **names = NULL;
  size_t i;

  if (!esbx_exists_at (store->rootfd, "trash"))
    return xmalloc0 (sizeof (char *));
  names = esbx_list_dir_at (store->rootfd, "trash", err);
  if (names == NULL)
    return NULL;
  for (i = 0; names[i]; i++)
    {
      _cleanup_free_ char *path = xasprintf ("trash/%s/" TRASH_META, names[i]);
      if (esbx_name_valid (names[i]) && esbx_exists_at (store->rootfd, path))
        strv_push (&out, xstrdup (names[i]));
    }
  return out.v ? out.v : xmalloc0 (sizeof (char *));
}

int
esbx_trash_snapshot_users (esbx_store_t *store, const char *project, const char *snapshot,
                           struct strv *out, esbx_error_t *err)
{
  _cleanup_strv_ char **names = entries (store, err);
  size_t i;

  if (names == NULL)
    return -1;
  for (i = 0; names[i]; i++)
    {
      _cleanup_free_ char *path = xasprintf ("trash/%s/session.json", names[i]);
      _cleanup_json_ json_t *rec = NULL;
      esbx_error_t e = NULL;
      const char *p, *snap;

      rec = json_parse_file_at (store->rootfd, path, &e);
      esbx_error_free (&e);
      p = json_get_string (rec, "project");
      snap = json_get_string (rec, "snapshot");
      if (p && snap && strcmp (p, project) == 0 && strcmp (snap, snapshot) == 0)
        strv_push (out, xstrdup (names[i]));
    }
  return 0;
}

int
esbx_trash_frozen_users (esbx_store_t *store, const char *project, struct strv *ids, bool *unknown,
                         esbx_error_t *err)
{
  _cleanup_strv_ char **names = entries (store, err);
  size_t i;

  if (names == NULL)
    return -1;
  for (i = 0; names[i]; i++)
    {
      _cleanup_free_ char *path = xasprintf ("trash/%s/session.json", names[i]);
      _cleanup_json_ json_t *rec = NULL;
      _cleanup_strv_ char **frozen = NULL;
      esbx_error_t e = NULL;
      const char *p;

      rec = json_parse_file_at (store->rootfd, path, &e);
      esbx_error_free (&e);
      p = json_get_string (rec, "project");
      if (rec == NULL || p == NULL || esbx_frozen_ids (rec, &frozen) < 0)
        {
          *unknown = true;
          continue;
        }
      if (strcmp (p, project) != 0)
        continue;
      for (char **f = frozen; f && *f; f++)
        strv_push (ids, xstrdup (*f));
    }
  return 0;
}

json_t *
esbx_trash_list (esbx_store_t *store, esbx_error_t *err)
{
  _cleanup_strv_ char **names = entries (store, err);
  json_t *arr;
  size_t i;

  if (names == NULL)
    return NULL;
  arr = json_new (JSON_ARRAY);
  for (i = 0; names[i]; i++)
    {
      static const char *const strings[] = { "session", "project", "base", "deleted", "expires" };
      _cleanup_json_ json_t *meta = NULL;
      json_t *o = json_new (JSON_OBJECT);
      esbx_error_t e = NULL;
      int64_t v;
      size_t k;

      /* Purged or restored while we list: simply gone.  */
      meta = entry_meta (store, names[i], &e);
      if (meta == NULL)
        {
          esbx_error_free (&e);
          json_free (o);
          continue;
        }
      json_set_string (o, "entry", names[i]);
      for (k = 0; k < ARRAY_SIZE (strings); k++)
        json_set_string (o, strings[k], json_get_string (meta, strings[k]));
      json_set_int (o, "changes", json_get_int (meta, "changes", &v) ? v : -1);
      json_set_int (o, "size", json_get_int (meta, "size", &v) ? v : 0);
      json_append (arr, o);
    }
  return arr;
}

/* Whether LAYER is in the stack IDS.  */
static bool
in_stack (char **ids, size_t n, const char *layer)
{
  size_t i;

  for (i = 0; i < n; i++)
    if (strcmp (ids[i], layer) == 0)
      return true;
  return false;
}

/* Under the project lock: the session's base and the layers it published
   must still be in the stack (a squash replaces them).  */
static int
check_layers (esbx_store_t *store, const char *entry, const struct esbx_session *s,
              esbx_error_t *err)
{
  _cleanup_strv_ char **ids = NULL;
  char **p;
  size_t n;

  if (esbx_project_stack (store, s->project, &ids, &n, err) < 0)
    return -1;
  if (!in_stack (ids, n, s->base))
    return esbx_make_error_kind (
        err, ESBX_ERR_NOT_FOUND, 0,
        "restore `%s`: its base layer `%.12s` is no longer in project `%s` (squashed?)", entry,
        s->base, s->project);
  for (p = s->published; *p; p++)
    if (!in_stack (ids, n, *p))
      return esbx_make_error_kind (
          err, ESBX_ERR_NOT_FOUND, 0,
          "restore `%s`: its published layer `%.12s` is no longer in project `%s`", entry, *p,
          s->project);
  return 0;
}

/* ENTRY's session record, renamed NAME (a new id under a new name: tokens
   bound to the old session do not reach it).  */
static int
load_record (esbx_store_t *store, const char *entry, const char *name, json_t **record,
             esbx_error_t *err)
{
  _cleanup_free_ char *path = xasprintf ("trash/%s/session.json", entry);
  json_t *j = json_parse_file_at (store->rootfd, path, err);
  const char *old;

  if (j == NULL)
    return esbx_error_wrap (err, "trash entry `%s`", entry);
  old = json_get_string (j, "name");
  if (old == NULL || strcmp (old, name) != 0)
    {
      _cleanup_free_ char *id = esbx_random_hex (16);
      json_set_string (j, "id", id);
    }
  json_set_string (j, "name", name);
  *record = j;
  return 0;
}

static int
restore_locked (esbx_store_t *store, const char *entry, const char *name, const json_t *record,
                esbx_error_t *err)
{
  _cleanup_free_ char *rel = xasprintf ("trash/%s", entry);
  _cleanup_free_ char *dest = esbx_session_rel (name);
  _cleanup_free_ char *text = NULL;
  _cleanup_close_ int dfd = -1;
  size_t len;

  dfd = esbx_open_dir_at (store->rootfd, rel, err);
  if (dfd < 0)
    return -1;
  if ((mkdirat (dfd, "work", 0755) < 0 && errno != EEXIST)
      || (mkdirat (dfd, "merged", 0755) < 0 && errno != EEXIST))
    return esbx_make_error (err, errno, "restore `%s`: mkdir", entry);
  text = json_serialize (record, true, &len);
  if (esbx_write_file_atomic_at (dfd, "session.json", text, len, 0644, err) < 0)
    return esbx_error_wrap (err, "restore `%s`", entry);
  if (renameat2 (store->rootfd, rel, store->rootfd, dest, RENAME_NOREPLACE) < 0)
    {
      if (errno == EEXIST || errno == ENOTEMPTY)
        return esbx_make_error_kind (err, ESBX_ERR_EXISTS, 0,
                                     "restore `%s`: session `%s` already exists (restore it "
                                     "with --name NEW)",
                                     entry, name);
      if (errno == ENOENT)
        return no_entry (err, entry);
      return esbx_make_error (err, errno, "restore `%s`", entry);
    }
  fsync (store->rootfd);
  /* A leftover trash.json in a session is harmless: only the trash reads it.  */
  unlinkat (dfd, TRASH_META, 0);
  return 0;
}

int
esbx_trash_restore (esbx_store_t *store, const char *entry, const char *name, char **restored,
                    esbx_error_t *err)
{
  _cleanup_json_ json_t *meta = NULL, *record = NULL;
  _cleanup_close_ int plock = -1;
  struct esbx_session *s = NULL;
  const char *session;
  int ret;

  meta = entry_meta (store, entry, err);
  if (meta == NULL)
    return -1;
  session = name ? name : json_get_string (meta, "session");
  if (esbx_check_name ("session", session, err) < 0)
    return -1;
  if (esbx_session_exists (store, session))
    return esbx_make_error_kind (
        err, ESBX_ERR_EXISTS, 0,
        "restore `%s`: session `%s` already exists (restore it with --name NEW)", entry, session);
  if (load_record (store, entry, session, &record, err) < 0)
    return -1;
  {
    /* esbx_session_load's checks, on the entry's record.  */
    const char *project = json_get_string (record, "project");
    if (project == NULL || json_get_string (record, "base") == NULL)
      return esbx_make_error (err, 0, "trash entry `%s`: record without project or base", entry);
    if (!esbx_project_exists (store, project))
      return esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0,
                                   "restore `%s`: project `%s` no longer exists", entry, project);
    plock = esbx_project_lock (store, project, err);
    if (plock < 0)
      return esbx_error_wrap (err, "restore `%s`", entry);
    s = xmalloc0 (sizeof *s);
    s->name = xstrdup (session);
    s->project = xstrdup (project);
    s->base = xstrdup (json_get_string (record, "base"));
    {
      struct strv pub = { 0 };
      json_t *arr = json_get (record, "published"), *item;
      size_t i;

      json_array_foreach (arr, i, item)
        if (item->type == JSON_STRING)
          strv_push (&pub, xstrdup (item->text));
      s->published = pub.v ? pub.v : xmalloc0 (sizeof (char *));
    }
  }
  ret = check_layers (store, entry, s, err);
  if (ret == 0)
    ret = restore_locked (store, entry, session, record, err);
  esbx_session_free (s);
  if (ret < 0)
    return -1;
  close (take_fd (&plock));
  if (esbx_session_mount (store, session, err) < 0)
    return esbx_error_wrap (err, "restore `%s`: restored as session `%s`, but", entry, session);
  *restored = xstrdup (session);
  return 0;
}

/* Move ENTRY out of the trash, then remove it: a crash half-way leaves a
   temp dir for gc, never half an entry.  */
static int
purge_one (esbx_store_t *store, const char *entry, esbx_error_t *err)
{
  _cleanup_free_ char *rel = xasprintf ("trash/%s", entry);
  _cleanup_free_ char *hex = esbx_random_hex (6);
  _cleanup_free_ char *graveyard = xasprintf ("tmp/purge-%s-%s", entry, hex);

  if (renameat (store->rootfd, rel, store->rootfd, graveyard) < 0)
    {
      if (errno == ENOENT)
        return no_entry (err, entry);
      return esbx_make_error (err, errno, "purge `%s`", entry);
    }
  if (esbx_rm_rf_at (store->rootfd, graveyard, err) < 0)
    return esbx_error_wrap (err, "purge `%s`", entry);
  return 0;
}

int
esbx_trash_purge (esbx_store_t *store, const char *entry, FILE *report, esbx_error_t *err)
{
  _cleanup_strv_ char **names = NULL;
  size_t i;

  if (entry)
    {
      _cleanup_json_ json_t *meta = entry_meta (store, entry, err);
      if (meta == NULL || purge_one (store, entry, err) < 0)
        return -1;
      if (report)
        fprintf (report, "purged trash entry `%s`\n", entry);
      return 0;
    }
  names = entries (store, err);
  if (names == NULL)
    return -1;
  for (i = 0; names[i]; i++)
    {
      esbx_error_t e = NULL;

      if (purge_one (store, names[i], &e) < 0)
        {
          /* Restored or purged meanwhile: gone is what we wanted.  */
          if (e->kind == ESBX_ERR_NOT_FOUND)
            {
              esbx_error_free (&e);
              continue;
            }
          *err = e;
          return -1;
        }
      if (report)
        fprintf (report, "purged trash entry `%s`\n", names[i]);
    }
  return 0;
}

int
esbx_trash_expire (esbx_store_t *store, FILE *report, size_t *failed, esbx_error_t *err)
{
  _cleanup_strv_ char **names = entries (store, err);
  time_t now = time (NULL);
  size_t i;
  int ret = 0;

  if (names == NULL)
    return -1;
  for (i = 0; names[i]; i++)
    {
      _cleanup_json_ json_t *meta = NULL;
      esbx_error_t e = NULL;
      int64_t until;

      meta = entry_meta (store, names[i], &e);
      /* Unreadable: keep it, the operator decides (trash purge).  */
      if (meta == NULL || !json_get_int (meta, "expires_unix", &until) || until > (int64_t)now)
        {
          esbx_error_free (&e);
          continue;
        }
      if (purge_one (store, names[i], &e) < 0)
        {
          if (e->kind == ESBX_ERR_NOT_FOUND)
            esbx_error_free (&e);
          else
            {
              if (report)
                fprintf (report, "could not purge trash entry `%s`: %s\n", names[i], e->msg);
              (*failed)++;
              if (ret == 0)
                *err = steal_pointer (&e);
              else
                esbx_error_free (&e);
              ret = -1;
            }
          continue;
        }
      if (report)
        fprintf (report, "purged trash entry `%s` (expired %s)\n", names[i],
                 json_get_string (meta, "expires") ? json_get_string (meta, "expires") : "?");
    }
  return ret;
}
