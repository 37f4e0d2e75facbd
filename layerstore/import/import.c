/* liblayerstore: fill a project's first layer from a directory, an archive
 * (tar, tar.gz, tar.zst, tar.xz, zip) or a `docker save` archive.
 *
 * All of the work runs in a forked child that fchdir()s into the destination
 * and, when it may, chroot()s there: libarchive resolves archive paths
 * against the cwd, so a bug in its SECURE_* checks or in ours still cannot
 * reach outside the destination, and esbxd's other threads never see their
 * cwd change.  The child sends its error through a pipe (esbx_error_send).
 *
 * Limits: ESBX_IMPORT_MAX_BYTES (default 8 GiB) bounds the bytes written,
 * counted from entry headers before anything is written (so a huge sparse
 * file fails up front) and from the data actually produced (so a zip whose
 * headers lie still stops); ESBX_IMPORT_MAX_ENTRIES (default 1048576) bounds
 * the number of entries.
 *
 * Not restored: extended attributes, ACLs and file flags (an archive must
 * not be able to plant trusted.overlay.* attributes in a layer), device
 * nodes and sockets (refused), setuid/setgid bits (stripped, with a
 * warning).  Owners are restored numerically when running as root, as tar
 * does.  A hard link in a directory import becomes two files; a hard link in
 * an archive must name a regular file already extracted beneath the
 * destination.
 *
 * The child's work, one file each: the limits and name checks every entry
 * passes (import_check.c), a directory copy (import_dir.c), reading an
 * archive (import_archive.c) and extracting it (import_extract.c), the
 * layers of a `docker save` archive (import_docker.c) and their whiteouts
 * (import_whiteout.c).  */
#include "archive_load.h"
#include "fs.h"
#include "importer.h"
#include "layerstore.h"
#include "sync.h"
#include "text.h"
#include "utils.h"

#include <fcntl.h>
#include <locale.h>
#include <signal.h>
#include <poll.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define DEFAULT_MAX_BYTES   (8ULL << 30)
#define DEFAULT_MAX_ENTRIES (1ULL << 20)

static int
import_archive (struct importer *im, esbx_error_t *err)
{
  _cleanup_free_ struct source *src = xmalloc0 (sizeof *src);
  _cleanup_archive_read_ struct archive *a = NULL;
  _cleanup_json_ json_t *manifest = NULL;

  src->fd = im->srcfd;
  /* One image layer into an empty layer diff (a pull): no `docker save`
     archive to look for, which would cost a whole pass (and gunzip) of
     the tar, and nothing earlier in the destination to make room over.  */
  if (im->image_layer)
    {
      if (esbx_import_open_source (src, &a, err) < 0)
        return -1;
      return esbx_import_extract (im, a, EXTRACT_SKIP_WHITEOUTS, err);
    }
  if (esbx_import_read_manifest (im, src, &manifest, err) < 0)
    return -1;
  if (manifest)
    return esbx_import_docker_save (im, src, manifest, err);
  if (esbx_import_open_source (src, &a, err) < 0)
    return -1;
  return esbx_import_extract (im, a, 0, err);
}

static int
run_child (struct importer *im, esbx_error_t *err)
{
  /* esbxd may die mid-import: no orphan should keep writing.  */
  prctl (PR_SET_PDEATHSIG, SIGKILL);
  if (fchdir (im->destfd) < 0)
    return esbx_make_error (err, errno, "enter the destination");
  /* Defence in depth; without CAP_SYS_CHROOT the SECURE_* flags and our
     own checks still hold.  */
  if (im->root && chroot (".") == 0 && chdir ("/") < 0)
    return esbx_make_error (err, errno, "chdir");
  /* libarchive converts pax UTF-8 names to the locale's charset.  */
  setlocale (LC_CTYPE, "C.UTF-8");
  if (im->is_dir)
    return esbx_import_dir (im, err);
  return import_archive (im, err);
}

static int
read_limit (const char *var, uint64_t dflt, uint64_t *out, esbx_error_t *err)
{
  const char *v = getenv (var);

  *out = dflt;
  if (v == NULL || *v == '\0')
    return 0;
  if (esbx_parse_size (v, out, err) < 0)
    return esbx_error_wrap (err, "%s", var);
  return 0;
}

/* How the child PID ended: its error, sent on RFD, or its status.  */
static int
child_result (pid_t pid, int rfd, const char *shown, esbx_error_t *err)
{
  struct esbx_sync_msg msg;
  esbx_error_t why = NULL;
  int status, saved;

  /* WHY gets the child's error, or why it could not be read.  */
  esbx_sync_recv (rfd, &msg, &why, &why);
  esbx_sync_msg_clear (&msg);
  if (TEMP_FAILURE_RETRY (waitpid (pid, &status, 0)) < 0)
    {
      saved = errno;
      esbx_error_free (&why);
      return esbx_make_error (err, saved, "import `%s`: wait", shown);
    }
  if (WIFEXITED (status) && WEXITSTATUS (status) == 0)
    {
      esbx_error_free (&why);
      return 0;
    }
  if (why)
    {
      *err = steal_pointer (&why);
      return esbx_error_wrap (err, "import `%s`", shown);
    }
  if (WIFSIGNALED (status))
    return esbx_make_error (err, 0, "import `%s`: extraction killed by signal %d", shown,
                            WTERMSIG (status));
  return esbx_make_error (err, 0, "import `%s`: extraction failed with status %d", shown,
                          WEXITSTATUS (status));
}

