/* What a session may not read of the host's /etc (etc_mask.c).  */
#ifndef ESBX_SHIM_ETC_MASK_H
#define ESBX_SHIM_ETC_MASK_H
#include "error.h"
#include <sys/stat.h>

/* Masks PATH (ST: what lstat says of it); -1 ends the walk.  */
typedef int (*esbx_etc_mask_fn) (void *data, const char *path, const struct stat *st,
                                 esbx_error_t *err);

/* Call MASK for each entry beneath the host directory ETC that a session
   must not read, never through a symlink; 0 when ETC does not exist.  */
int esbx_etc_mask_walk (const char *etc, esbx_etc_mask_fn mask, void *data, esbx_error_t *err);

#endif
