/* Who may use a secret: its owner, a project or the whole store.
 *
 *   ROOT/secrets/.owner/NAME   {"project": P, "project_id": ID}, 0600
 *
 * No record: the secret is the store's (every secret made before owners
 * existed is): any session may name it, but over the gateway only a token
 * without project or session limits may attach it.  A project's secret
 * attaches only to sessions of that project, and of that very project:
 * the record keeps its id, as tokens do, so a project removed and made
 * again under the same name does not inherit it.  The record is written
 * before the value appears and removed after it has gone (both under the
 * secrets' lock, secret.c), so a value never exists without the owner it
 * was made with.  */
#include "internal.h"
#include "fs.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define OWNER_DIR ".owner"

/* OWNER_DIR beneath the secrets directory DFD; CREATE makes it.  */
static int
open_owner_dir (int dfd, bool create, esbx_error_t *err)
{
  int fd;

  if (create && mkdirat (dfd, OWNER_DIR, 0700) < 0 && errno != EEXIST)
    return esbx_make_error (err, errno, "mkdir secrets/" OWNER_DIR);
  fd = TEMP_FAILURE_RETRY (
      openat (dfd, OWNER_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (fd < 0)
    return esbx_make_error (err, errno, "open secrets/" OWNER_DIR);
  return fd;
}

int
esbx_secret_owner_write (esbx_store_t *store, int dfd, const char *name, const char *project,
                         esbx_error_t *err)
{
  _cleanup_json_ json_t *rec = json_new (JSON_OBJECT);
  _cleanup_free_ char *id = NULL, *text = NULL;
  _cleanup_close_ int odfd = -1;
  size_t len;

  if (project == NULL)
    {
      esbx_secret_owner_remove (dfd, name);
      return 0;
    }
  if (esbx_check_name ("project", project, err) < 0
      || esbx_project_id (store, project, &id, err) < 0)
    return esbx_error_wrap (err, "secret `%s`", name);
  odfd = open_owner_dir (dfd, true, err);
  if (odfd < 0)
    return esbx_error_wrap (err, "secret `%s`", name);
  json_set_string (rec, "project", project);
  json_set_string (rec, "project_id", id);
  text = json_serialize (rec, true, &len);
  if (esbx_write_file_atomic_at (odfd, name, text, len, 0600, err) < 0)
    return esbx_error_wrap (err, "secret `%s`: its owner", name);
  return 0;
}

void
esbx_secret_owner_remove (int dfd, const char *name)
{
  _cleanup_close_ int odfd = -1;

  if (!esbx_exists_at (dfd, OWNER_DIR))
    return;
  odfd = open_owner_dir (dfd, false, NULL);
  if (odfd >= 0)
    unlinkat (odfd, name, 0);
}

int
esbx_secret_owner_read (int dfd, const char *name, json_t **owner, esbx_error_t *err)
{
  _cleanup_close_ int odfd = -1;
  json_t *j;

  *owner = NULL;
  if (!esbx_exists_at (dfd, OWNER_DIR))
    return 0;
  odfd = open_owner_dir (dfd, false, err);
  if (odfd < 0)
    return -1;
  if (!esbx_exists_at (odfd, name))
    return 0;
  j = json_parse_file_at (odfd, name, err);
  if (j == NULL || json_get_string (j, "project") == NULL
      || json_get_string (j, "project_id") == NULL)
    {
      json_free (j);
      if (err && *err)
        return esbx_error_wrap (err, "secret `%s`: its owner", name);
      return esbx_make_error (err, 0, "secret `%s`: owner record without project or id", name);
    }
  *owner = j;
  return 0;
}

int
esbx_secret_owner_check (esbx_store_t *store, const char *name, const json_t *owner,
                         const char *project, esbx_error_t *err)
{
  const char *mine = json_get_string (owner, "project"),
             *id = json_get_string (owner, "project_id");
  _cleanup_free_ char *now = NULL;
  esbx_error_t e = NULL;

  if (owner == NULL)
    return 0;
  if (strcmp (mine, project) != 0)
    return esbx_make_error_kind (err, ESBX_ERR_FORBIDDEN, 0,
                                 "secret `%s` belongs to project `%s`: a session of project `%s` "
                                 "cannot use it",
                                 name, mine, project);
  if (esbx_project_id (store, project, &now, &e) < 0)
    {
      esbx_error_free (&e);
      return esbx_make_error_kind (err, ESBX_ERR_FORBIDDEN, 0,
                                   "secret `%s` belongs to project `%s` (id %s), which no longer "
                                   "exists",
                                   name, mine, id);
    }
  if (strcmp (now, id) != 0)
    return esbx_make_error_kind (err, ESBX_ERR_FORBIDDEN, 0,
                                 "secret `%s` belongs to project `%s` (id %s); the project of that "
                                 "name now is another one (id %s)",
                                 name, mine, id, now);
  return 0;
}
