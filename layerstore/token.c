/* Gateway tokens.  A token is a bearer secret "esbx_" + 64 hex digits (256
   random bits); the store keeps only its SHA-256 in ROOT/tokens/ID.json, so a
   copy of the store does not reveal a usable token.  The secret has full
   entropy, which is why a fast hash is enough here.

   A token limited to a session records the session's id, one limited to a
   project the project's id (ROOT/projects/P/id, made on first need): the
   gateway compares ids, so a token never reaches a session or project made
   later under the same name.  */
#include "fs.h"
#include "hash.h"
#include "layerstore.h"
#include "text.h"
#include "utils.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define TOKEN_PREFIX  "esbx_"
#define TOKENS_DIR    "tokens"
#define TOKEN_ID_LEN  6 /* random bytes of an id: 12 hex digits */
#define SECRET_BYTES  32
#define MAX_TOKEN_LEN 256
#define LOCK_FILE     ".lock" /* revoke and bind: a revoked token is never written back */
#define PROJECT_ID    "id"
#define ID_BYTES      16 /* project ids: 32 hex digits, as session ids */

static const struct
{
  const char *name;
  unsigned bit;
} scope_names[] = {
  { "manage", ESBX_SCOPE_MANAGE },
  { "runtime", ESBX_SCOPE_RUNTIME },
  { "observe", ESBX_SCOPE_OBSERVE },
};

void
esbx_token_free (struct esbx_token *t)
{
  if (t == NULL)
    return;
  free (t->id);
  free (t->project);
  free (t->project_id);
  free (t->session);
  free (t->session_id);
  free (t->created);
  free (t);
}

int
esbx_token_parse_scopes (const char *s, unsigned *scopes, esbx_error_t *err)
{
  _cleanup_free_ char *copy = xstrdup (s);
  char *tok, *save = NULL;
  unsigned bits = 0;
  size_t i;

  for (tok = strtok_r (copy, ",", &save); tok; tok = strtok_r (NULL, ",", &save))
    {
      for (i = 0; i < ARRAY_SIZE (scope_names); i++)
        if (strcmp (tok, scope_names[i].name) == 0)
          break;
      if (i == ARRAY_SIZE (scope_names))
        return esbx_make_error_kind (
            err, ESBX_ERR_USAGE, 0, "unknown scope `%s`: expected manage, runtime or observe", tok);
      bits |= scope_names[i].bit;
    }
  if (bits == 0)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "no scope given: expected manage, runtime or observe");
  *scopes = bits;
  return 0;
}

char *
esbx_token_scopes_string (unsigned scopes)
{
  char buf[64] = "";
  size_t i;

  for (i = 0; i < ARRAY_SIZE (scope_names); i++)
    if (scopes & scope_names[i].bit)
      {
        if (buf[0])
          strcat (buf, ",");
        strcat (buf, scope_names[i].name);
      }
  return xstrdup (buf);
}

static char *
expiry_string (int64_t expires)
{
  struct timespec ts = { .tv_sec = (time_t)expires };
  return esbx_rfc3339 (&ts);
}

json_t *
esbx_token_to_json (const struct esbx_token *t)
{
  json_t *o = json_new (JSON_OBJECT), *scopes = json_new (JSON_ARRAY);
  size_t i;

  json_set_string (o, "id", t->id);
  for (i = 0; i < ARRAY_SIZE (scope_names); i++)
    if (t->scopes & scope_names[i].bit)
      json_append (scopes, json_new_string (scope_names[i].name));
  json_set (o, "scopes", scopes);
  json_set (o, "project", t->project ? json_new_string (t->project) : json_new (JSON_NULL));
  json_set (o, "project_id",
            t->project_id ? json_new_string (t->project_id) : json_new (JSON_NULL));
  json_set (o, "session", t->session ? json_new_string (t->session) : json_new (JSON_NULL));
  json_set (o, "session_id",
            t->session_id ? json_new_string (t->session_id) : json_new (JSON_NULL));
  json_set_string (o, "created", t->created ? t->created : "");
  json_set (o, "max_sessions",
            t->max_sessions ? json_new_int (t->max_sessions) : json_new (JSON_NULL));
  json_set (o, "max_egress", t->max_egress ? json_new_int (t->max_egress) : json_new (JSON_NULL));
  if (t->expires)
    {
      _cleanup_free_ char *e = expiry_string (t->expires);
      json_set_string (o, "expires", e);
    }
  else
    json_set (o, "expires", json_new (JSON_NULL));
  return o;
}

