/* Secrets: values a session may use but never keeps.
 *
 *   ROOT/secrets/            0700, root only
 *   ROOT/secrets/NAME        0600, the value as given, trailing newlines cut
 *
 * A session names the secrets it holds in session.json ("secrets": array of
 * {"name", "env"?, "file"?}); values never leave this directory but for a
 * holder's private tmpfs (/run/secrets), an exec's environment and the
 * scanners that look for them (publish, exec output).  A secret is made
 * once and never changed: rm then create, refused while a session names
 * it.  Its owner, a project or the store, says which sessions may name it
 * (secret_owner.c); create and rm hold ROOT/secrets/.lock.  */
#include "internal.h"
#include "fs.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SECRETS_DIR "secrets"
#define FILE_DIR    "/run/secrets/"
#define LOCK_FILE   ".lock"

static int
open_secrets_dir (esbx_store_t *store, bool create, esbx_error_t *err)
{
  _cleanup_close_ int fd = -1;
  struct stat st;

  if (create && mkdirat (store->rootfd, SECRETS_DIR, 0700) < 0 && errno != EEXIST)
    return esbx_make_error (err, errno, "mkdir `%s/" SECRETS_DIR "`", store->root);
  fd = TEMP_FAILURE_RETRY (
      openat (store->rootfd, SECRETS_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (fd < 0)
    return esbx_make_error (err, errno, "open `%s/" SECRETS_DIR "`", store->root);
  /* Whatever made it, only root reads it.  */
  if (fstat (fd, &st) < 0)
    return esbx_make_error (err, errno, "stat `%s/" SECRETS_DIR "`", store->root);
  if ((st.st_mode & 07777) != 0700 && fchmod (fd, 0700) < 0)
    return esbx_make_error (err, errno, "chmod `%s/" SECRETS_DIR "`", store->root);
  return take_fd (&fd);
}

char *
esbx_secret_path (esbx_store_t *store, const char *name)
{
  return xasprintf ("%s/" SECRETS_DIR "/%s", store->root, name);
}

int
esbx_secret_create (esbx_store_t *store, const char *name, const char *project, const char *value,
                    size_t len, esbx_error_t *err)
{
  return esbx_secret_create_inject (store, name, project, NULL, value, len, err);
}

int
esbx_secret_create_inject (esbx_store_t *store, const char *name, const char *project,
                           const json_t *inject, const char *value, size_t len, esbx_error_t *err)
{
  _cleanup_free_ char *tmp = NULL, *hex = esbx_random_hex (8);
  _cleanup_close_ int dfd = -1, fd = -1, lock = -1;

  if (esbx_check_name ("secret", name, err) < 0
      || (project && esbx_check_name ("project", project, err) < 0))
    return -1;
  if (project && !esbx_project_exists (store, project))
    return esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0,
                                 "secret `%s`: project `%s` does not exist", name, project);
  while (len > 0 && (value[len - 1] == '\n' || value[len - 1] == '\r'))
    len--;
  if (len == 0)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "secret `%s`: the value is empty", name);
  if (len > ESBX_SECRET_MAX)
    return esbx_make_error_kind (err, ESBX_ERR_TOO_LARGE, 0,
                                 "secret `%s`: the value exceeds %u bytes", name, ESBX_SECRET_MAX);
  dfd = open_secrets_dir (store, true, err);
  if (dfd < 0 || (lock = esbx_lock_at (dfd, LOCK_FILE, true, true, err)) < 0)
    return esbx_error_wrap (err, "secret `%s`", name);
  if (esbx_exists_at (dfd, name))
    return esbx_make_error_kind (err, ESBX_ERR_EXISTS, 0, "secret `%s` exists already", name);
  /* The owner first: the value never appears without it.  */
  if (esbx_secret_owner_write (store, dfd, name, project, err) < 0
      || esbx_secret_inject_write (store, name, inject, err) < 0)
    return -1;
  /* A dot name: never a secret's (names start with a letter or digit).  */
  tmp = xasprintf (".tmp-%s", hex);
  fd = TEMP_FAILURE_RETRY (
      openat (dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (fd < 0)
    return esbx_make_error (err, errno, "secret `%s`: create", name);
  if (esbx_write_all (fd, value, len) < 0 || fsync (fd) < 0)
    {
      esbx_make_error (err, errno, "secret `%s`: write", name);
      unlinkat (dfd, tmp, 0);
      return -1;
    }
  if (renameat2 (dfd, tmp, dfd, name, RENAME_NOREPLACE) < 0)
    {
      int e = errno;
      unlinkat (dfd, tmp, 0);
      if (e == EEXIST)
        return esbx_make_error_kind (err, ESBX_ERR_EXISTS, 0, "secret `%s` exists already", name);
      return esbx_make_error (err, e, "secret `%s`: rename", name);
    }
  fsync (dfd);
  return 0;
}

int
esbx_secret_read (esbx_store_t *store, const char *name, char **value, size_t *len,
                  esbx_error_t *err)
{
  _cleanup_close_ int dfd = -1;

  if (esbx_check_name ("secret", name, err) < 0)
    return -1;
  dfd = open_secrets_dir (store, false, err);
  if (dfd < 0 || !esbx_exists_at (dfd, name))
    {
      esbx_error_free (err);
      return esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0, "secret `%s` does not exist", name);
    }
  if (esbx_read_file_at (dfd, name, ESBX_SECRET_MAX, value, len, err) < 0)
    return esbx_error_wrap (err, "secret `%s`", name);
  return 0;
}

int
esbx_secret_owner (esbx_store_t *store, const char *name, char **project, esbx_error_t *err)
{
  _cleanup_json_ json_t *owner = NULL;
  _cleanup_close_ int dfd = -1;

  *project = NULL;
  if (esbx_check_name ("secret", name, err) < 0)
    return -1;
  if (!esbx_exists_at (store->rootfd, SECRETS_DIR)
      || (dfd = open_secrets_dir (store, false, err)) < 0 || !esbx_exists_at (dfd, name))
    {
      esbx_error_free (err);
      return esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0, "secret `%s` does not exist", name);
    }
  if (esbx_secret_owner_read (dfd, name, &owner, err) < 0)
    return -1;
  if (owner)
    *project = xstrdup (json_get_string (owner, "project"));
  return 0;
}

