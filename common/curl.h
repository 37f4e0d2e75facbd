/* esbx: libcurl, loaded on first use instead of linked: with the libraries
   it pulls in it added ~10 ms to every start of esbx, local verbs and
   `esbx exec` included, which never use it.  Used by the remote CLI
   (cli/remote.c) and by remote stores (http.c).  */
#ifndef ESBX_CURL_H
#define ESBX_CURL_H

#include "error.h"

#include <curl/curl.h>

struct esbx_curl
{
  void *handle;
  CURL *(*easy_init) (void);
  CURLcode (*easy_setopt) (CURL *, CURLoption, ...);
  CURLcode (*easy_perform) (CURL *);
  CURLcode (*easy_getinfo) (CURL *, CURLINFO, ...);
  void (*easy_cleanup) (CURL *);
  const char *(*easy_strerror) (CURLcode);
  struct curl_slist *(*slist_append) (struct curl_slist *, const char *);
  void (*slist_free_all) (struct curl_slist *);
  /* Several transfers at once (http_multi.c).  */
  CURLM *(*multi_init) (void);
  CURLMcode (*multi_setopt) (CURLM *, CURLMoption, ...);
  CURLMcode (*multi_add_handle) (CURLM *, CURL *);
  CURLMcode (*multi_remove_handle) (CURLM *, CURL *);
  CURLMcode (*multi_perform) (CURLM *, int *);
  CURLMcode (*multi_poll) (CURLM *, struct curl_waitfd *, unsigned int, int, int *);
  CURLMsg *(*multi_info_read) (CURLM *, int *);
  CURLMcode (*multi_cleanup) (CURLM *);
  const char *(*multi_strerror) (CURLMcode);
};

/* The loaded functions; valid once esbx_curl_load succeeded.  */
extern struct esbx_curl esbx_curl;

/* Load libcurl once (thread-safe); WHO names what needs it in the error
   ("remote mode", "remote stores").  */
int esbx_curl_load (const char *who, esbx_error_t *err);

#endif