static int
open_tokens_dir (esbx_store_t *store, esbx_error_t *err)
{
  /* Hashes are not secrets, but nobody but root needs to list them.  */
  if (mkdirat (store->rootfd, TOKENS_DIR, 0700) < 0 && errno != EEXIST)
    return esbx_make_error (err, errno, "mkdir `%s/%s`", store->root, TOKENS_DIR);
  return esbx_open_dir_at (store->rootfd, TOKENS_DIR, err);
}

static bool
token_id_valid (const char *id)
{
  size_t i;

  for (i = 0; id[i]; i++)
    if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f')))
      return false;
  return i == TOKEN_ID_LEN * 2;
}

/* A cap of record J, or, when it has none (a token made before caps),
   the default of T's limit.  */
static unsigned
cap_of (const json_t *j, const char *key, const struct esbx_token *t)
{
  int64_t v = 0;

  if (json_get_int (j, key, &v) && v > 0 && v <= ESBX_TOKEN_MAX_CAP)
    return (unsigned)v;
  if (json_get (j, key) || (t->project == NULL && t->session == NULL))
    return 0;
  return strcmp (key, "max_egress") == 0 ? ESBX_TOKEN_DEFAULT_MAX_EGRESS
                                         : ESBX_TOKEN_DEFAULT_MAX_SESSIONS;
}

/* *hash (owned) receives the stored SHA-256.  */
static int
load_token (int dirfd, const char *file, struct esbx_token **out, char **hash, esbx_error_t *err)
{
  _cleanup_json_ json_t *j = json_parse_file_at (dirfd, file, err);
  struct esbx_token *t;
  const char *id, *sha, *s;
  const json_t *scope;
  json_t *scopes;
  int64_t expires = 0;
  size_t i, k;

  if (j == NULL)
    return esbx_error_wrap (err, "token record `%s`", file);
  id = json_get_string (j, "id");
  sha = json_get_string (j, "sha256");
  scopes = json_get (j, "scopes");
  if (id == NULL || sha == NULL || scopes == NULL || scopes->type != JSON_ARRAY)
    return esbx_make_error (err, 0, "token record `%s`: missing id, sha256 or scopes", file);
  json_get_int (j, "expires_unix", &expires);
  t = xmalloc0 (sizeof *t);
  t->id = xstrdup (id);
  json_array_foreach (scopes, i, scope)
    for (k = 0; k < ARRAY_SIZE (scope_names); k++)
      if (scope->type == JSON_STRING && strcmp (scope->text, scope_names[k].name) == 0)
        t->scopes |= scope_names[k].bit;
  if ((s = json_get_string (j, "project")))
    t->project = xstrdup (s);
  if ((s = json_get_string (j, "project_id")))
    t->project_id = xstrdup (s);
  if ((s = json_get_string (j, "session")))
    t->session = xstrdup (s);
  if ((s = json_get_string (j, "session_id")))
    t->session_id = xstrdup (s);
  t->created = xstrdup (json_get_string (j, "created") ? json_get_string (j, "created") : "");
  t->expires = expires;
  t->max_sessions = cap_of (j, "max_sessions", t);
  t->max_egress = cap_of (j, "max_egress", t);
  *out = t;
  if (hash)
    *hash = xstrdup (sha);
  return 0;
}

/* PROJECTS/P/id: 1 when *ID holds it, 0 when there is none yet.  */
static int
read_project_id (int pfd, const char *project, char **id, esbx_error_t *err)
{
  _cleanup_free_ char *buf = NULL;
  esbx_error_t e = NULL;
  size_t len, i;

  if (esbx_read_file_at (pfd, PROJECT_ID, 256, &buf, &len, &e) < 0)
    {
      if (e->status == ENOENT)
        {
          esbx_error_free (&e);
          return 0;
        }
      *err = e;
      return esbx_error_wrap (err, "project `%s`", project);
    }
  for (i = 0; i < ID_BYTES * 2 && isxdigit ((unsigned char)buf[i]); i++)
    ;
  if (i != ID_BYTES * 2 || (buf[i] != '\0' && buf[i] != '\n'))
    return esbx_make_error (err, 0, "project `%s`: `%s` is not an id of %d hex digits", project,
                            PROJECT_ID, ID_BYTES * 2);
  buf[i] = '\0';
  *id = steal_pointer (&buf);
  return 1;
}

