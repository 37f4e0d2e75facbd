/* liblayerstore internals shared between its files (not installed).  */
#ifndef ESBX_LAYERSTORE_INTERNAL_H
#define ESBX_LAYERSTORE_INTERNAL_H

#include "layerstore.h"

/* Mount an overlay at TARGET from LOWERS (absolute diff paths, bottom to
   top).  UPPER and WORK may be NULL for a read-only view.  Uses fsconfig
   `lowerdir+` where the kernel has it, relative short paths otherwise.  */
int esbx_mount_overlay (char *const *lowers, size_t n, const char *upper, const char *work,
                        const char *target, esbx_error_t *err);
/* Unmount TARGET (lazily when it is busy and LAZY is set).  */
int esbx_unmount (const char *target, bool lazy, esbx_error_t *err);
bool esbx_is_mountpoint (const char *path);

/* Absolute diff paths of PROJECT's layers from the bottom up to and including
   UPTO (an id), then the layers in EXTRA (ids, may be NULL).  */
int esbx_stack_lowers (esbx_store_t *store, const char *project, const char *upto,
                       char *const *extra, char ***paths, size_t *n, esbx_error_t *err);

/* A directory under ROOT/tmp, locked (flock) for as long as the returned fd
   is open so that gc leaves it alone.  *path receives its absolute path.  */
int esbx_store_tmpdir (esbx_store_t *store, const char *prefix, char **path, esbx_error_t *err);

/* Append C (owned members moved) to CS.  */
void esbx_changeset_push (struct esbx_changeset *cs, struct esbx_change *c);
void esbx_changeset_sort (struct esbx_changeset *cs);
const struct esbx_change *esbx_changeset_find (const struct esbx_changeset *cs, const char *path);

#endif
