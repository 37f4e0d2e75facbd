/* The other repository of push-git and pull-git: which remotes are taken,
 * the credentials a secret holds, and a scratch repository to talk from.
 *
 * A remote is a local path or a URL libgit2 speaks (http, https, ssh, git,
 * file).  A password never comes with it: a URL holding one is refused,
 * and credentials come from an esbx secret ("USER:PASSWORD", or a token
 * alone, which goes as the password), given to libgit2 when the remote
 * asks and once only: asked again, they were refused.  With a secret no
 * redirect is followed, so its value goes to the host the URL names and
 * to no other.  Over the gateway (URLS_ONLY) local paths and file:// are
 * refused: they would read and write host paths with the daemon's rights.
 *
 * libgit2 pushes only from a repository's refs and fetches only into one:
 * the scratch repository is a bare one under ROOT/tmp whose
 * objects/info/alternates names each layer's `.git/objects`, so it holds
 * the project's whole history without a copy, and what a fetch brings is
 * its own until the layers take it.  */
#include "internal.h"
#include "git.h"
#include "git_remote.h"
#include "fs.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const schemes[] = { "http", "https", "ssh", "git", "file" };

/* Check SPEC; *URL what libgit2 gets (a path made absolute).  */
static int
check_spec (const char *spec, bool urls_only, char **url, esbx_error_t *err)
{
  const char *sep = strstr (spec, "://");

  *url = NULL;
  if (spec[0] == '\0')
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "the remote is empty");
  if (sep)
    {
      size_t scheme = (size_t)(sep - spec), i;
      const char *host = sep + 3, *end = host + strcspn (host, "/?#");
      const char *at = NULL;

      for (i = 0; i < ARRAY_SIZE (schemes); i++)
        if (strlen (schemes[i]) == scheme && strncmp (spec, schemes[i], scheme) == 0)
          break;
      if (i == ARRAY_SIZE (schemes))
        return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                     "remote `%.*s://...`: not a scheme git speaks (http, https, "
                                     "ssh, git, file)",
                                     (int)scheme, spec);
      if (urls_only && strcmp (schemes[i], "file") == 0)
        return esbx_make_error_kind (
            err, ESBX_ERR_FORBIDDEN, 0,
            "remote `%s`: a file:// remote is a path of the daemon's host, "
            "not offered over the gateway",
            spec);
      for (const char *p = host; p < end; p++)
        if (*p == '@')
          at = p;
      if (at && memchr (host, ':', (size_t)(at - host)))
        return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                     "remote `%.*s://...`: the URL holds a password; keep it in "
                                     "a secret (esbx secret create NAME, then --secret NAME)",
                                     (int)scheme, spec);
      *url = xstrdup (spec);
      return 0;
    }
  if (urls_only)
    return esbx_make_error_kind (err, ESBX_ERR_FORBIDDEN, 0,
                                 "remote `%s`: a local path is a path of the daemon's host, not "
                                 "offered over the gateway (name a URL)",
                                 spec);
  {
    char buf[PATH_MAX];

    if (realpath (spec, buf) == NULL)
      return esbx_make_error (err, errno, "remote `%s`", spec);
    *url = xstrdup (buf);
  }
  return 0;
}

/* The secret NAME as USER and PASSWORD.  */
static int
read_secret (esbx_store_t *store, const char *project, const char *name, struct esbx_git_remote *r,
             esbx_error_t *err)
{
  char *value = NULL, *colon;
  size_t len;

  if (esbx_secret_read_for (store, name, project, &value, &len, err) < 0)
    return -1;
  if (len == 0 || memchr (value, '\0', len) || strpbrk (value, "\r\n"))
    {
      explicit_bzero (value, len);
      free (value);
      return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                   "secret `%s`: expected USER:PASSWORD or a token on one line",
                                   name);
    }
  r->secret = xstrdup (name);
  colon = strchr (value, ':');
  if (colon)
    {
      r->user = xstrndup (value, (size_t)(colon - value));
      r->password = xstrdup (colon + 1);
    }
  else
    r->password = xstrdup (value);
  r->password_len = strlen (r->password);
  explicit_bzero (value, len);
  free (value);
  return 0;
}

/* A bare repository in the store's tmp whose objects are the layers'.  */
static int
make_scratch (esbx_store_t *store, const char *project, char *const *ids, size_t n,
              struct esbx_git_remote *r, esbx_error_t *err)
{
  _cleanup_free_ char *text = NULL;
  _cleanup_close_ int info = -1;
  git_repository *init = NULL;
  size_t len = 0, i;

  r->tmpfd = esbx_store_tmpdir (store, "git-remote", &r->tmp, err);
  if (r->tmpfd < 0)
    return -1;
  if (git_repository_init (&init, r->tmp, 1) < 0)
    return esbx_make_error (err, 0, "scratch repository: %s", esbx_git_error ());
  git_repository_free (init);
  for (i = 0; i < n; i++)
    len += strlen (store->root) + strlen (project) + strlen (ids[i]) + 64;
  text = xmalloc0 (len + 1);
  for (i = 0; i < n; i++)
    {
      _cleanup_free_ char *dir
          = xasprintf ("%s/projects/%s/layers/%s/diff/.git/objects", store->root, project, ids[i]);
      if (access (dir, F_OK) == 0)
        {
          strcat (text, dir);
          strcat (text, "\n");
        }
    }
  info = esbx_open_dir_at (r->tmpfd, "objects/info", err);
  if (info < 0
      || esbx_write_file_atomic_at (info, "alternates", text, strlen (text), 0644, err) < 0)
    return -1;
  if (git_repository_open_ext (&r->repo, r->tmp,
                               GIT_REPOSITORY_OPEN_NO_SEARCH | GIT_REPOSITORY_OPEN_BARE, NULL)
      < 0)
    return esbx_make_error (err, 0, "scratch repository: %s", esbx_git_error ());
  return 0;
}

