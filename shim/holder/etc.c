/* The session's /etc is the host's, read-only, without its secrets
 * (shim/lib/etc_mask.c says which): each is masked in the holder's mount
 * namespace, an empty read-only tmpfs over a directory, /dev/null over a
 * file.  */
#include "root.h"
#include "etc_mask.h"

static int
mask_one (void *data, const char *path, const struct stat *st, esbx_error_t *err)
{
  (void)data;
  (void)st;
  return holder_mask (path, err);
}

int
holder_mask_etc (const char *etc, esbx_error_t *err)
{
  return esbx_etc_mask_walk (etc, mask_one, NULL, err);
}
