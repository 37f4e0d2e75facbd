#include "curl.h"

#include "dl.h"
#include "utils.h"

#include <pthread.h>
#include <string.h>

#define LIBCURL "libcurl.so.4"

struct esbx_curl esbx_curl;
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;

static int
load_locked (const char *who, esbx_error_t *err)
{
  struct esbx_curl c = { 0 };
  const struct esbx_dl_symbol symbols[] = {
    { "curl_easy_init", &c.easy_init },
    { "curl_easy_setopt", &c.easy_setopt },
    { "curl_easy_perform", &c.easy_perform },
    { "curl_easy_getinfo", &c.easy_getinfo },
    { "curl_easy_cleanup", &c.easy_cleanup },
    { "curl_easy_strerror", &c.easy_strerror },
    { "curl_slist_append", &c.slist_append },
    { "curl_slist_free_all", &c.slist_free_all },
    { "curl_multi_init", &c.multi_init },
    { "curl_multi_setopt", &c.multi_setopt },
    { "curl_multi_add_handle", &c.multi_add_handle },
    { "curl_multi_remove_handle", &c.multi_remove_handle },
    { "curl_multi_perform", &c.multi_perform },
    { "curl_multi_poll", &c.multi_poll },
    { "curl_multi_info_read", &c.multi_info_read },
    { "curl_multi_cleanup", &c.multi_cleanup },
    { "curl_multi_strerror", &c.multi_strerror },
  };
  char why[512];

  if (esbx_curl.handle)
    return 0;
  c.handle = esbx_dl_load (LIBCURL, symbols, ARRAY_SIZE (symbols), why, sizeof why);
  if (c.handle == NULL)
    return esbx_make_error (err, 0, "%s needs %s (apt-get install libcurl4): %s", who, LIBCURL,
                            why);
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
