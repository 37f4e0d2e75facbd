/* esbx: one error object for the whole code base.
 *
 * A failing function takes `esbx_error_t *err`, fills it and returns < 0 (or
 * NULL); on success it leaves `err` untouched.  Callers add context with
 * esbx_error_wrap() and only main() decides to exit.  */
#ifndef ESBX_ERROR_H
#define ESBX_ERROR_H

#include <stdio.h>

/* Exit statuses of the CLI contract.  */
enum
{
  ESBX_EXIT_OK = 0,
  ESBX_EXIT_ERROR = 1,
  ESBX_EXIT_USAGE = 2,
  ESBX_EXIT_CONFLICT = 3,
};

struct esbx_error
{
  int status; /* errno of the cause, 0 when there is none.  */
  int code;   /* exit status class: ESBX_EXIT_*.  */
  char *msg;
};
typedef struct esbx_error *esbx_error_t;

/* Fill *err (which must be NULL) and return -1.  */
int esbx_make_error (esbx_error_t *err, int status, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

/* Same, with an exit class other than ESBX_EXIT_ERROR.  */
int esbx_make_error_code (esbx_error_t *err, int code, int status, const char *fmt, ...)
    __attribute__ ((format (printf, 4, 5)));

/* Prefix the message of *err with context: "publish `s1`: <old message>".
   Returns -1 so that `return esbx_error_wrap (err, ...)` reads naturally.  */
int esbx_error_wrap (esbx_error_t *err, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));

void esbx_error_free (esbx_error_t *err);

/* Print "esbx: MSG" to stream, free the error, return its exit class.  */
int esbx_error_report (esbx_error_t *err, FILE *stream, const char *prog);

#endif
