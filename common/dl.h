/* Libraries loaded on first use (libarchive, libgit2, libcurl): a verb
   that does not need one does not pay for its loading.  */
#ifndef ESBX_DL_H
#define ESBX_DL_H

#include "error.h"

#include <stddef.h>

/* One function of the library: its name and the function pointer object
   it is stored into.  */
struct esbx_dl_symbol
{
  const char *name;
  void *slot;
};

/* dlopen LIB (RTLD_NOW, RTLD_LOCAL) and store each of the N SYMBOLS into
   its slot.  Returns the handle, or NULL with the cause in ERROR (LEN
   bytes: dlopen's words, or "LIB has no `NAME`") and every slot cleared.  */
void *esbx_dl_load (const char *lib, const struct esbx_dl_symbol *symbols, size_t n, char *error,
                    size_t len);

/* A loaded function's forwarder finds its library loaded by LOAD (the
   loader file's esbx_*_load).  A failure here means a caller did not call
   LOAD first (a programming error) and the library cannot be loaded: the
   cause is printed and the process aborts.  */
void esbx_dl_need (int (*load) (esbx_error_t *err));

/* The forwarders of a loader file: each function of its list calls
   need_api () (the file's: esbx_dl_need with its loader), then the loaded
   function through the file's `api` table.  */
#define ESBX_DL_FORWARD(ret, name, params, args)                                                   \
  ret name params                                                                                  \
  {                                                                                                \
    need_api ();                                                                                   \
    return api.name args;                                                                          \
  }
#define ESBX_DL_FORWARD_VOID(ret, name, params, args)                                              \
  void name params                                                                                 \
  {                                                                                                \
    need_api ();                                                                                   \
    api.name args;                                                                                 \
  }

#endif
