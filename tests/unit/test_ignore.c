/* Unit tests of layerstore/ignore.c against git itself: the tree of git's
   t0008-ignores.sh (its .gitignore files, its info/exclude as our
   .esbxignore) plus a directory of trickier patterns is written to a
   temporary directory, and for every path of it our answer must be the one
   of `git check-ignore --no-index` on the same tree.  */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs.h"
#include "ignore.h"
#include "utils.h"

static char root[] = "/tmp/esbx-ignore-XXXXXX";

/* t0008's ignore files, then ours.  */
static const struct
{
  const char *path, *text;
} files[] = {
  { ".gitignore", "one\nignored-*\ntop-level-dir/\n" },
  { "a/.gitignore", "two*\n*three\n" },
  { "a/b/.gitignore", "four\nfive\n# this comment should affect the line numbers\nsix\n"
                      "ignored-dir/\n# and so should this blank line:\n\n!on*\n!two\n" },
  { "a/b/ignored-dir/.gitignore", "seven\n" },
  { ".esbxignore", "per-repo\n" },
  { "w/.gitignore", "*.o\n!keep.o\nbuild/\n/top-only\ndoc/**/*.pdf\n**/gen\ndeep/**\nx/*/y\n"
                    "\\#hash\n\\!bang\ntrail\\ \nsp   \n[a-c]r\n[!a-c]q\n[[:digit:]]d\n[]]br\n"
                    "*.[oa]x\na?c\n**/z/**\ncrlf\r\nmid/dle\nfoo/\n#comment\n  \n!\n"
                    "[unclosed\n*.[[:bogus:]]\nback\\\\slash\n" },
  { "w/build/.gitignore", "!out.bin\n" },
  { "w/sub/.gitignore", "!*.o\ny.o\n" },
};

/* Paths to ask about; a trailing `/` makes a directory.  */
static const char *const paths[] = {
  "one",
  "a/one",
  "a/b/one",
  "a/b/on",
  "a/b/two",
  "a/b/twooo",
  "a/3-three",
  "a/three-not-this-one",
  "a/b/ignored-dir/",
  "a/b/ignored-dir/foo",
  "a/b/ignored-dir/seven",
  "a/b/ignored-dir/twoooo",
  "not-ignored",
  "a/not-ignored",
  "ignored-and-untracked",
  "a/ignored-and-untracked",
  "per-repo",
  "a/per-repo",
  "top-level-dir/",
  "top-level-dir/x",
  "a/top-level-dir",
  "a/b/four",
  "a/b/c/six",
  "w/x.o",
  "w/keep.o",
  "w/sub/keep.o",
  "w/sub/y.o",
  "w/sub/z.o",
  "w/build/",
  "w/build/out.bin",
  "w/sub/build",
  "w/top-only",
  "w/sub/top-only",
  "w/doc/a.pdf",
  "w/doc/p/q/r.pdf",
  "w/doc/p/r.txt",
  "w/gen/",
  "w/gen/x",
  "w/s/t/gen/",
  "w/deep/",
  "w/deep/f",
  "w/x/k/y",
  "w/x/k/l/y",
  "w/#hash",
  "w/!bang",
  "w/trail ",
  "w/trail",
  "w/sp",
  "w/br",
  "w/dr",
  "w/aq",
  "w/dq",
  "w/5d",
  "w/]br",
  "w/f.ox",
  "w/f.ax",
  "w/f.bx",
  "w/abc",
  "w/a/c",
  "w/m/z/f",
  "w/z/",
  "w/mid/dle",
  "w/s/mid/dle",
  "w/foo",
  "w/s/foo/",
  "w/crlf",
  "w/unclosed",
  "w/[unclosed",
  "w/back\\slash",
  "w/backslash",
  "w/q.b",
};

static void
write_at (const char *rel, const char *text)
{
  _cleanup_free_ char *path = xasprintf ("%s/%s", root, rel);
  _cleanup_free_ char *cmd = NULL;
  FILE *f;

  cmd = xasprintf ("mkdir -p \"$(dirname '%s')\"", path);
  assert_int_equal (system (cmd), 0);
  f = fopen (path, "w");
  assert_non_null (f);
  fputs (text, f);
  fclose (f);
}

static void
make_path (const char *rel)
{
  _cleanup_free_ char *path = xasprintf ("%s/%s", root, rel);
  size_t n = strlen (path);
  struct stat st;

  if (path[n - 1] == '/')
    {
      _cleanup_free_ char *cmd = xasprintf ("mkdir -p '%s'", path);
      assert_int_equal (system (cmd), 0);
    }
  else if (lstat (path, &st) < 0)
    write_at (rel, "x\n");
}

static int
setup (void **state)
{
  _cleanup_free_ char *cmd = NULL;
  size_t i;

  (void)state;
  if (mkdtemp (root) == NULL)
    return -1;
  for (i = 0; i < ARRAY_SIZE (files); i++)
    write_at (files[i].path, files[i].text);
  for (i = 0; i < ARRAY_SIZE (paths); i++)
    make_path (paths[i]);
  /* git knows no .esbxignore: its info/exclude has the same place.  */
  cmd = xasprintf ("cd '%s' && git init -q . && cp .esbxignore .git/info/exclude", root);
  return system (cmd) == 0 ? 0 : -1;
}

