/* libFuzzer harness: archive import (esbx_import_tree), the code behind
 * `project create --from ARCHIVE`.  Each input is written to a temporary
 * file and imported into a fresh temporary directory with small limits
 * (ESBX_IMPORT_MAX_BYTES=1M, ESBX_IMPORT_MAX_ENTRIES=2000).
 *
 * The extraction runs in a child process (import.c): libFuzzer sees the
 * parent's coverage only, and a crash of the child surfaces as an error
 * without a message, which this harness turns into an abort.  Nothing may
 * appear outside the destination: the harness checks that its scratch
 * directory holds only the archive and the destination afterwards.  */
#include "fs.h"
#include "layerstore.h"
#include "utils.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerInitialize (int *argc, char ***argv);
int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static char scratch[] = "/tmp/esbx-fuzz-import.XXXXXX";
static int scratchfd = -1;

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  (void)argc;
  (void)argv;
  if (mkdtemp (scratch) == NULL)
    abort ();
  scratchfd = open (scratch, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (scratchfd < 0)
    abort ();
  setenv ("ESBX_IMPORT_MAX_BYTES", "1M", 1);
  setenv ("ESBX_IMPORT_MAX_ENTRIES", "2000", 1);
  return 0;
}

static size_t
count_entries (void)
{
  _cleanup_dir_ DIR *d = opendir (scratch);
  struct dirent *e;
  size_t n = 0;

  if (d == NULL)
    abort ();
  while ((e = readdir (d)) != NULL)
    if (strcmp (e->d_name, ".") != 0 && strcmp (e->d_name, "..") != 0)
      n++;
  return n;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  _cleanup_free_ char *archive = xasprintf ("%s/in", scratch);
  _cleanup_close_ int fd = -1;
  _cleanup_close_ int dest = -1;
  esbx_error_t err = NULL;

  fd = open (archive, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0 || esbx_write_all (fd, data, size) < 0)
    abort ();
  if (mkdirat (scratchfd, "dest", 0755) < 0)
    abort ();
  dest = openat (scratchfd, "dest", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dest < 0)
    abort ();
  if (esbx_import_tree (archive, dest, &err) < 0)
    {
      /* A failure always says why; a silent one is a crashed child.  */
      if (strstr (err->msg, "killed by signal") || strstr (err->msg, "failed with status"))
        {
          fprintf (stderr, "fuzz_import: %s\n", err->msg);
          abort ();
        }
      esbx_error_free (&err);
    }
  if (count_entries () != 2)
    abort ();
  if (esbx_rm_rf_at (scratchfd, "dest", &err) < 0)
    abort ();
  return 0;
}