/* Write a new random id as PROJECTS/P/id unless one is there already:
   linked in from a complete temp file, so that concurrent callers all end
   up with the one that got there first.  */
static int
make_project_id (int pfd, const char *project, esbx_error_t *err)
{
  _cleanup_free_ char *id = esbx_random_hex (ID_BYTES), *rand = esbx_random_hex (6);
  _cleanup_free_ char *tmp = xasprintf (".id-%s", rand), *line = xasprintf ("%s\n", id);
  _cleanup_close_ int fd = -1;
  int ret = 0;

  fd = openat (pfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    return esbx_make_error (err, errno, "project `%s`: create its id", project);
  if (esbx_write_all (fd, line, strlen (line)) < 0 || fsync (fd) < 0)
    ret = esbx_make_error (err, errno, "project `%s`: write its id", project);
  else if (linkat (pfd, tmp, pfd, PROJECT_ID, 0) < 0 && errno != EEXIST)
    ret = esbx_make_error (err, errno, "project `%s`: link its id", project);
  unlinkat (pfd, tmp, 0);
  if (ret == 0)
    fsync (pfd);
  return ret;
}

int
esbx_project_id (esbx_store_t *store, const char *project, char **id, esbx_error_t *err)
{
  _cleanup_free_ char *rel = NULL;
  _cleanup_close_ int pfd = -1;
  int r;

  if (!esbx_project_exists (store, project))
    return esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0, "project `%s` does not exist",
                                 project);
  rel = esbx_project_rel (project);
  pfd = TEMP_FAILURE_RETRY (
      openat (store->rootfd, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (pfd < 0)
    return esbx_make_error (err, errno, "open `%s/%s`", store->root, rel);
  r = read_project_id (pfd, project, id, err);
  if (r != 0)
    return r < 0 ? -1 : 0;
  if (make_project_id (pfd, project, err) < 0)
    return -1;
  r = read_project_id (pfd, project, id, err);
  if (r == 0)
    return esbx_make_error (err, 0, "project `%s`: its id vanished", project);
  return r < 0 ? -1 : 0;
}

/* The ids a new token is bound to: its session's (which must exist), and
   its project's when the project exists already.  */
static int
bind_new (esbx_store_t *store, struct esbx_token *t, esbx_error_t *err)
{
  struct esbx_session *s = NULL;

  if (t->session)
    {
      if (esbx_session_load (store, t->session, &s, err) < 0)
        return esbx_error_wrap (err, "token for session `%s`", t->session);
      t->session_id = xstrdup (s->id);
      esbx_session_free (s);
    }
  if (t->project && esbx_project_exists (store, t->project)
      && esbx_project_id (store, t->project, &t->project_id, err) < 0)
    return esbx_error_wrap (err, "token for project `%s`", t->project);
  return 0;
}

int
esbx_token_create (esbx_store_t *store, unsigned scopes, const char *project, const char *session,
                   int64_t ttl_seconds, const struct esbx_token_caps *caps, char **secret,
                   struct esbx_token **out, esbx_error_t *err)
{
  _cleanup_close_ int dirfd = -1;
  _cleanup_free_ char *rand = NULL, *id = NULL, *file = NULL, *doc = NULL;
  _cleanup_json_ json_t *rec = NULL;
  char hash[ESBX_SHA256_HEX_LEN + 1];
  struct esbx_token *t;
  size_t len;

  if (scopes == 0)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "token: no scope given");
  if (project && esbx_check_name ("project", project, err) < 0)
    return -1;
  if (session && esbx_check_name ("session", session, err) < 0)
    return -1;
  if (ttl_seconds < 0)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "token: negative ttl");
  if (caps && (caps->max_sessions > ESBX_TOKEN_MAX_CAP || caps->max_egress > ESBX_TOKEN_MAX_CAP))
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "token: a cap is at most %d",
                                 ESBX_TOKEN_MAX_CAP);
  dirfd = open_tokens_dir (store, err);
  if (dirfd < 0)
    return -1;

  rand = esbx_random_hex (SECRET_BYTES);
  id = esbx_random_hex (TOKEN_ID_LEN);
  *secret = xasprintf (TOKEN_PREFIX "%s", rand);
  esbx_sha256_buf (*secret, strlen (*secret), hash);

  t = xmalloc0 (sizeof *t);
  t->id = xstrdup (id);
  t->scopes = scopes;
  t->project = project ? xstrdup (project) : NULL;
  t->session = session ? xstrdup (session) : NULL;
  t->created = esbx_rfc3339_now ();
  t->expires = ttl_seconds ? (int64_t)time (NULL) + ttl_seconds : 0;
  t->max_sessions = caps ? caps->max_sessions : 0;
  t->max_egress = caps ? caps->max_egress : 0;
  /* A token with a limit gets the default caps; one without, none unless
     asked.  */
  if (project || session)
    {
      if (t->max_sessions == 0)
        t->max_sessions = ESBX_TOKEN_DEFAULT_MAX_SESSIONS;
      if (t->max_egress == 0)
        t->max_egress = ESBX_TOKEN_DEFAULT_MAX_EGRESS;
    }
  if (bind_new (store, t, err) < 0)
    {
      esbx_token_free (t);
      free (steal_pointer (secret));
      return -1;
    }

  rec = esbx_token_to_json (t);
  json_set_string (rec, "sha256", hash);
  json_set_int (rec, "expires_unix", t->expires);
  doc = json_serialize (rec, true, &len);
  file = xasprintf ("%s.json", id);
  if (esbx_write_file_atomic_at (dirfd, file, doc, len, 0600, err) < 0)
    {
      esbx_token_free (t);
      free (steal_pointer (secret));
      return esbx_error_wrap (err, "token `%s`", id);
    }
  *out = t;
  return 0;
}