/* Progress while the child works: it counts entries and bytes in the
   importer, which sits in memory shared with us, and reads the archive
   through the file description we share, so that its offset tells how far
   it is; we look ten times a second, the child makes no call for it.  */
static struct esbx_progress *
watch_child (int rfd, const struct importer *im, uint64_t archive_size)
{
  struct esbx_progress *p = esbx_progress_begin ("import", "files", 0);
  struct pollfd pfd = { .fd = rfd, .events = POLLIN };
  off_t off;

  if (p == NULL)
    return NULL;
  p->in_total = archive_size;
  for (;;)
    {
      int n = poll (&pfd, 1, 100);

      p->done = __atomic_load_n (&im->entries, __ATOMIC_RELAXED);
      p->bytes = __atomic_load_n (&im->bytes, __ATOMIC_RELAXED);
      if (n != 0 && !(n < 0 && errno == EINTR))
        break;
      if (archive_size && (off = lseek (im->srcfd, 0, SEEK_CUR)) >= 0)
        p->in = (uint64_t)off;
      esbx_progress_tick (p);
    }
  p->in = p->in_total;
  return p;
}

static void
unmap_importer (struct importer **im)
{
  if (*im != MAP_FAILED)
    munmap (*im, sizeof **im);
}

int
esbx_import_tree (const char *from, int destfd, esbx_error_t *err)
{
  return esbx_import_tree_flags (from, destfd, 0, err);
}

int
esbx_import_tree_flags (const char *from, int destfd, unsigned flags, esbx_error_t *err)
{
  _cleanup_free_ char *shown = esbx_quote_path (from);
  _cleanup_close_ int srcfd = -1;
  _cleanup_close_ int rfd = -1;
  _cleanup_close_ int wfd = -1;
  __attribute__ ((cleanup (unmap_importer))) struct importer *im = MAP_FAILED;
  struct esbx_progress *prog;
  struct stat st;
  int fds[2];
  pid_t pid;

  /* Shared with the child, for progress (watch_child).  */
  im = mmap (NULL, sizeof *im, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (im == MAP_FAILED)
    return esbx_make_error (err, errno, "import `%s`: mmap", shown);
  if (read_limit ("ESBX_IMPORT_MAX_BYTES", DEFAULT_MAX_BYTES, &im->max_bytes, err) < 0
      || read_limit ("ESBX_IMPORT_MAX_ENTRIES", DEFAULT_MAX_ENTRIES, &im->max_entries, err) < 0)
    return esbx_error_wrap (err, "import `%s`", shown);

  /* O_NONBLOCK: a FIFO must not hang the caller before it is refused.  */
  srcfd = TEMP_FAILURE_RETRY (open (from, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (srcfd < 0)
    return esbx_make_error (err, errno, "import `%s`", shown);
  if (fstat (srcfd, &st) < 0)
    return esbx_make_error (err, errno, "import `%s`: stat", shown);
  if (!S_ISDIR (st.st_mode) && !S_ISREG (st.st_mode))
    return esbx_make_error (err, 0, "import `%s`: not a directory or an archive file", shown);
  im->srcfd = srcfd;
  im->destfd = destfd;
  im->is_dir = S_ISDIR (st.st_mode);
  im->image_layer = (flags & ESBX_IMPORT_IMAGE_LAYER) != 0;
  im->skip_git = (flags & ESBX_IMPORT_SKIP_GIT) != 0;
  im->root = geteuid () == 0;
  /* Here, not in the child: its chroot hides the library.  */
  if (!im->is_dir && esbx_archive_load (err) < 0)
    return esbx_error_wrap (err, "import `%s`", shown);

  if (pipe2 (fds, O_CLOEXEC) < 0)
    return esbx_make_error (err, errno, "import `%s`: pipe", shown);
  rfd = fds[0];
  wfd = fds[1];
  pid = fork ();
  if (pid < 0)
    return esbx_make_error (err, errno, "import `%s`: fork", shown);
  if (pid == 0)
    {
      esbx_error_t cerr = NULL;
      char *p;

      if (run_child (im, &cerr) == 0)
        _exit (0);
      /* The message names archive entries and ends up in one-line logs.  */
      for (p = cerr->msg; *p; p++)
        if (*p == '\n')
          *p = ' ';
      esbx_error_send (wfd, &cerr);
      _exit (1);
    }
  close (take_fd (&wfd));
  prog = watch_child (rfd, im, im->is_dir ? 0 : (uint64_t)st.st_size);
  if (child_result (pid, rfd, shown, err) < 0)
    return -1;
  esbx_progress_end (prog);
  return 0;
}