json_t *
esbx_secret_list (esbx_store_t *store, const char *project, esbx_error_t *err)
{
  json_t *arr = json_new (JSON_ARRAY);
  _cleanup_strv_ char **names = NULL;
  _cleanup_close_ int dfd = -1;
  size_t i;

  if (!esbx_exists_at (store->rootfd, SECRETS_DIR))
    return arr;
  dfd = open_secrets_dir (store, false, err);
  if (dfd < 0 || (names = esbx_list_dir_at (dfd, ".", err)) == NULL)
    {
      json_free (arr);
      return NULL;
    }
  for (i = 0; names[i]; i++)
    {
      _cleanup_free_ char *created = NULL;
      _cleanup_json_ json_t *owner = NULL;
      const char *of;
      struct stat st;
      json_t *o;

      if (!esbx_name_valid (names[i]) || fstatat (dfd, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0
          || !S_ISREG (st.st_mode))
        continue;
      if (esbx_secret_owner_read (dfd, names[i], &owner, err) < 0)
        {
          json_free (arr);
          return NULL;
        }
      of = owner ? json_get_string (owner, "project") : NULL;
      if (project && (of == NULL || strcmp (of, project) != 0))
        continue;
      o = json_new (JSON_OBJECT);
      json_set_string (o, "name", names[i]);
      json_set_int (o, "size", (int64_t)st.st_size);
      created = esbx_rfc3339 (&st.st_mtim);
      json_set_string (o, "created", created);
      json_set (o, "project", of ? json_new_string (of) : json_new (JSON_NULL));
      {
        json_t *inject = esbx_secret_inject_read (store, names[i]);
        if (inject)
          json_set (o, "inject", inject);
      }
      json_append (arr, o);
    }
  return arr;
}

static bool
names_hold (const json_t *names, const char *name)
{
  const json_t *v;
  size_t i;

  json_array_foreach (names, i, v)
    if (v->type == JSON_STRING && strcmp (v->text, name) == 0)
      return true;
  return false;
}

/* The sessions whose record names secret NAME (given or kept), then
   "snapshot `SNAP`" for each snapshot that keeps it.  */
static char **
users_of (esbx_store_t *store, const char *name, esbx_error_t *err)
{
  _cleanup_sessions_ struct esbx_sessions it = { 0 };
  _cleanup_strv_ char **projects = NULL;
  struct esbx_session *s;
  struct strv out = { 0 };
  size_t i, k;

  if (esbx_sessions_open (store, NULL, &it, err) < 0
      || (projects = esbx_project_list (store, err)) == NULL)
    return NULL;
  while ((s = esbx_sessions_next (&it)))
    {
      _cleanup_json_ json_t *names = esbx_session_secret_names (s);

      if (names_hold (names, name))
        strv_push (&out, xasprintf ("session `%s`", s->name));
    }
  for (i = 0; projects[i]; i++)
    {
      _cleanup_free_ char *dir = esbx_project_file (projects[i], "snapshots");
      _cleanup_strv_ char **snaps = NULL;
      esbx_error_t ignored = NULL;

      if (!esbx_exists_at (store->rootfd, dir)
          || (snaps = esbx_list_dir_at (store->rootfd, dir, &ignored)) == NULL)
        {
          esbx_error_free (&ignored);
          continue;
        }
      for (k = 0; snaps[k]; k++)
        {
          _cleanup_json_ json_t *rec = NULL;

          if (!esbx_name_valid (snaps[k])
              || (rec = esbx_snapshot_load_record (store, projects[i], snaps[k], &ignored)) == NULL)
            {
              esbx_error_free (&ignored);
              continue;
            }
          if (names_hold (json_get (rec, "secrets"), name))
            strv_push (&out, xasprintf ("snapshot `%s`", snaps[k]));
        }
    }
  return out.v ? out.v : xmalloc0 (sizeof (char *));
}

int
esbx_secret_rm (esbx_store_t *store, const char *name, esbx_error_t *err)
{
  _cleanup_strv_ char **users = NULL;
  _cleanup_close_ int dfd = -1, lock = -1;

  if (esbx_check_name ("secret", name, err) < 0)
    return -1;
  if (!esbx_exists_at (store->rootfd, SECRETS_DIR)
      || (dfd = open_secrets_dir (store, false, err)) < 0 || !esbx_exists_at (dfd, name))
    {
      esbx_error_free (err);
      return esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0, "secret `%s` does not exist", name);
    }
  lock = esbx_lock_at (dfd, LOCK_FILE, true, true, err);
  if (lock < 0)
    return esbx_error_wrap (err, "secret rm `%s`", name);
  /* A snapshot, and what is made from it, keeps the name so that publish
     looks for the value: it must stay to be looked for.  */
  users = users_of (store, name, err);
  if (users == NULL)
    return esbx_error_wrap (err, "secret rm `%s`", name);
  if (users[0])
    return esbx_make_error_kind (err, ESBX_ERR_BUSY, 0,
                                 "secret `%s` is used by %s%s; discard or remove %s first", name,
                                 users[0], users[1] ? " and others" : "", users[1] ? "them" : "it");
  if (unlinkat (dfd, name, 0) < 0)
    return esbx_make_error (err, errno, "secret rm `%s`", name);
  /* The value is gone: its owner and hosts go after it.  */
  esbx_secret_owner_remove (dfd, name);
  esbx_secret_inject_remove (store, name);
  fsync (dfd);
  return 0;
}

