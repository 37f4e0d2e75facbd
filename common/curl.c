#include "curl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#define LIBCURL "libcurl.so.4"

struct esbx_curl esbx_curl;
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;

static int
load_symbol (void *handle, void *fn, const char *name, esbx_error_t *err)
{
  void *sym = dlsym (handle, name);

  if (sym == NULL)
    return esbx_make_error (err, 0, "%s has no `%s`", LIBCURL, name);
  memcpy (fn, &sym, sizeof sym);
  return 0;
}

static int
load_locked (const char *who, esbx_error_t *err)
{
  struct esbx_curl c = { 0 };

  if (esbx_curl.handle)
    return 0;
  c.handle = dlopen (LIBCURL, RTLD_NOW | RTLD_LOCAL);
  if (c.handle == NULL)
    return esbx_make_error (err, 0, "%s needs %s (apt-get install libcurl4): %s", who, LIBCURL,
                            dlerror ());
  if (load_symbol (c.handle, &c.easy_init, "curl_easy_init", err) < 0
      || load_symbol (c.handle, &c.easy_setopt, "curl_easy_setopt", err) < 0
      || load_symbol (c.handle, &c.easy_perform, "curl_easy_perform", err) < 0
      || load_symbol (c.handle, &c.easy_getinfo, "curl_easy_getinfo", err) < 0
      || load_symbol (c.handle, &c.easy_cleanup, "curl_easy_cleanup", err) < 0
      || load_symbol (c.handle, &c.easy_strerror, "curl_easy_strerror", err) < 0
      || load_symbol (c.handle, &c.slist_append, "curl_slist_append", err) < 0
      || load_symbol (c.handle, &c.slist_free_all, "curl_slist_free_all", err) < 0
      || load_symbol (c.handle, &c.multi_init, "curl_multi_init", err) < 0
      || load_symbol (c.handle, &c.multi_setopt, "curl_multi_setopt", err) < 0
      || load_symbol (c.handle, &c.multi_add_handle, "curl_multi_add_handle", err) < 0
      || load_symbol (c.handle, &c.multi_remove_handle, "curl_multi_remove_handle", err) < 0
      || load_symbol (c.handle, &c.multi_perform, "curl_multi_perform", err) < 0
      || load_symbol (c.handle, &c.multi_poll, "curl_multi_poll", err) < 0
      || load_symbol (c.handle, &c.multi_info_read, "curl_multi_info_read", err) < 0
      || load_symbol (c.handle, &c.multi_cleanup, "curl_multi_cleanup", err) < 0
      || load_symbol (c.handle, &c.multi_strerror, "curl_multi_strerror", err) < 0)
    {
      dlclose (c.handle);
      return -1;
    }
  esbx_curl = c;
  return 0;
}

int
esbx_curl_load (const char *who, esbx_error_t *err)
{
  int r;

  pthread_mutex_lock (&load_lock);
  r = load_locked (who, err);
  pthread_mutex_unlock (&load_lock);
  return r;
}