int
esbx_git_sync_project (esbx_store_t *store, const char *project, const char *verb,
                       esbx_error_t *err)
{
  if (!esbx_project_exists (store, project))
    return esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0, "project `%s` does not exist",
                                 project);
  if (!esbx_project_is_git (store, project))
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "%s `%s`: the project was not made from a git repository "
                                 "(project create --from-git)",
                                 verb, project);
  return 0;
}

int
esbx_git_remote_open (esbx_store_t *store, const char *project, const char *spec,
                      const char *secret, bool urls_only, char *const *ids, size_t n,
                      struct esbx_git_remote *r, esbx_error_t *err)
{
  memset (r, 0, sizeof *r);
  r->tmpfd = -1;
  if (esbx_git_load (err) < 0 || check_spec (spec, urls_only, &r->url, err) < 0)
    return -1;
  r->shown = xstrdup (spec);
  if (secret && read_secret (store, project, secret, r, err) < 0)
    return -1;
  if (make_scratch (store, project, ids, n, r, err) < 0)
    return -1;
  if (git_remote_create_anonymous (&r->remote, r->repo, r->url) < 0)
    return esbx_make_error (err, 0, "remote `%s`: %s", r->shown, esbx_git_error ());
  return 0;
}

void
esbx_git_remote_close (struct esbx_git_remote *r)
{
  esbx_error_t ignored = NULL;

  if (r->remote)
    git_remote_free (r->remote);
  git_repository_free (r->repo);
  if (r->tmp && esbx_rm_rf_at (AT_FDCWD, r->tmp, &ignored) < 0)
    esbx_error_free (&ignored);
  if (r->tmpfd >= 0)
    close (r->tmpfd);
  if (r->password)
    explicit_bzero (r->password, r->password_len);
  free (r->password);
  free (r->user);
  free (r->secret);
  free (r->url);
  free (r->shown);
  free (r->refused);
  free (r->tmp);
  memset (r, 0, sizeof *r);
  r->tmpfd = -1;
}

static int
credentials (git_credential **out, const char *url, const char *user_from_url, unsigned int allowed,
             void *payload)
{
  struct esbx_git_remote *r = payload;

  (void)url;
  r->attempts++;
  if (r->password == NULL || !(allowed & GIT_CREDENTIAL_USERPASS_PLAINTEXT))
    return GIT_PASSTHROUGH;
  /* Asked again: the remote refused them; do not loop.  */
  if (r->attempts > 1)
    return GIT_EAUTH;
  return git_credential_userpass_plaintext_new (out,
                                                r->user         ? r->user
                                                : user_from_url ? user_from_url
                                                                : "x-access-token",
                                                r->password);
}

static int
pushed_ref (const char *refname, const char *status, void *payload)
{
  struct esbx_git_remote *r = payload;

  if (status)
    {
      free (r->refused);
      r->refused = xasprintf ("%s: %s", refname, status);
    }
  return 0;
}

void
esbx_git_remote_callbacks (struct esbx_git_remote *r, git_remote_callbacks *cb)
{
  git_remote_init_callbacks (cb, GIT_REMOTE_CALLBACKS_VERSION);
  cb->credentials = credentials;
  cb->push_update_reference = pushed_ref;
  cb->payload = r;
}

int
esbx_git_remote_connect (struct esbx_git_remote *r, git_direction dir, esbx_error_t *err)
{
  git_remote_connect_options o;

  git_remote_connect_options_init (&o, GIT_REMOTE_CONNECT_OPTIONS_VERSION);
  esbx_git_remote_callbacks (r, &o.callbacks);
  o.follow_redirects = r->password ? GIT_REMOTE_REDIRECT_NONE : GIT_REMOTE_REDIRECT_INITIAL;
  if (git_remote_connect_ext (r->remote, dir, &o) < 0)
    return esbx_git_remote_fail (r, "connect", err);
  return 0;
}

const git_remote_head *
esbx_git_remote_ref (struct esbx_git_remote *r, const char *name)
{
  const git_remote_head **heads = NULL;
  size_t n = 0, i;

  if (git_remote_ls (&heads, &n, r->remote) < 0)
    return NULL;
  for (i = 0; i < n; i++)
    if (strcmp (heads[i]->name, name) == 0)
      return heads[i];
  return NULL;
}

int
esbx_git_remote_fail (struct esbx_git_remote *r, const char *what, esbx_error_t *err)
{
  if (r->password && r->attempts > 1)
    return esbx_make_error_kind (err, ESBX_ERR_FORBIDDEN, 0,
                                 "%s `%s`: the remote refused the credentials of secret `%s`", what,
                                 r->shown, r->secret);
  if (r->password == NULL && r->attempts > 0)
    return esbx_make_error_kind (err, ESBX_ERR_FORBIDDEN, 0,
                                 "%s `%s`: the remote asks for credentials; name a secret that "
                                 "holds them (--secret NAME)",
                                 what, r->shown);
  return esbx_make_error (err, 0, "%s `%s`: %s", what, r->shown, esbx_git_error ());
}

bool
esbx_git_descends (git_repository *repo, const git_oid *commit, const git_oid *ancestor)
{
  return git_oid_equal (commit, ancestor) || git_graph_descendant_of (repo, commit, ancestor) == 1;
}
