/* What esbx shows of a session's secrets: each value replaced by ***NAME***
   (secret_redact.c), in an exec's output and events, `ps`, diff's names
   and link targets, and the errors that name them.  */
#ifndef ESBX_SECRET_REDACT_H
#define ESBX_SECRET_REDACT_H

#include "layerstore.h"

#include <stdbool.h>
#include <stddef.h>

/* One stream's state: the secrets (borrowed) and the bytes held back
   because they could begin a value the next piece completes.  */
struct esbx_redactor
{
  const struct esbx_secret *v;
  size_t n;
  char *held;
  size_t nheld;
};

void esbx_redactor_init (struct esbx_redactor *r, const struct esbx_secret *v, size_t n);
void esbx_redactor_free (struct esbx_redactor *r);
/* The redacted text of what was held followed by IN (LEN bytes), minus a
   tail that may start a value, held for the next call; LAST: the end of
   the stream, nothing held.  Returns an owned buffer of *OUTLEN bytes
   (NUL-terminated, may hold NULs).  */
char *esbx_redact (struct esbx_redactor *r, const char *in, size_t len, bool last, size_t *outlen);
/* S with every value replaced: owned, NUL-terminated.  */
char *esbx_redact_string (const struct esbx_secret *v, size_t n, const char *s);
/* The paths and link targets of CS, a change set of SESSION, with the
   values of the session's secrets (given or kept) replaced: what diff
   shows.  Fails, changing nothing, when the secrets cannot be read.  */
int esbx_redact_changes (esbx_store_t *store, const char *session, struct esbx_changeset *cs,
                         esbx_error_t *err);

#endif
