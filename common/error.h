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
  ESBX_EXIT_CONFLICT = 3, /* upstream changed a path: rebase, then publish again */
  ESBX_EXIT_UNMERGED = 4, /* a path rebase could not merge waits for a person */
};

/* What went wrong, set where the error is made.  The exit status of the
   CLI (esbx_error_exit_status) and the HTTP status of esbxd
   (esbx_http_status_of_error) are both mapped from it, each in one place.  */
enum esbx_error_kind
{
  ESBX_ERR_FAILED = 0,     /* anything else: a system call, the disk, a child */
  ESBX_ERR_USAGE,          /* bad input: an option, a name, a request body */
  ESBX_ERR_NOT_FOUND,      /* the named object does not exist */
  ESBX_ERR_EXISTS,         /* an object of that name exists already */
  ESBX_ERR_CONFLICT,       /* publish or rebase met changes made meanwhile */
  ESBX_ERR_FORBIDDEN,      /* refused by a rule, whatever the input */
  ESBX_ERR_BUSY,           /* in use now: a holder runs, a lock is held */
  ESBX_ERR_TOO_LARGE,      /* over a limit of size or count */
  ESBX_ERR_EXEC_FAILED,    /* the command of an exec could not be run (126) */
  ESBX_ERR_EXEC_NOT_FOUND, /* the command of an exec was not found (127) */
  ESBX_ERR_UNMERGED,       /* paths a rebase left unmerged are not resolved (4) */
};

struct esbx_error
{
  int status; /* errno of the cause, 0 when there is none.  */
  enum esbx_error_kind kind;
  char *msg;
};
typedef struct esbx_error *esbx_error_t;

/* Fill *err (which must be NULL) and return -1.  The kind follows from
   STATUS: ENOENT and ESRCH not-found, EEXIST and ENOTEMPTY exists, EPERM,
   EACCES, ELOOP and EXDEV forbidden, EBUSY busy, E2BIG, EFBIG and
   ENAMETOOLONG too-large, else failed.  */
int esbx_make_error (esbx_error_t *err, int status, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

/* Same, of kind KIND.  */
int esbx_make_error_kind (esbx_error_t *err, enum esbx_error_kind kind, int status, const char *fmt,
                          ...) __attribute__ ((format (printf, 4, 5)));

/* The exit status of the CLI contract for ERR: 2 usage, 3 conflict, 4
   unmerged, 126 and 127 for a command that could not run, 1 otherwise.  */
int esbx_error_exit_status (const struct esbx_error *err);
/* The kind an exit status stands for (an answer of an older gateway).  */
enum esbx_error_kind esbx_error_kind_of_exit (int code);
/* The kind NAME names (esbx_error_kind_name's), or ESBX_ERR_FAILED.  */
enum esbx_error_kind esbx_error_kind_of_name (const char *name);
/* "not-found", "usage", ...: the name of a kind.  */
const char *esbx_error_kind_name (enum esbx_error_kind kind);

/* Prefix the message of *err with context: "publish `s1`: <old message>".
   Returns -1 so that `return esbx_error_wrap (err, ...)` reads naturally.  */
int esbx_error_wrap (esbx_error_t *err, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));

void esbx_error_free (esbx_error_t *err);

/* Print "esbx: MSG" to stream, free the error, return its exit status.  */
int esbx_error_report (esbx_error_t *err, FILE *stream, const char *prog);

#endif
