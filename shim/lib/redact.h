/* esbx shim: what an exec's output and events say of the session's
   secrets: each value replaced by ***NAME*** (redact.c).  */
#ifndef ESBX_REDACT_H
#define ESBX_REDACT_H

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

#endif
