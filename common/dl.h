/* Libraries loaded on first use (libarchive, libgit2, libcurl): a verb
   that does not need one does not pay for its loading.  */
#ifndef ESBX_DL_H
#define ESBX_DL_H

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

#endif
