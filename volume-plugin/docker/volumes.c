#include "volumes.h"
#include "fs.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>

#define VOLUMES_DIR "plugin/volumes"
#define SUFFIX      ".json"

/* One mutex per volume that some request is working on; entries live while
   a request uses them, so the table stays as small as the concurrency.  */
struct vol_lock
{
  char *name;
  pthread_mutex_t mutex;
  unsigned users;
  struct vol_lock *next;
};

struct esbx_volumes
{
  esbx_store_t *store;
  int dirfd;
  int lockfd;
  pthread_mutex_t table_mutex;
  struct vol_lock *locks;
};

int
esbx_volumes_open (esbx_store_t *store, struct esbx_volumes **out, esbx_error_t *err)
{
  _cleanup_free_ char *dir = xasprintf ("%s/" VOLUMES_DIR, store->root);
  _cleanup_close_ int dirfd = -1;
  _cleanup_close_ int lockfd = -1;
  struct esbx_volumes *vols;

  if (esbx_mkdir_p (dir, 0700, err) < 0)
    return -1;
  lockfd = esbx_lock_at (store->rootfd, "plugin/lock", true, false, err);
  if (lockfd < 0)
    return esbx_error_wrap (err, "another esbxd serves the store `%s`", store->root);
  dirfd = esbx_open_dir_at (store->rootfd, VOLUMES_DIR, err);
  if (dirfd < 0)
    return -1;

  vols = xmalloc0 (sizeof *vols);
  vols->store = store;
  vols->dirfd = take_fd (&dirfd);
  vols->lockfd = take_fd (&lockfd);
  pthread_mutex_init (&vols->table_mutex, NULL);
  *out = vols;
  return 0;
}

void
esbx_volumes_close (struct esbx_volumes *vols)
{
  if (vols == NULL)
    return;
  close (vols->dirfd);
  close (vols->lockfd);
  pthread_mutex_destroy (&vols->table_mutex);
  free (vols);
}

void
esbx_volumes_lock (struct esbx_volumes *vols, const char *name)
{
  struct vol_lock *l;

  pthread_mutex_lock (&vols->table_mutex);
  for (l = vols->locks; l; l = l->next)
    if (strcmp (l->name, name) == 0)
      break;
  if (l == NULL)
    {
      l = xmalloc0 (sizeof *l);
      l->name = xstrdup (name);
      pthread_mutex_init (&l->mutex, NULL);
      l->next = vols->locks;
      vols->locks = l;
    }
  l->users++;
  pthread_mutex_unlock (&vols->table_mutex);
  pthread_mutex_lock (&l->mutex);
}

void
esbx_volumes_unlock (struct esbx_volumes *vols, const char *name)
{
  struct vol_lock **pl, *l;

  pthread_mutex_lock (&vols->table_mutex);
  for (pl = &vols->locks; *pl; pl = &(*pl)->next)
    if (strcmp ((*pl)->name, name) == 0)
      break;
  l = *pl;
  if (l == NULL)
    abort ();
  pthread_mutex_unlock (&l->mutex);
  if (--l->users == 0)
    {
      *pl = l->next;
      pthread_mutex_destroy (&l->mutex);
      free (l->name);
      free (l);
    }
  pthread_mutex_unlock (&vols->table_mutex);
}

struct esbx_volume *
esbx_volume_new (const char *name, const json_t *opts, const char *created)
{
  struct esbx_volume *vol = xmalloc0 (sizeof *vol);

  vol->name = xstrdup (name);
  vol->opts = opts && opts->type == JSON_OBJECT ? json_copy (opts) : json_new (JSON_OBJECT);
  vol->created = created ? xstrdup (created) : esbx_rfc3339_now ();
  vol->mounts = json_new (JSON_OBJECT);
  return vol;
}

void
esbx_volume_free (struct esbx_volume *vol)
{
  if (vol == NULL)
    return;
  free (vol->name);
  json_free (vol->opts);
  free (vol->created);
  json_free (vol->mounts);
  free (vol);
}