/* NAME[,env=VAR][,file=/run/secrets/FILE] as {"name", "env"?, "file"?};
   without env= the file is the default.  */
/* Refused unless a session of PROJECT may use secret NAME (its owner).  */
static int
check_use (esbx_store_t *store, const char *name, const char *project, esbx_error_t *err)
{
  _cleanup_json_ json_t *owner = NULL;
  _cleanup_close_ int dfd = open_secrets_dir (store, false, err);

  if (dfd < 0 || esbx_secret_owner_read (dfd, name, &owner, err) < 0)
    return esbx_error_wrap (err, "--secret `%s`", name);
  return esbx_secret_owner_check (store, name, owner, project, err);
}

int
esbx_secret_read_for (esbx_store_t *store, const char *name, const char *project, char **value,
                      size_t *len, esbx_error_t *err)
{
  if (esbx_secret_read (store, name, value, len, err) < 0)
    return -1;
  if (check_use (store, name, project, err) < 0)
    {
      explicit_bzero (*value, *len);
      free (*value);
      *value = NULL;
      return -1;
    }
  return 0;
}

static int
parse_spec (esbx_store_t *store, const char *project, const char *spec, json_t **out,
            esbx_error_t *err)
{
  _cleanup_free_ char *copy = xstrdup (spec);
  _cleanup_json_ json_t *o = json_new (JSON_OBJECT);
  char *save = NULL, *tok, *name;

  name = strtok_r (copy, ",", &save);
  if (name == NULL || esbx_check_name ("secret", name, err) < 0)
    {
      if (name == NULL)
        esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                              "--secret `%s`: expected NAME[,env=VAR][,file=/run/secrets/FILE]",
                              spec);
      return -1;
    }
  json_set_string (o, "name", name);
  while ((tok = strtok_r (NULL, ",", &save)) != NULL)
    {
      if (strcmp (tok, "inject") == 0)
        {
          _cleanup_json_ json_t *inject = esbx_secret_inject_read (store, name);
          _cleanup_free_ char *hex = esbx_random_hex (16);
          _cleanup_free_ char *ph = xasprintf ("esbx-placeholder-%s", hex);

          if (inject == NULL)
            return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                         "--secret `%s,inject`: the secret is bound to no host "
                                         "(secret create --for HOST)",
                                         name);
          json_set (o, "inject", json_new_bool (true));
          json_set_string (o, "placeholder", ph);
        }
      else if (esbx_has_prefix (tok, "env="))
        {
          if (esbx_session_env_check (tok + 4, "", err) < 0)
            return esbx_error_wrap (err, "--secret `%s`", name);
          json_set_string (o, "env", tok + 4);
        }
      else if (esbx_has_prefix (tok, "file="))
        {
          const char *f = tok + 5;
          if (!esbx_has_prefix (f, FILE_DIR) || !esbx_name_valid (f + strlen (FILE_DIR)))
            return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                         "--secret `%s`: file must be " FILE_DIR "FILE, FILE "
                                         "matching %s",
                                         name, ESBX_NAME_RULE);
          json_set_string (o, "file", f);
        }
      else
        return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                     "--secret `%s`: unknown option `%s` (expected inject, "
                                     "env=VAR or file=" FILE_DIR "FILE)",
                                     name, tok);
    }
  if (json_get (o, "env") == NULL && json_get (o, "file") == NULL)
    {
      _cleanup_free_ char *f = xasprintf (FILE_DIR "%s", name);
      json_set_string (o, "file", f);
    }
  {
    _cleanup_free_ char *value = NULL;
    size_t len;

    if (esbx_secret_read (store, name, &value, &len, err) < 0)
      return -1;
    if (check_use (store, name, project, err) < 0)
      return -1;
    if (json_get (o, "env") && memchr (value, '\0', len) != NULL)
      return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                   "--secret `%s`: the value holds a NUL byte and cannot be an "
                                   "environment variable",
                                   name);
    explicit_bzero (value, len);
  }
  *out = steal_pointer (&o);
  return 0;
}

