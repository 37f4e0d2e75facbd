/* The directories a stack's lookups walked, kept open for the next ones
   (lookup_cache.c).  Lookups come in tree order (a scan, a listing, the
   .gitignore of each directory): a/b/y after a/b/x reuses a/b instead of
   walking again from each layer's root.  Layers are read-only while a
   stack is open (a publish stages into a new directory), so what was
   walked stays true for the stack's life.  */
#ifndef ESBX_LAYERSTORE_LOOKUP_CACHE_H
#define ESBX_LAYERSTORE_LOOKUP_CACHE_H

#include "internal.h"

#include <stdbool.h>
#include <stddef.h>

enum esbx_probe
{
  ESBX_PROBE_MISSING, /* this layer says nothing: look below */
  ESBX_PROBE_FOUND,
  ESBX_PROBE_GONE, /* whiteout or a non-directory above: hidden for good */
};

/* Directory DIR (its first LEN bytes, components joined by `/`; empty for
   the root) of layer LAYER of ST.  FOUND: *FD is its fd, valid until the
   next walk of ST and not to be closed.  *STOP is set when DIR or a
   directory above it is opaque (for MISSING: one above the missing
   component), so that lower layers must not be consulted.  No symlink is
   followed: one on the way is a non-directory (GONE).  */
enum esbx_probe esbx_stack_walk (struct esbx_stack *st, size_t layer, const char *dir, size_t len,
                                 int *fd, bool *stop);
void esbx_stack_cache_free (struct esbx_stack_cache *c);

#endif
