/* esbx_import_tree against real archives built here with libarchive's
   writer, extracted into a temporary directory: ordinary archives, hostile
   ones, limits, and `docker save` whiteout handling.  */
#include "fs.h"
#include "layerstore.h"
#include "utils.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>

#include <cmocka.h>

struct ent
{
  const char *name;
  mode_t type; /* AE_IF*; 0 = regular file */
  mode_t perm; /* 0 = 0644 / 0755 */
  const char *data;
  const char *link; /* symlink target or, with hard, hard link target */
  bool hard;
  size_t zeros; /* regular file of this many zero bytes instead of data */
  time_t mtime;
};

struct fixture
{
  char *dir;  /* everything of this test */
  char *dest; /* the import destination */
  char *out;  /* a directory an escape would write to */
  int destfd;
};

static int
setup (void **state)
{
  struct fixture *f = xmalloc0 (sizeof *f);
  char tmpl[] = "/tmp/esbx-test-import.XXXXXX";

  assert_non_null (mkdtemp (tmpl));
  f->dir = xstrdup (tmpl);
  f->dest = xasprintf ("%s/dest", f->dir);
  f->out = xasprintf ("%s/outside", f->dir);
  assert_int_equal (mkdir (f->dest, 0755), 0);
  assert_int_equal (mkdir (f->out, 0755), 0);
  f->destfd = open (f->dest, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  assert_true (f->destfd >= 0);
  unsetenv ("ESBX_IMPORT_MAX_BYTES");
  unsetenv ("ESBX_IMPORT_MAX_ENTRIES");
  *state = f;
  return 0;
}

static int
teardown (void **state)
{
  struct fixture *f = *state;
  esbx_error_t err = NULL;

  close (f->destfd);
  if (esbx_rm_rf_at (AT_FDCWD, f->dir, &err) < 0)
    esbx_error_free (&err);
  unsetenv ("ESBX_IMPORT_MAX_BYTES");
  unsetenv ("ESBX_IMPORT_MAX_ENTRIES");
  free (f->dir);
  free (f->dest);
  free (f->out);
  free (f);
  return 0;
}

enum fmt
{
  TAR,
  TAR_GZ,
  TAR_ZST,
  ZIP,
};

static void
write_entries (struct archive *a, const struct ent *ents, size_t n)
{
  size_t i;

  for (i = 0; i < n; i++)
    {
      const struct ent *en = &ents[i];
      struct archive_entry *e = archive_entry_new ();
      mode_t type = en->type ? en->type : AE_IFREG;
      size_t size = en->zeros ? en->zeros : (en->data ? strlen (en->data) : 0);

      archive_entry_set_pathname (e, en->name);
      archive_entry_set_filetype (e, type);
      archive_entry_set_perm (e, en->perm ? en->perm : (type == AE_IFDIR ? 0755 : 0644));
      archive_entry_set_mtime (e, en->mtime ? en->mtime : 1600000000, 0);
      if (en->hard)
        archive_entry_set_hardlink (e, en->link);
      else if (type == AE_IFLNK)
        archive_entry_set_symlink (e, en->link);
      if (type == AE_IFCHR)
        archive_entry_set_rdev (e, makedev (1, 3));
      if (type == AE_IFREG && !en->hard)
        archive_entry_set_size (e, (la_int64_t)size);
      assert_true (archive_write_header (a, e) >= ARCHIVE_WARN);
      if (en->zeros)
        {
          char *zeros = xmalloc0 (en->zeros);
          assert_int_equal (archive_write_data (a, zeros, en->zeros), (la_ssize_t)en->zeros);
          free (zeros);
        }
      else if (size)
        assert_int_equal (archive_write_data (a, en->data, size), (la_ssize_t)size);
      archive_entry_free (e);
    }
}

static char *
make_archive (struct fixture *f, const char *name, enum fmt fmt, const struct ent *ents, size_t n)
{
  char *path = xasprintf ("%s/%s", f->dir, name);
  struct archive *a = archive_write_new ();

  if (fmt == ZIP)
    archive_write_set_format_zip (a);
  else
    archive_write_set_format_pax_restricted (a);
  if (fmt == TAR_GZ)
    archive_write_add_filter_gzip (a);
  if (fmt == TAR_ZST)
    archive_write_add_filter_zstd (a);
  assert_int_equal (archive_write_open_filename (a, path), ARCHIVE_OK);
  write_entries (a, ents, n);
  assert_int_equal (archive_write_close (a), ARCHIVE_OK);
  archive_write_free (a);
  return path;
}

/* Import and expect failure with a one-line message containing WANT.  */
static void
import_fails (struct fixture *f, const char *from, const char *want)
{
  esbx_error_t err = NULL;

  assert_int_equal (esbx_import_tree (from, f->destfd, &err), -1);
  assert_non_null (err);
  if (strstr (err->msg, want) == NULL)
    fail_msg ("error `%s` does not mention `%s`", err->msg, want);
  assert_null (strchr (err->msg, '\n'));
  esbx_error_free (&err);
}

static void
import_ok (struct fixture *f, const char *from)
{
  esbx_error_t err = NULL;

  if (esbx_import_tree (from, f->destfd, &err) < 0)
    fail_msg ("import `%s`: %s", from, err->msg);
}

static char *
read_dest (struct fixture *f, const char *rel)
{
  char *buf = NULL;
  size_t len;
  esbx_error_t err = NULL;

  if (esbx_read_file_at (f->destfd, rel, 1 << 20, &buf, &len, &err) < 0)
    {
      esbx_error_free (&err);
      return NULL;
    }
  return buf;
}

static void
write_file (int dirfd, const char *path, const void *data, size_t len, mode_t mode)
{
  int fd = openat (dirfd, path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);

  assert_true (fd >= 0);
  assert_int_equal (esbx_write_all (fd, data, len), 0);
  close (fd);
}

static bool
dest_has (struct fixture *f, const char *rel)
{
  return esbx_exists_at (f->destfd, rel);
}

static bool
outside_empty (struct fixture *f)
{
  esbx_error_t err = NULL;
  char **names = esbx_list_dir_at (AT_FDCWD, f->out, &err);
  bool empty = names && names[0] == NULL;

  cleanup_strvp (&names);
  return empty;
}

static void
test_plain_tar (void **state)
{
  struct fixture *f = *state;
  const struct ent ents[] = {
    { .name = "./", .type = AE_IFDIR },
    { .name = "src/", .type = AE_IFDIR, .perm = 0750, .mtime = 1000000000 },
    { .name = "src/main.c", .data = "int main;\n", .perm = 0600, .mtime = 1200000000 },
    { .name = "src/run", .data = "#!/bin/sh\n", .perm = 04755 },
    { .name = "link", .type = AE_IFLNK, .link = "src/main.c" },
    { .name = "abs", .type = AE_IFLNK, .link = "/etc/passwd" },
    { .name = "hard", .link = "src/main.c", .hard = true },
    { .name = "fifo", .type = AE_IFIFO },
    { .name = "manifest.json", .data = "{\"not\": \"docker\"}" },
  };
  _cleanup_free_ char *path = make_archive (f, "plain.tar", TAR, ents, ARRAY_SIZE (ents));
  _cleanup_free_ char *c = NULL;
  char target[64];
  struct stat st, st2;
  ssize_t n;

  import_ok (f, path);
  c = read_dest (f, "src/main.c");
  assert_string_equal (c, "int main;\n");
  assert_int_equal (fstatat (f->destfd, "src", &st, AT_SYMLINK_NOFOLLOW), 0);
  assert_int_equal (st.st_mode & 07777, 0750);
  assert_int_equal (st.st_mtim.tv_sec, 1000000000);
  assert_int_equal (fstatat (f->destfd, "src/main.c", &st, AT_SYMLINK_NOFOLLOW), 0);
  assert_int_equal (st.st_mode & 07777, 0600);
  assert_int_equal (st.st_mtim.tv_sec, 1200000000);
  assert_int_equal (fstatat (f->destfd, "hard", &st2, AT_SYMLINK_NOFOLLOW), 0);
  assert_int_equal (st.st_ino, st2.st_ino);
  /* setuid is stripped, the rest of the mode kept.  */
  assert_int_equal (fstatat (f->destfd, "src/run", &st, AT_SYMLINK_NOFOLLOW), 0);
  assert_int_equal (st.st_mode & 07777, 0755);
  n = readlinkat (f->destfd, "abs", target, sizeof target - 1);
  assert_true (n > 0);
  target[n] = '\0';
  assert_string_equal (target, "/etc/passwd");
  assert_int_equal (fstatat (f->destfd, "fifo", &st, AT_SYMLINK_NOFOLLOW), 0);
  assert_true (S_ISFIFO (st.st_mode));
  /* A project's own manifest.json does not make it a docker save.  */
  assert_true (dest_has (f, "manifest.json"));
}

static void
check_small_tree (struct fixture *f)
{
  _cleanup_free_ char *a = read_dest (f, "d/a");
  _cleanup_free_ char *b = read_dest (f, "b");

  assert_non_null (a);
  assert_string_equal (a, "alpha\n");
  assert_non_null (b);
  assert_string_equal (b, "beta\n");
}

static const struct ent small_tree[] = {
  { .name = "d/", .type = AE_IFDIR },
  { .name = "d/a", .data = "alpha\n" },
  { .name = "b", .data = "beta\n" },
};

/* The small tree in one of the compressed formats imports whole.  */
static void
import_small_tree (struct fixture *f, const char *name, enum fmt format)
{
  _cleanup_free_ char *path = make_archive (f, name, format, small_tree, 3);

  import_ok (f, path);
  check_small_tree (f);
}

static void
test_tar_gz (void **state)
{
  import_small_tree (*state, "x.tar.gz", TAR_GZ);
}

static void
test_tar_zst (void **state)
{
  import_small_tree (*state, "x.tar.zst", TAR_ZST);
}

static void
test_zip (void **state)
{
  import_small_tree (*state, "x.zip", ZIP);
}

static void
test_dotdot (void **state)
{
  struct fixture *f = *state;
  const struct ent ents[]
      = { { .name = "ok", .data = "x" }, { .name = "../outside/evil", .data = "x" } };
  _cleanup_free_ char *path = make_archive (f, "dotdot.tar", TAR, ents, 2);

  import_fails (f, path, "`..` is not allowed");
  assert_true (outside_empty (f));
}

static void
test_absolute (void **state)
{
  struct fixture *f = *state;
  _cleanup_free_ char *name = xasprintf ("%s/evil", f->out);
  const struct ent ents[] = { { .name = name, .data = "x" } };
  _cleanup_free_ char *path = make_archive (f, "abs.tar", TAR, ents, 1);

  import_fails (f, path, "absolute paths are not allowed");
  assert_true (outside_empty (f));
}

static void
test_symlink_write_through (void **state)
{
  struct fixture *f = *state;
  const struct ent ents[] = {
    { .name = "lnk", .type = AE_IFLNK, .link = f->out },
    { .name = "lnk/pwned", .data = "x" },
  };
  const struct ent rel_ents[] = {
    { .name = "lnk", .type = AE_IFLNK, .link = "../outside" },
    { .name = "lnk/pwned", .data = "x" },
  };
  _cleanup_free_ char *path = make_archive (f, "sym.tar", TAR, ents, 2);
  _cleanup_free_ char *rel = make_archive (f, "symrel.tar", TAR, rel_ents, 2);

  import_fails (f, path, "symlink");
  assert_true (outside_empty (f));
  assert_int_equal (esbx_rm_rf_at (f->destfd, "lnk", NULL), 0);
  import_fails (f, rel, "symlink");
  assert_true (outside_empty (f));
}

static void
test_hardlink_outside (void **state)
{
  struct fixture *f = *state;
  const struct ent abs[] = { { .name = "pw", .link = "/etc/passwd", .hard = true } };
  const struct ent up[] = { { .name = "pw", .link = "../../../../etc/passwd", .hard = true } };
  const struct ent via[] = {
    { .name = "etc", .type = AE_IFLNK, .link = "/etc" },
    { .name = "pw", .link = "etc/passwd", .hard = true },
  };
  _cleanup_free_ char *p1 = make_archive (f, "h1.tar", TAR, abs, 1);
  _cleanup_free_ char *p2 = make_archive (f, "h2.tar", TAR, up, 1);
  _cleanup_free_ char *p3 = make_archive (f, "h3.tar", TAR, via, 2);
  struct stat st;

  import_fails (f, p1, "points outside the archive");
  import_fails (f, p2, "points outside the archive");
  import_fails (f, p3, "not a file extracted earlier");
  assert_int_equal (fstatat (f->destfd, "pw", &st, AT_SYMLINK_NOFOLLOW), -1);
}

static void
test_zip_bomb (void **state)
{
  struct fixture *f = *state;
  const struct ent ents[] = { { .name = "bomb", .zeros = 8 << 20 } };
  _cleanup_free_ char *path = make_archive (f, "bomb.zip", ZIP, ents, 1);
  struct stat st;

  assert_int_equal (stat (path, &st), 0);
  assert_true (st.st_size < (1 << 20));
  setenv ("ESBX_IMPORT_MAX_BYTES", "1M", 1);
  import_fails (f, path, "archive expands beyond the 1 MiB limit");
}

static void
test_sparse_bomb (void **state)
{
  struct fixture *f = *state;
  _cleanup_free_ char *path = xasprintf ("%s/sparse.tar", f->dir);
  struct archive *a = archive_write_new ();
  struct archive_entry *e = archive_entry_new ();

  /* A 1 TiB file that is one byte of data and a hole.  */
  archive_write_set_format_pax_restricted (a);
  assert_int_equal (archive_write_open_filename (a, path), ARCHIVE_OK);
  archive_entry_set_pathname (e, "huge");
  archive_entry_set_filetype (e, AE_IFREG);
  archive_entry_set_perm (e, 0644);
  archive_entry_set_size (e, 1LL << 40);
  archive_entry_sparse_add_entry (e, 0, 1);
  assert_true (archive_write_header (a, e) >= ARCHIVE_WARN);
  assert_int_equal (archive_write_data (a, "x", 1), 1);
  assert_int_equal (archive_write_close (a), ARCHIVE_OK);
  archive_write_free (a);
  archive_entry_free (e);

  import_fails (f, path, "archive expands beyond the 8 GiB limit");
  assert_false (dest_has (f, "huge"));
}

static void
test_entry_limit (void **state)
{
  struct fixture *f = *state;
  struct ent ents[20];
  char names[20][8];
  _cleanup_free_ char *path = NULL;
  size_t i;

  memset (ents, 0, sizeof ents);
  for (i = 0; i < 20; i++)
    {
      snprintf (names[i], sizeof names[i], "f%zu", i);
      ents[i].name = names[i];
      ents[i].data = "x";
    }
  path = make_archive (f, "many.tar", TAR, ents, 20);
  setenv ("ESBX_IMPORT_MAX_ENTRIES", "10", 1);
  import_fails (f, path, "more than 10 entries");
}

static void
test_bad_names (void **state)
{
  struct fixture *f = *state;
  const struct ent bad_utf8[] = { { .name = "caf\xe9", .data = "x" } };
  const struct ent ctrl[] = { { .name = "a\nb", .data = "x" } };
  const struct ent wh[] = { { .name = "d/.wh.x", .data = "" } };
  const struct ent dev[] = { { .name = "null", .type = AE_IFCHR } };
  _cleanup_free_ char *p1 = make_archive (f, "n1.tar", TAR, bad_utf8, 1);
  _cleanup_free_ char *p2 = make_archive (f, "n2.tar", TAR, ctrl, 1);
  _cleanup_free_ char *p3 = make_archive (f, "n3.tar", TAR, wh, 1);
  _cleanup_free_ char *p4 = make_archive (f, "n4.tar", TAR, dev, 1);
  _cleanup_free_ char *p5 = xasprintf ("%s/text", f->dir);

  import_fails (f, p1, "not valid UTF-8");
  import_fails (f, p2, "control character");
  import_fails (f, p3, "`.wh.`");
  import_fails (f, p4, "device nodes and sockets are not allowed");
  write_file (AT_FDCWD, p5, "hello\n", 6, 0644);
  import_fails (f, p5, "not a directory or an archive");
  import_fails (f, "/nonexistent/x.tar", "No such file");
}

/* An image layer tar in memory, then stored as NAME in the outer archive.  */
static void
add_layer (struct archive *outer, const char *name, const struct ent *ents, size_t n)
{
  size_t cap = 1 << 20, used = 0;
  char *buf = xmalloc0 (cap);
  struct archive *a = archive_write_new ();
  struct ent layer = { .name = name };
  struct archive_entry *e = archive_entry_new ();

  archive_write_set_format_pax_restricted (a);
  assert_int_equal (archive_write_open_memory (a, buf, cap, &used), ARCHIVE_OK);
  write_entries (a, ents, n);
  assert_int_equal (archive_write_close (a), ARCHIVE_OK);
  archive_write_free (a);

  archive_entry_set_pathname (e, layer.name);
  archive_entry_set_filetype (e, AE_IFREG);
  archive_entry_set_perm (e, 0644);
  archive_entry_set_size (e, (la_int64_t)used);
  assert_true (archive_write_header (outer, e) >= ARCHIVE_WARN);
  assert_int_equal (archive_write_data (outer, buf, used), (la_ssize_t)used);
  archive_entry_free (e);
  free (buf);
}

static void
test_docker_save (void **state)
{
  struct fixture *f = *state;
  const struct ent l1[] = {
    { .name = "etc/", .type = AE_IFDIR },      { .name = "etc/a", .data = "A\n" },
    { .name = "etc/b", .data = "B\n" },        { .name = "d/", .type = AE_IFDIR },
    { .name = "d/x", .data = "x\n" },          { .name = "d/sub/", .type = AE_IFDIR },
    { .name = "d/sub/y", .data = "y\n" },      { .name = "keep", .data = "keep\n" },
    { .name = "dir2file/", .type = AE_IFDIR }, { .name = "dir2file/old", .data = "old\n" },
  };
  /* The opaque marker comes after the layer's own entry of d/ on purpose: it
     must only empty what layer 1 put there.  */
  const struct ent l2[] = {
    { .name = "etc/", .type = AE_IFDIR },     { .name = "etc/.wh.a", .data = "" },
    { .name = "d/", .type = AE_IFDIR },       { .name = "d/z", .data = "z\n" },
    { .name = "d/.wh..wh..opq", .data = "" }, { .name = "dir2file", .data = "now a file\n" },
    { .name = "new", .data = "new\n" },
  };
  const struct ent cfg[] = {
    { .name = "manifest.json",
      .data = "[{\"Config\":\"cfg.json\",\"RepoTags\":[\"t:latest\"],"
              "\"Layers\":[\"l1/layer.tar\",\"l2/layer.tar\"]}]" },
    { .name = "cfg.json", .data = "{}" },
  };
  _cleanup_free_ char *path = xasprintf ("%s/image.tar", f->dir);
  _cleanup_free_ char *z = NULL, *d2f = NULL;
  struct archive *a = archive_write_new ();

  archive_write_set_format_ustar (a);
  assert_int_equal (archive_write_open_filename (a, path), ARCHIVE_OK);
  add_layer (a, "l1/layer.tar", l1, ARRAY_SIZE (l1));
  add_layer (a, "l2/layer.tar", l2, ARRAY_SIZE (l2));
  write_entries (a, cfg, ARRAY_SIZE (cfg));
  assert_int_equal (archive_write_close (a), ARCHIVE_OK);
  archive_write_free (a);

  import_ok (f, path);
  assert_false (dest_has (f, "etc/a"));
  assert_true (dest_has (f, "etc/b"));
  assert_false (dest_has (f, "etc/.wh.a"));
  assert_false (dest_has (f, "d/x"));
  assert_false (dest_has (f, "d/sub"));
  assert_false (dest_has (f, "d/.wh..wh..opq"));
  z = read_dest (f, "d/z");
  assert_string_equal (z, "z\n");
  d2f = read_dest (f, "dir2file");
  assert_string_equal (d2f, "now a file\n");
  assert_true (dest_has (f, "keep"));
  assert_true (dest_has (f, "new"));
  assert_false (dest_has (f, "manifest.json"));
  assert_false (dest_has (f, "l1"));
}

static void
test_docker_save_bad_whiteout (void **state)
{
  struct fixture *f = *state;
  const struct ent l1[]
      = { { .name = "a", .data = "a" }, { .name = ".wh..wh.plnk/", .type = AE_IFDIR } };
  const struct ent cfg[] = { { .name = "manifest.json", .data = "[{\"Layers\":[\"l1.tar\"]}]" } };
  _cleanup_free_ char *path = xasprintf ("%s/image.tar", f->dir);
  struct archive *a = archive_write_new ();

  archive_write_set_format_ustar (a);
  assert_int_equal (archive_write_open_filename (a, path), ARCHIVE_OK);
  write_entries (a, cfg, 1);
  add_layer (a, "l1.tar", l1, 2);
  assert_int_equal (archive_write_close (a), ARCHIVE_OK);
  archive_write_free (a);

  import_fails (f, path, "`.wh.`");
}

static void
test_directory (void **state)
{
  struct fixture *f = *state;
  _cleanup_free_ char *src = xasprintf ("%s/src", f->dir);
  _cleanup_free_ char *c = NULL;
  _cleanup_close_ int sfd = -1;
  struct timespec times[2] = { { 1000000000, 0 }, { 1000000000, 0 } };
  char target[64];
  struct stat st;
  ssize_t n;

  assert_int_equal (mkdir (src, 0755), 0);
  sfd = open (src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  assert_int_equal (mkdirat (sfd, "sub", 0750), 0);
  write_file (sfd, "sub/file", "data\n", 5, 0755);
  assert_int_equal (fchmodat (sfd, "sub/file", 04755, 0), 0);
  assert_int_equal (utimensat (sfd, "sub/file", times, 0), 0);
  assert_int_equal (symlinkat ("/etc/passwd", sfd, "pw"), 0);
  assert_int_equal (mkfifoat (sfd, "fifo", 0640), 0);
  assert_int_equal (utimensat (sfd, "sub", times, 0), 0);

  import_ok (f, src);
  c = read_dest (f, "sub/file");
  assert_string_equal (c, "data\n");
  assert_int_equal (fstatat (f->destfd, "sub/file", &st, AT_SYMLINK_NOFOLLOW), 0);
  assert_int_equal (st.st_mode & 07777, 0755);
  assert_int_equal (st.st_mtim.tv_sec, 1000000000);
  assert_int_equal (fstatat (f->destfd, "sub", &st, AT_SYMLINK_NOFOLLOW), 0);
  assert_int_equal (st.st_mode & 07777, 0750);
  assert_int_equal (st.st_mtim.tv_sec, 1000000000);
  n = readlinkat (f->destfd, "pw", target, sizeof target - 1);
  assert_true (n > 0);
  target[n] = '\0';
  assert_string_equal (target, "/etc/passwd");
  assert_int_equal (fstatat (f->destfd, "fifo", &st, AT_SYMLINK_NOFOLLOW), 0);
  assert_true (S_ISFIFO (st.st_mode));
}

static void
test_directory_socket (void **state)
{
  struct fixture *f = *state;
  _cleanup_free_ char *src = xasprintf ("%s/src", f->dir);
  struct sockaddr_un sun = { .sun_family = AF_UNIX };
  _cleanup_close_ int s = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

  assert_int_equal (mkdir (src, 0755), 0);
  snprintf (sun.sun_path, sizeof sun.sun_path, "%s/sock", src);
  assert_int_equal (bind (s, (struct sockaddr *)&sun, sizeof sun), 0);
  import_fails (f, src, "device nodes and sockets are not allowed");
}

static void
test_directory_limit (void **state)
{
  struct fixture *f = *state;
  _cleanup_free_ char *src = xasprintf ("%s/src", f->dir);
  _cleanup_free_ char *big = xmalloc0 (64 * 1024);
  _cleanup_free_ char *bigpath = xasprintf ("%s/src/big", f->dir);

  assert_int_equal (mkdir (src, 0755), 0);
  write_file (AT_FDCWD, bigpath, big, 64 * 1024, 0644);
  setenv ("ESBX_IMPORT_MAX_BYTES", "16k", 1);
  import_fails (f, src, "tree is larger than the 16 KiB limit");
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown (test_plain_tar, setup, teardown),
    cmocka_unit_test_setup_teardown (test_tar_gz, setup, teardown),
    cmocka_unit_test_setup_teardown (test_tar_zst, setup, teardown),
    cmocka_unit_test_setup_teardown (test_zip, setup, teardown),
    cmocka_unit_test_setup_teardown (test_dotdot, setup, teardown),
    cmocka_unit_test_setup_teardown (test_absolute, setup, teardown),
    cmocka_unit_test_setup_teardown (test_symlink_write_through, setup, teardown),
    cmocka_unit_test_setup_teardown (test_hardlink_outside, setup, teardown),
    cmocka_unit_test_setup_teardown (test_zip_bomb, setup, teardown),
    cmocka_unit_test_setup_teardown (test_sparse_bomb, setup, teardown),
    cmocka_unit_test_setup_teardown (test_entry_limit, setup, teardown),
    cmocka_unit_test_setup_teardown (test_bad_names, setup, teardown),
    cmocka_unit_test_setup_teardown (test_docker_save, setup, teardown),
    cmocka_unit_test_setup_teardown (test_docker_save_bad_whiteout, setup, teardown),
    cmocka_unit_test_setup_teardown (test_directory, setup, teardown),
    cmocka_unit_test_setup_teardown (test_directory_socket, setup, teardown),
    cmocka_unit_test_setup_teardown (test_directory_limit, setup, teardown),
  };

  return cmocka_run_group_tests (tests, NULL, NULL);
}
