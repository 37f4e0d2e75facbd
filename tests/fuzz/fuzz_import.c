/* libFuzzer harness: archive import (esbx_import_tree), the code behind
 * `project create --from ARCHIVE`.  Each input is written to a temporary
 * file and imported into a fresh temporary directory with small limits
 * (ESBX_IMPORT_MAX_BYTES=1M, ESBX_IMPORT_MAX_ENTRIES=2000).
 *
 * The extraction runs in a child process (import.c): libFuzzer sees the
 * parent's coverage only, and a crash of the child surfaces as an error
 * without a message, which this harness turns into an abort.  Nothing may
 * appear outside the destination: the harness checks that its scratch
 * directory holds only the archive and the destination afterwards, and
 * that the import left no file descriptor open.  */
#include "fs.h"
#include "layerstore.h"
#include "utils.h"

#include <dirent.h>
#include <errno.h>
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

/* Say why on standard output (hack/fuzz closes the harness's stderr), then
   stop as a crash, so that libFuzzer keeps the input.  */
__attribute__ ((noreturn)) static void
fail (const char *what, const char *why)
{
  printf ("fuzz_import: %s: %s\n", what, why ? why : "");
  fflush (stdout);
  abort ();
}

/* The file descriptors this process has open.  */
static size_t
count_fds (void)
{
  _cleanup_dir_ DIR *d = opendir ("/proc/self/fd");
  size_t n = 0;

  if (d == NULL)
    fail ("open /proc/self/fd", strerror (errno));
  while (readdir (d) != NULL)
    n++;
  return n;
}

static size_t
count_entries (void)
{
  _cleanup_dir_ DIR *d = opendir (scratch);
  struct dirent *e;
  size_t n = 0;

  if (d == NULL)
    fail ("open the scratch directory", strerror (errno));
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
  size_t fds = count_fds ();

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
      /* A failure always says why; a silent one is a crashed child (an
         entry's name may hold these words: only the whole prefix counts).  */
      _cleanup_free_ char *silent = xasprintf ("import `%s`: extraction ", archive);
      if (strncmp (err->msg, silent, strlen (silent)) == 0)
        fail ("import", err->msg);
      esbx_error_free (&err);
    }
  /* An import leaks no descriptor, whatever the input: esbxd serves
     many.  Ours: FD and DEST.  */
  if (count_fds () != fds + 2)
    fail ("descriptors", "the import left one open");
  if (count_entries () != 2)
    fail ("scratch", "an entry appeared outside the destination");
  if (esbx_rm_rf_at (scratchfd, "dest", &err) < 0)
    fail ("remove the destination", err->msg);
  return 0;
}
