#include "dl.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void
clear (const struct esbx_dl_symbol *symbols, size_t n)
{
  void *none = NULL;

  for (size_t i = 0; i < n; i++)
    memcpy (symbols[i].slot, &none, sizeof none);
}

void *
esbx_dl_load (const char *lib, const struct esbx_dl_symbol *symbols, size_t n, char *error,
              size_t len)
{
  void *handle = dlopen (lib, RTLD_NOW | RTLD_LOCAL);

  if (handle == NULL)
    {
      snprintf (error, len, "%s", dlerror ());
      return NULL;
    }
  for (size_t i = 0; i < n; i++)
    {
      void *sym = dlsym (handle, symbols[i].name);

      if (sym == NULL)
        {
          snprintf (error, len, "%s has no `%s`", lib, symbols[i].name);
          clear (symbols, n);
          dlclose (handle);
          return NULL;
        }
      /* A function pointer is stored through memcpy: ISO C has no
         conversion between object and function pointers.  */
      memcpy (symbols[i].slot, &sym, sizeof sym);
    }
  return handle;
}

void
esbx_dl_need (int (*load) (esbx_error_t *err))
{
  esbx_error_t err = NULL;

  if (load (&err) == 0)
    return;
  fprintf (stderr, "esbx: %s\n", err->msg);
  abort ();
}