static int
cmp_token (const void *a, const void *b)
{
  const struct esbx_token *const *x = a, *const *y = b;
  return strcmp ((*x)->id, (*y)->id);
}

int
esbx_token_list (esbx_store_t *store, struct esbx_token ***out, size_t *n, esbx_error_t *err)
{
  _cleanup_close_ int dirfd = open_tokens_dir (store, err);
  _cleanup_strv_ char **names = NULL;
  struct esbx_token **v;
  size_t i, count = 0;

  if (dirfd < 0)
    return -1;
  names = esbx_list_dir_at (dirfd, ".", err);
  if (names == NULL)
    return -1;
  v = xmalloc0 ((strv_len (names) + 1) * sizeof *v);
  for (i = 0; names[i]; i++)
    {
      size_t l = strlen (names[i]);

      /* Temp files of a write in progress are not tokens.  */
      if (l < 6 || strcmp (names[i] + l - 5, ".json") != 0 || names[i][0] == '.')
        continue;
      if (load_token (dirfd, names[i], &v[count], NULL, err) < 0)
        {
          while (count)
            esbx_token_free (v[--count]);
          free (v);
          return -1;
        }
      count++;
    }
  esbx_sort (v, count, sizeof *v, cmp_token);
  *out = v;
  *n = count;
  return 0;
}

/* Open the tokens directory into *DIRFD and take its lock (returned):
   revoke and bind hold it, so a revoked token is never written back.  */
static int
lock_tokens_dir (esbx_store_t *store, int *dirfd, esbx_error_t *err)
{
  *dirfd = open_tokens_dir (store, err);
  if (*dirfd < 0)
    return -1;
  return esbx_lock_at (*dirfd, LOCK_FILE, true, true, err);
}

int
esbx_token_revoke (esbx_store_t *store, const char *id, esbx_error_t *err)
{
  _cleanup_close_ int dirfd = -1, lock = -1;
  _cleanup_free_ char *file = NULL;

  if (!token_id_valid (id))
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "token `%s`: an id is %d lower-case hex digits", id,
                                 TOKEN_ID_LEN * 2);
  lock = lock_tokens_dir (store, &dirfd, err);
  if (lock < 0)
    return -1;
  file = xasprintf ("%s.json", id);
  if (unlinkat (dirfd, file, 0) < 0)
    {
      if (errno == ENOENT)
        return esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0, "token `%s` does not exist", id);
      return esbx_make_error (err, errno, "revoke token `%s`", id);
    }
  free (file);
  file = xasprintf ("%s.lock", id);
  unlinkat (dirfd, file, 0);
  return esbx_fsync_at (dirfd, ".", err);
}

