/* Inside the git room: the other repository of push-git and pull-git.  */
#ifndef ESBX_GIT_REMOTE_H
#define ESBX_GIT_REMOTE_H

#include "error.h"
#include "layerstore.h"

#include <git2.h>
#include <stdbool.h>

/* A connection to a remote repository, from a scratch repository of the
   store's own whose objects are the layers' (git_remote.c).  */
struct esbx_git_remote
{
  char *url;      /* what libgit2 connects to */
  char *shown;    /* the remote as messages name it (never a password) */
  char *secret;   /* the secret's name, or NULL */
  char *user;     /* and what it holds */
  char *password; /* zeroed when closed */
  size_t password_len;
  unsigned attempts; /* the credentials were asked for this often */
  char *refused;     /* "REF: REASON" of a ref update the remote refused */
  char *tmp;         /* the scratch repository */
  int tmpfd;
  git_repository *repo;
  git_remote *remote;
};

/* PROJECT exists and is a git project, for VERB (push-git, pull-git).  */
int esbx_git_sync_project (esbx_store_t *store, const char *project, const char *verb,
                           esbx_error_t *err);

/* Check SPEC (a path or a URL: http, https, ssh, git, file; URLS_ONLY: not a
   path nor file://; never with a password in it), read SECRET (one PROJECT
   may use) and make the scratch repository over the layers IDS[0..N) of
   PROJECT.  */
int esbx_git_remote_open (esbx_store_t *store, const char *project, const char *spec,
                          const char *secret, bool urls_only, char *const *ids, size_t n,
                          struct esbx_git_remote *r, esbx_error_t *err);
void esbx_git_remote_close (struct esbx_git_remote *r);
/* The callbacks every operation on R takes: credentials from the secret
   (once: asked again, they were refused), refused ref updates noted.  */
void esbx_git_remote_callbacks (struct esbx_git_remote *r, git_remote_callbacks *cb);
/* Connect for DIR (fetch or push) and list the remote's refs.  */
int esbx_git_remote_connect (struct esbx_git_remote *r, git_direction dir, esbx_error_t *err);
/* The remote's ref NAME once connected, or NULL.  */
const git_remote_head *esbx_git_remote_ref (struct esbx_git_remote *r, const char *name);
/* The error of a failed libgit2 call on R: WHAT, then why (the remote
   refused the secret's credentials, wanted some, or libgit2's message).  */
int esbx_git_remote_fail (struct esbx_git_remote *r, const char *what, esbx_error_t *err);

/* Is COMMIT (a layer's) ANCESTOR itself or a descendant of it in REPO?  */
bool esbx_git_descends (git_repository *repo, const git_oid *commit, const git_oid *ancestor);

/* With the project lock held: land COMMIT of REPO (which holds the head's
   commit too) as a layer on the head of IDS[0..*N) (git_land.c), appended
   to *IDS; SOURCE names the repository in the layer's labels.  */
int esbx_git_land (esbx_store_t *store, const char *project, git_repository *repo,
                   const git_oid *commit, const char *source, char ***ids, size_t *n,
                   char **layer_id, esbx_error_t *err);

#endif
