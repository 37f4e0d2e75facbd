/* liblayerstore: the importer, the state of one esbx_import_tree and the
   steps its confined child takes, one file each (import_*.c).  Shared by
   those files only.  */
#ifndef ESBX_LAYERSTORE_IMPORTER_H
#define ESBX_LAYERSTORE_IMPORTER_H

#include "error.h"
#include "inodes.h"
#include "json.h"

#include <archive.h>
#include <archive_entry.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define WHITEOUT_PREFIX ".wh."
#define READ_BUF        (64 * 1024)

struct importer
{
  int srcfd;  /* the archive file or the source directory */
  int destfd; /* the destination directory */
  bool root;  /* may restore owners */
  uint64_t max_bytes;
  uint64_t max_entries;
  uint64_t bytes;
  uint64_t entries;
  bool is_dir;
  bool image_layer; /* one OCI image layer: whiteout entries are skipped */
  bool skip_git;    /* ESBX_IMPORT_SKIP_GIT */
  bool warned_git;
  struct esbx_inode_set linked; /* source files with several names (directories) */
};

/* Reading FROM through our own callbacks rather than archive_read_open_fd:
   seekable zip needs a seek callback, and every pass starts from offset 0.  */
struct source
{
  int fd;
  char buf[READ_BUF];
};

static inline void
cleanup_archive_readp (struct archive **a)
{
  if (*a)
    archive_read_free (*a);
}
#define _cleanup_archive_read_ __attribute__ ((cleanup (cleanup_archive_readp)))

static inline void
cleanup_archive_writep (struct archive **a)
{
  if (*a)
    archive_write_free (*a);
}
#define _cleanup_archive_write_ __attribute__ ((cleanup (cleanup_archive_writep)))

/* Limits and names (import_check.c).  Count N more bytes, or one more entry
   in *COUNTER, against the limits.  */
int esbx_import_count_bytes (struct importer *im, uint64_t n, esbx_error_t *err);
int esbx_import_count_entry (struct importer *im, uint64_t *counter, esbx_error_t *err);
int esbx_import_check_name (const char *name, esbx_error_t *err);
/* Is REL a `.git` or below one, left out of the import (warned once)?  */
bool esbx_import_skip_git (struct importer *im, const char *rel);
int esbx_import_clean_entry_name (const char *name, char **out, esbx_error_t *err);
/* True (and *ERR freed) when *ERR says that a path does not exist.  */
bool esbx_import_missing (esbx_error_t *err);
const char *esbx_import_last_component (const char *rel);
/* Strip setuid/setgid from *MODE with a warning; 1 when there were any.  */
int esbx_import_strip_setid (const char *rel, mode_t *mode);

/* A source directory copied into the destination (import_dir.c).  */
int esbx_import_dir (struct importer *im, esbx_error_t *err);

/* Reading archives (import_archive.c).  */
void esbx_import_support_filters (struct archive *a);
int esbx_import_archive_fail (struct archive *a, const char *what, esbx_error_t *err);
/* A reader of SRC from its first byte.  */
int esbx_import_open_source (struct source *src, struct archive **out, esbx_error_t *err);
/* 1 and the next entry, 0 at the end, -1 on error.  */
int esbx_import_next_header (struct archive *a, struct archive_entry **e, esbx_error_t *err);

/* Every entry of IN written beneath the destination (import_extract.c),
   with Docker's semantics for a layer of an image as HOW says:  */
#define EXTRACT_SKIP_WHITEOUTS 1u /* `.wh.` entries are no files */
/* The layer goes over earlier ones in the destination: an entry that is
   not a directory replaces a directory there (esbx_import_make_room).  */
#define EXTRACT_REPLACE_DIRS 2u
int esbx_import_extract (struct importer *im, struct archive *in, unsigned how, esbx_error_t *err);

/* Image layers (import_whiteout.c).  */
bool esbx_import_is_whiteout (const char *name);
int esbx_import_apply_whiteouts (struct importer *im, struct archive *in, esbx_error_t *err);
int esbx_import_make_room (struct importer *im, const char *rel, esbx_error_t *err);

/* `docker save` archives (import_docker.c).  */
int esbx_import_read_manifest (struct importer *im, struct source *src, json_t **out,
                               esbx_error_t *err);
int esbx_import_docker_save (struct importer *im, struct source *src, json_t *manifest,
                             esbx_error_t *err);

#endif