int
esbx_token_bind_project (esbx_store_t *store, struct esbx_token *t, esbx_error_t *err)
{
  _cleanup_close_ int dirfd = -1, lock = -1;
  _cleanup_free_ char *file = NULL, *doc = NULL;
  _cleanup_json_ json_t *rec = NULL;
  const char *bound;
  size_t len;

  if (t->project == NULL || t->project_id || !esbx_project_exists (store, t->project))
    return 0;
  lock = lock_tokens_dir (store, &dirfd, err);
  if (lock < 0)
    return -1;
  file = xasprintf ("%s.json", t->id);
  if (!esbx_exists_at (dirfd, file))
    return esbx_make_error (err, 0, "token `%s` was revoked", t->id);
  rec = json_parse_file_at (dirfd, file, err);
  if (rec == NULL)
    return esbx_error_wrap (err, "token record `%s`", file);
  /* Another request of this token may have bound it meanwhile.  */
  bound = json_get_string (rec, "project_id");
  if (bound)
    {
      t->project_id = xstrdup (bound);
      return 0;
    }
  if (esbx_project_id (store, t->project, &t->project_id, err) < 0)
    return esbx_error_wrap (err, "token `%s`", t->id);
  json_set_string (rec, "project_id", t->project_id);
  doc = json_serialize (rec, true, &len);
  if (esbx_write_file_atomic_at (dirfd, file, doc, len, 0600, err) < 0)
    return esbx_error_wrap (err, "token `%s`", t->id);
  return 0;
}

int
esbx_token_holdings (esbx_store_t *store, const char *id, size_t *sessions, size_t *egress,
                     esbx_error_t *err)
{
  _cleanup_sessions_ struct esbx_sessions it = { 0 };
  struct esbx_session *s;

  *sessions = *egress = 0;
  if (esbx_sessions_open (store, NULL, &it, err) < 0)
    return -1;
  while ((s = esbx_sessions_next (&it)))
    {
      const char *by = json_get_string (s->record, "token");

      if (by && strcmp (by, id) == 0)
        {
          (*sessions)++;
          if (s->network && strcmp (s->network, "egress") == 0)
            (*egress)++;
        }
    }
  return 0;
}

int
esbx_token_lock (esbx_store_t *store, const char *id, esbx_error_t *err)
{
  _cleanup_close_ int dirfd = -1;
  _cleanup_free_ char *file = NULL;

  if (!token_id_valid (id))
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "token `%s`: not an id", id);
  dirfd = open_tokens_dir (store, err);
  if (dirfd < 0)
    return -1;
  file = xasprintf ("%s.lock", id);
  return esbx_lock_at (dirfd, file, true, true, err);
}

int
esbx_token_verify (esbx_store_t *store, const char *secret, struct esbx_token **out,
                   esbx_error_t *err)
{
  _cleanup_close_ int dirfd = -1;
  _cleanup_strv_ char **names = NULL;
  char hash[ESBX_SHA256_HEX_LEN + 1];
  struct esbx_token *found = NULL;
  size_t i;

  if (strlen (secret) > MAX_TOKEN_LEN || !esbx_has_prefix (secret, TOKEN_PREFIX))
    return esbx_make_error (err, 0, "malformed token");
  esbx_sha256_buf (secret, strlen (secret), hash);
  dirfd = open_tokens_dir (store, err);
  if (dirfd < 0)
    return -1;
  names = esbx_list_dir_at (dirfd, ".", err);
  if (names == NULL)
    return -1;
  /* Compare against every record, even after a match, so that the time
     taken does not depend on which token matched.  */
  for (i = 0; names[i]; i++)
    {
      _cleanup_free_ char *stored = NULL;
      struct esbx_token *t = NULL;
      esbx_error_t e = NULL;
      size_t l = strlen (names[i]);

      if (l < 6 || strcmp (names[i] + l - 5, ".json") != 0 || names[i][0] == '.')
        continue;
      if (load_token (dirfd, names[i], &t, &stored, &e) < 0)
        {
          esbx_error_free (&e);
          continue;
        }
      if (esbx_ct_streq (stored, hash) && found == NULL)
        found = t;
      else
        esbx_token_free (t);
    }
  if (found == NULL)
    return esbx_make_error (err, 0, "unknown or revoked token");
  if (found->expires && (int64_t)time (NULL) >= found->expires)
    {
      int r = esbx_make_error (err, 0, "token `%s` expired", found->id);
      esbx_token_free (found);
      return r;
    }
  *out = found;
  return 0;
}
