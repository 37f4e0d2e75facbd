/* esbx show PROJECT[@LAYER]:PATH: what a path is at a layer, read from the
   layers without a session or a mount (as `git show REV:PATH`).  */
#include "internal.h"
#include "fs.h"
#include "path.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int
copy_out (int in, int outfd, esbx_error_t *err)
{
  char buf[65536];
  ssize_t n;

  while ((n = TEMP_FAILURE_RETRY (read (in, buf, sizeof buf))) > 0)
    if (esbx_write_all (outfd, buf, (size_t)n) < 0)
      return esbx_make_error (err, errno, "write");
  return n < 0 ? esbx_make_error (err, errno, "read") : 0;
}

static int
name_cmp (const void *a, const void *b)
{
  return strcmp (*(char *const *)a, *(char *const *)b);
}

/* A directory: its names, one a line, a directory's with a `/` (as git
   shows a tree).  */
static int
list_dir (struct esbx_stack *st, const char *rel, int outfd, esbx_error_t *err)
{
  _cleanup_strv_ char **names = esbx_stack_readdir (st, rel, err);
  size_t i, n;

  if (names == NULL)
    return -1;
  n = strv_len (names);
  esbx_sort (names, n, sizeof *names, name_cmp);
  for (i = 0; i < n; i++)
    {
      _cleanup_free_ char *child = rel[0] ? xasprintf ("%s/%s", rel, names[i]) : xstrdup (names[i]);
      _cleanup_free_ char *line = NULL;
      struct stat sb;
      size_t layer;

      if (esbx_stack_lookup (st, child, &layer, &sb) != 1)
        continue;
      line = xasprintf ("%s%s\n", names[i], S_ISDIR (sb.st_mode) ? "/" : "");
      if (esbx_write_all (outfd, line, strlen (line)) < 0)
        return esbx_make_error (err, errno, "write");
    }
  return 0;
}

int
esbx_show (esbx_store_t *store, const char *project, const char *ref, const char *path, int outfd,
           esbx_error_t *err)
{
  _cleanup_free_ char *id = NULL, *rel = NULL, *shown = esbx_quote_path (path);
  struct esbx_stack st = { 0 };
  struct stat sb;
  size_t layer;
  int ret = -1;

  if (esbx_project_check (store, project, err) < 0)
    return -1;
  if (esbx_clean_relpath (path[0] == '/' ? path + 1 : path, true, &rel, err) < 0)
    return esbx_error_wrap (err, "show `%s`", shown);
  if (esbx_layer_resolve (store, project, ref, &id, err) < 0
      || esbx_stack_open (store, project, id, NULL, &st, err) < 0)
    return esbx_error_wrap (err, "show `%s`", shown);
  if (rel[0] == '\0')
    {
      ret = list_dir (&st, "", outfd, err);
      goto out;
    }
  if (esbx_stack_lookup (&st, rel, &layer, &sb) != 1)
    {
      esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0,
                            "show `%s@%.12s:/%s`: no such path in that layer", project, id, rel);
      goto out;
    }
  if (S_ISDIR (sb.st_mode))
    ret = list_dir (&st, rel, outfd, err);
  else if (S_ISLNK (sb.st_mode))
    {
      _cleanup_free_ char *name = NULL;
      _cleanup_close_ int pfd = esbx_open_parent_beneath (st.fds[layer], rel, &name, err);
      char buf[4097];
      ssize_t n;

      if (pfd < 0 || (n = readlinkat (pfd, name, buf, sizeof buf - 1)) < 0)
        {
          if (pfd >= 0)
            esbx_make_error (err, errno, "show `/%s`: readlink", rel);
          goto out;
        }
      ret = esbx_write_all (outfd, buf, (size_t)n) < 0 ? esbx_make_error (err, errno, "write") : 0;
    }
  else if (S_ISREG (sb.st_mode))
    {
      _cleanup_close_ int fd = esbx_open_regular_beneath (st.fds[layer], rel, err);
      ret = fd < 0 ? -1 : copy_out (fd, outfd, err);
    }
  else
    esbx_make_error (err, 0, "show `/%s`: %s has no content to show", rel,
                     esbx_mode_type_name (sb.st_mode));
out:
  esbx_stack_close (&st);
  return ret;
}