int
esbx_secret_attach_parse (esbx_store_t *store, const char *project, char *const *specs,
                          json_t **out, esbx_error_t *err)
{
  _cleanup_json_ json_t *arr = NULL;
  const json_t *a;
  size_t i, k;

  *out = NULL;
  if (specs == NULL || specs[0] == NULL)
    return 0;
  arr = json_new (JSON_ARRAY);
  for (i = 0; specs[i]; i++)
    {
      json_t *o = NULL;

      if (parse_spec (store, project, specs[i], &o, err) < 0)
        return -1;
      json_array_foreach (arr, k, a)
        {
          const char *f1 = json_get_string (a, "file"), *f2 = json_get_string (o, "file");
          if (strcmp (json_get_string (a, "name"), json_get_string (o, "name")) == 0
              || (f1 && f2 && strcmp (f1, f2) == 0))
            {
              esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "--secret `%s`: given twice",
                                    json_get_string (o, "name"));
              json_free (o);
              return -1;
            }
        }
      json_append (arr, o);
    }
  *out = steal_pointer (&arr);
  return 0;
}

json_t *
esbx_secret_attach_json (const json_t *secrets)
{
  json_t *arr = json_new (JSON_ARRAY);
  const json_t *a;
  size_t i;

  json_array_foreach (secrets, i, a)
    {
      static const char *const keys[] = { "name", "env", "file" };
      json_t *o = json_new (JSON_OBJECT);

      for (size_t k = 0; k < ARRAY_SIZE (keys); k++)
        if (json_get_string (a, keys[k]))
          json_set_string (o, keys[k], json_get_string (a, keys[k]));
      if (json_get_bool (a, "inject", false))
        json_set (o, "inject", json_new_bool (true));
      json_append (arr, o);
    }
  return arr;
}