static char *
file_name (const char *name)
{
  return xasprintf ("%s" SUFFIX, name);
}

int
esbx_volume_load (struct esbx_volumes *vols, const char *name, struct esbx_volume **out,
                  esbx_error_t *err)
{
  _cleanup_free_ char *file = file_name (name);
  _cleanup_json_ json_t *j = NULL;
  const char *created;
  struct esbx_volume *vol;
  json_t *opts, *mounts;

  *out = NULL;
  if (!esbx_exists_at (vols->dirfd, file))
    return 0;
  j = json_parse_file_at (vols->dirfd, file, err);
  if (j == NULL)
    return esbx_error_wrap (err, "volume record `%s`", name);
  opts = json_get (j, "opts");
  mounts = json_get (j, "mounts");
  created = json_get_string (j, "created");
  if (opts == NULL || opts->type != JSON_OBJECT || mounts == NULL || mounts->type != JSON_OBJECT
      || created == NULL)
    return esbx_make_error (err, 0, "volume record `%s`: malformed", name);

  vol = esbx_volume_new (name, opts, created);
  json_free (vol->mounts);
  vol->mounts = json_copy (mounts);
  *out = vol;
  return 0;
}

int
esbx_volume_save (struct esbx_volumes *vols, const struct esbx_volume *vol, esbx_error_t *err)
{
  _cleanup_free_ char *file = file_name (vol->name);
  _cleanup_json_ json_t *j = json_new (JSON_OBJECT);
  _cleanup_free_ char *data = NULL;
  size_t len;

  json_set_string (j, "name", vol->name);
  json_set_string (j, "created", vol->created);
  json_set (j, "opts", json_copy (vol->opts));
  json_set (j, "mounts", json_copy (vol->mounts));
  data = json_serialize (j, true, &len);
  if (esbx_write_file_atomic_at (vols->dirfd, file, data, len, 0600, err) < 0)
    return esbx_error_wrap (err, "save volume `%s`", vol->name);
  return 0;
}

int
esbx_volume_delete (struct esbx_volumes *vols, const char *name, esbx_error_t *err)
{
  _cleanup_free_ char *file = file_name (name);

  if (unlinkat (vols->dirfd, file, 0) < 0 && errno != ENOENT)
    return esbx_make_error (err, errno, "remove volume record `%s`", file);
  if (fsync (vols->dirfd) < 0)
    return esbx_make_error (err, errno, "fsync `%s`", VOLUMES_DIR);
  return 0;
}

char **
esbx_volumes_names (struct esbx_volumes *vols, esbx_error_t *err)
{
  _cleanup_strv_ char **files = esbx_list_dir_at (vols->dirfd, ".", err);
  struct strv names = { 0 };
  size_t i, len;

  if (files == NULL)
    return NULL;
  for (i = 0; files[i]; i++)
    {
      len = strlen (files[i]);
      /* Temp files of esbx_write_file_atomic_at start with a dot and fail
         the name rule.  */
      if (len <= strlen (SUFFIX) || strcmp (files[i] + len - strlen (SUFFIX), SUFFIX) != 0)
        continue;
      files[i][len - strlen (SUFFIX)] = '\0';
      if (esbx_name_valid (files[i]))
        strv_push (&names, xstrdup (files[i]));
    }
  if (names.v == NULL)
    return xmalloc0 (sizeof (char *));
  return names.v;
}

int64_t
esbx_volume_count_mount (struct esbx_volume *vol, const char *id, int64_t delta)
{
  int64_t n = 0;

  json_get_int (vol->mounts, id, &n);
  n += delta;
  if (n <= 0)
    {
      json_remove (vol->mounts, id);
      return 0;
    }
  json_set_int (vol->mounts, id, n);
  return n;
}

int64_t
esbx_volume_mount_total (const struct esbx_volume *vol)
{
  int64_t total = 0, n;
  size_t i;

  for (i = 0; i < json_len (vol->mounts); i++)
    if (json_int_value (json_at (vol->mounts, i), &n) && n > 0)
      total += n;
  return total;
}
