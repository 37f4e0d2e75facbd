/* esbxd: the plugin's own record of the volumes Docker made, kept under
   ROOT/plugin/ so that neither a crash of esbxd nor a restart of dockerd
   loses a volume or a mount count.  The session itself lives in the store;
   this record adds what only Docker knows: the Create options and which
   mount IDs hold the volume.  */
#ifndef ESBX_PLUGIN_DOCKER_VOLUMES_H
#define ESBX_PLUGIN_DOCKER_VOLUMES_H

#include "error.h"
#include "json.h"
#include "layerstore.h"

#include <stdint.h>

struct esbx_volume
{
  char *name;
  json_t *opts;   /* object of strings, as given to Create */
  char *created;  /* RFC 3339 */
  json_t *mounts; /* object: mount ID -> count */
};

struct esbx_volumes;

/* Open ROOT/plugin/volumes, taking ROOT/plugin/lock so that only one esbxd
   serves a store.  */
int esbx_volumes_open (esbx_store_t *store, struct esbx_volumes **out, esbx_error_t *err);
void esbx_volumes_close (struct esbx_volumes *vols);

/* Serialise requests about one volume; requests about other volumes go on.  */
void esbx_volumes_lock (struct esbx_volumes *vols, const char *name);
void esbx_volumes_unlock (struct esbx_volumes *vols, const char *name);

/* *out is NULL (and the return 0) when the plugin has no record of NAME.  */
int esbx_volume_load (struct esbx_volumes *vols, const char *name, struct esbx_volume **out,
                      esbx_error_t *err);
int esbx_volume_save (struct esbx_volumes *vols, const struct esbx_volume *vol, esbx_error_t *err);
int esbx_volume_delete (struct esbx_volumes *vols, const char *name, esbx_error_t *err);
/* Names of every recorded volume, sorted, NULL-terminated.  */
char **esbx_volumes_names (struct esbx_volumes *vols, esbx_error_t *err);

struct esbx_volume *esbx_volume_new (const char *name, const json_t *opts, const char *created);
void esbx_volume_free (struct esbx_volume *vol);
static inline void
cleanup_volumep (struct esbx_volume **v)
{
  esbx_volume_free (*v);
}
#define _cleanup_volume_ __attribute__ ((cleanup (cleanup_volumep)))

/* Mount counts: add DELTA to ID's count (dropping it at zero) and return the
   new count; the total over every ID.  */
int64_t esbx_volume_count_mount (struct esbx_volume *vol, const char *id, int64_t delta);
int64_t esbx_volume_mount_total (const struct esbx_volume *vol);

#endif
