/* libgit2, loaded on first use: see git.h.  */
#include "git.h"

#include <dlfcn.h>
#include <git2.h>
#include <git2/sys/hashsig.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIBGIT2 "libgit2.so.1.5"

/* F (RETURN, NAME, PARAMS, ARGS) for a function with a value, V for a void
   one, with libgit2's own prototypes (its headers are included above, so
   a mismatch does not compile).  */
#define GIT_FUNCTIONS(F, V)                                                                        \
  F (int, git_libgit2_init, (void), ())                                                            \
  F (const git_error *, git_error_last, (void), ())                                                \
  F (int, git_hashsig_create,                                                                      \
     (git_hashsig * *out, const char *buf, size_t buflen, git_hashsig_option_t opts),              \
     (out, buf, buflen, opts))                                                                     \
  V (void, git_hashsig_free, (git_hashsig * sig), (sig))                                           \
  F (int, git_hashsig_compare, (const git_hashsig *a, const git_hashsig *b), (a, b))

#define MEMBER(ret, name, params, args) ret (*name) params;
static struct
{
  GIT_FUNCTIONS (MEMBER, MEMBER)
} api;
#undef MEMBER

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static char load_error[512];
static int loaded;

static int
load_symbol (void *handle, void *fn, const char *name)
{
  void *sym = dlsym (handle, name);

  if (sym == NULL)
    {
      snprintf (load_error, sizeof load_error, "%s has no `%s`", LIBGIT2, name);
      return -1;
    }
  memcpy (fn, &sym, sizeof sym);
  return 0;
}

static void
load (void)
{
  void *handle = dlopen (LIBGIT2, RTLD_NOW | RTLD_LOCAL);

  if (handle == NULL)
    {
      snprintf (load_error, sizeof load_error, "%s", dlerror ());
      return;
    }
#define LOAD(ret, name, params, args)                                                              \
  if (load_symbol (handle, &api.name, #name) < 0)                                                  \
    goto fail;
  GIT_FUNCTIONS (LOAD, LOAD)
#undef LOAD
  if (api.git_libgit2_init () < 0)
    {
      snprintf (load_error, sizeof load_error, "git_libgit2_init failed");
      goto fail;
    }
  loaded = 1;
  return;

fail:
  memset (&api, 0, sizeof api);
  dlclose (handle);
}

int
esbx_git_load (esbx_error_t *err)
{
  pthread_once (&load_once, load);
  if (!loaded)
    return esbx_make_error (err, 0, "cannot load %s (apt-get install libgit2-1.5): %s", LIBGIT2,
                            load_error);
  return 0;
}

const char *
esbx_git_error (void)
{
  const git_error *e = loaded ? api.git_error_last () : NULL;

  return e && e->message ? e->message : "unknown";
}

/* Reached only by a caller that did not call esbx_git_load first (a
   programming error) when the library cannot be loaded.  */
static void
need_api (void)
{
  esbx_error_t err = NULL;

  if (esbx_git_load (&err) == 0)
    return;
  fprintf (stderr, "esbx: %s\n", err->msg);
  abort ();
}

#define FORWARD(ret, name, params, args)                                                           \
  ret name params                                                                                  \
  {                                                                                                \
    need_api ();                                                                                   \
    return api.name args;                                                                          \
  }
#define FORWARD_VOID(ret, name, params, args)                                                      \
  void name params                                                                                 \
  {                                                                                                \
    need_api ();                                                                                   \
    api.name args;                                                                                 \
  }
GIT_FUNCTIONS (FORWARD, FORWARD_VOID)
