/* esbx: one request as a libcurl easy handle, set up and finished by
   http.c; run by esbx_http_do alone or by http_multi.c with others.
   Shared by those two files only.  */
#ifndef ESBX_HTTP_EASY_H
#define ESBX_HTTP_EASY_H

#include "curl.h"
#include "http_client.h"

struct esbx_http_transfer
{
  const struct esbx_http_request *rq;
  struct esbx_http_response *rs;
  size_t sent;
  uint64_t written; /* into the request's OUT_FD */
  int write_errno;
  bool too_large; /* the answer kept in memory passed ESBX_HTTP_BODY_MAX */
};

struct esbx_http_easy
{
  CURL *curl; /* its CURLOPT_PRIVATE is this struct */
  struct curl_slist *headers;
  struct esbx_http_transfer t;
  char errbuf[CURL_ERROR_SIZE];
  char *origin;
};

/* An easy handle for RQ, answer into RS (both outlive E): headers, auth,
   CA, client certificate and timeouts as every request has them.  */
int esbx_http_easy_setup (struct esbx_http_easy *e, const struct esbx_http_request *rq,
                          struct esbx_http_response *rs, esbx_error_t *err);
/* After the transfer ended with RC: the status into the response, or the
   error "ORIGIN: cause"; E is freed either way.  */
int esbx_http_easy_finish (struct esbx_http_easy *e, CURLcode rc, esbx_error_t *err);

#endif