static int
teardown (void **state)
{
  _cleanup_free_ char *cmd = xasprintf ("rm -rf '%s'", root);

  (void)state;
  return system (cmd) == 0 ? 0 : -1;
}

/* git's answer for every path, in order: `check-ignore -v -n` prints the
   deciding line for each, and a `!` line or none means not ignored.  */
static void
git_answers (bool *ignored)
{
  _cleanup_free_ char *list = xasprintf ("%s.paths", root);
  _cleanup_free_ char *cmd = NULL;
  char buf[8192];
  FILE *f = fopen (list, "w");
  size_t i, n = 0;

  assert_non_null (f);
  for (i = 0; i < ARRAY_SIZE (paths); i++)
    {
      fputs (paths[i], f);
      fputc ('\0', f);
    }
  fclose (f);
  cmd = xasprintf ("cd '%s' && HOME=/nonexistent GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null "
                   "git check-ignore --no-index -v -n -z --stdin <'%s'",
                   root, list);
  f = popen (cmd, "r");
  assert_non_null (f);
  /* Records of four NUL-terminated fields: source, line, pattern, path.  */
  for (;;)
    {
      char *field[4];
      size_t k;

      for (k = 0; k < 4; k++)
        {
          size_t len = 0;
          int c;

          while ((c = fgetc (f)) != EOF && c != '\0' && len < sizeof buf - 1)
            buf[len++] = (char)c;
          if (c == EOF)
            break;
          buf[len] = '\0';
          field[k] = xstrdup (buf);
        }
      if (k < 4)
        {
          while (k > 0)
            free (field[--k]);
          break;
        }
      assert_true (n < ARRAY_SIZE (paths));
      ignored[n++] = field[0][0] != '\0' && field[2][0] != '!';
      for (k = 0; k < 4; k++)
        free (field[k]);
    }
  pclose (f);
  unlink (list);
  assert_int_equal (n, ARRAY_SIZE (paths));
}

/* Our answer for REL, walking to it the way the scan does: the rules of
   each directory are read on the way down, and an ignored directory ends
   the walk.  */
static bool
our_answer (const char *rel)
{
  struct esbx_ignore *ig = esbx_ignore_new ();
  _cleanup_free_ char *copy = xstrdup (rel);
  _cleanup_free_ char *dir = xstrdup ("");
  size_t n = strlen (copy);
  bool is_dir = copy[n - 1] == '/', ignored = false;
  esbx_error_t err = NULL;
  char *p = copy, *slash;

  if (is_dir)
    copy[n - 1] = '\0';
  for (;;)
    {
      _cleanup_free_ char *abs = xasprintf ("%s/%s", root, dir);
      _cleanup_close_ int fd = open (abs, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

      assert_true (fd >= 0);
      if (esbx_ignore_enter (ig, NULL, fd, false, dir, "unit", &err) < 0)
        fail_msg ("%s", err->msg);
      slash = strchr (p, '/');
      if (slash == NULL)
        break;
      *slash = '\0';
      if (esbx_ignore_match (ig, copy, true))
        {
          ignored = true;
          break;
        }
      free (dir);
      dir = xstrdup (copy);
      *slash = '/';
      p = slash + 1;
    }
  if (!ignored)
    ignored = esbx_ignore_match (ig, copy, is_dir);
  esbx_ignore_free (ig);
  return ignored;
}

static void
test_same_as_git (void **state)
{
  bool want[ARRAY_SIZE (paths)];
  size_t i, wrong = 0, yes = 0;

  (void)state;
  git_answers (want);
  for (i = 0; i < ARRAY_SIZE (paths); i++)
    {
      bool got = our_answer (paths[i]);
      yes += want[i];
      if (got != want[i])
        {
          print_error ("`%s`: git says %s, we say %s\n", paths[i],
                       want[i] ? "ignored" : "not ignored", got ? "ignored" : "not ignored");
          wrong++;
        }
    }
  assert_int_equal (wrong, 0);
  /* Both answers occur, so the comparison can fail.  */
  assert_true (yes > 10 && yes < ARRAY_SIZE (paths) - 10);
}

static void
test_wildmatch (void **state)
{
  (void)state;
  assert_true (esbx_wildmatch ("foo/**/bar", "foo/bar", true));
  assert_true (esbx_wildmatch ("foo/**/bar", "foo/a/b/bar", true));
  assert_false (esbx_wildmatch ("foo/*/bar", "foo/a/b/bar", true));
  assert_true (esbx_wildmatch ("**/foo", "foo", true));
  assert_true (esbx_wildmatch ("a/**", "a/b/c", true));
  assert_false (esbx_wildmatch ("a/**", "a", true));
  assert_false (esbx_wildmatch ("a*", "a/b", true));
  assert_true (esbx_wildmatch ("a*", "a/b", false));
  assert_true (esbx_wildmatch ("[]-]", "-", true));
  assert_false (esbx_wildmatch ("[!a-c]", "b", true));
  assert_false (esbx_wildmatch ("x[/]y", "x/y", true));
  assert_false (esbx_wildmatch ("\\", "\\", true));
  /* Backtracking stays polynomial.  */
  assert_false (esbx_wildmatch ("*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b",
                                "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", true));
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_same_as_git),
    cmocka_unit_test (test_wildmatch),
  };
  return cmocka_run_group_tests (tests, setup, teardown);
}