void
esbx_secrets_free (struct esbx_secret *v, size_t n)
{
  size_t i;

  for (i = 0; v && i < n; i++)
    {
      free (v[i].name);
      free (v[i].env);
      free (v[i].file);
      free (v[i].placeholder);
      if (v[i].value)
        explicit_bzero (v[i].value, v[i].len);
      free (v[i].value);
    }
  free (v);
}

/* The attachment of secret NAME in a record's "secrets", or NULL: a name
   the session only keeps.  */
static const json_t *
attachment (const json_t *secrets, const char *name)
{
  const json_t *a;
  size_t i;

  json_array_foreach (secrets, i, a)
    if (a->type == JSON_OBJECT && json_get_string (a, "name")
        && strcmp (json_get_string (a, "name"), name) == 0)
      return a;
  return NULL;
}

int
esbx_session_secrets (esbx_store_t *store, const struct esbx_session *s, struct esbx_secret **out,
                      size_t *n, esbx_error_t *err)
{
  const json_t *secrets = json_get (s->record, "secrets"), *v;
  _cleanup_json_ json_t *names = esbx_session_secret_names (s);
  struct esbx_secret *out_v;
  size_t i;

  *out = NULL;
  *n = 0;
  if (json_len (names) == 0)
    return 0;
  out_v = xmalloc0 (sizeof *out_v * (json_len (names) + 1));
  json_array_foreach (names, i, v)
    {
      const json_t *a = attachment (secrets, v->text);
      struct esbx_secret *x = &out_v[i];

      if (esbx_secret_read (store, v->text, &x->value, &x->len, err) < 0)
        {
          esbx_secrets_free (out_v, i + 1);
          return esbx_error_wrap (err, "session `%s`", s->name);
        }
      x->name = xstrdup (v->text);
      /* A kept name is looked for and redacted, never given.  */
      x->env = a && json_get_string (a, "env") ? xstrdup (json_get_string (a, "env")) : NULL;
      x->file = a && json_get_string (a, "file") ? xstrdup (json_get_string (a, "file")) : NULL;
      x->inject = a && json_get_bool (a, "inject", false) && json_get_string (a, "placeholder");
      x->placeholder = x->inject ? xstrdup (json_get_string (a, "placeholder")) : NULL;
    }
  *out = out_v;
  *n = json_len (names);
  return 0;
}
