/* Read a project's stack the way overlayfs merges it, without mounting it:
   what a path is in the base of a session.  */
#include "internal.h"
#include "lookup_cache.h"
#include "fs.h"
#include "hash.h"
#include "path.h"
#include "utils.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

bool
esbx_is_whiteout (const struct stat *st)
{
  return S_ISCHR (st->st_mode) && st->st_rdev == makedev (0, 0);
}

bool
esbx_is_opaque_fd (int fd)
{
  char v[4];

  return fgetxattr (fd, "trusted.overlay.opaque", v, sizeof v) == 1 && v[0] == 'y';
}

bool
esbx_is_opaque_at (int dirfd, const char *name)
{
  _cleanup_close_ int fd
      = TEMP_FAILURE_RETRY (openat (dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));

  return fd >= 0 && esbx_is_opaque_fd (fd);
}

int
esbx_stack_open (esbx_store_t *store, const char *project, const char *upto, char *const *extra,
                 struct esbx_stack *st, esbx_error_t *err)
{
  _cleanup_strv_ char **paths = NULL;
  _cleanup_strv_ char **ids = NULL;
  size_t n, count, i, j;

  memset (st, 0, sizeof *st);
  if (esbx_stack_lowers (store, project, upto, extra, &paths, &n, err) < 0)
    return -1;
  if (esbx_project_stack (store, project, &ids, &count, err) < 0)
    return -1;
  st->store = store;
  st->project = xstrdup (project);
  st->n = n;
  st->fds = xmalloc (n * sizeof (int));
  st->ids = xmalloc0 ((n + 1) * sizeof (char *));
  st->records = xmalloc0 (n * sizeof (struct esbx_layer *));
  st->record_failed = xmalloc0 (n * sizeof (bool));
  for (i = 0; i < n; i++)
    st->fds[i] = -1;
  for (i = 0, j = 0; i < n; i++)
    {
      /* The paths end in ".../layers/ID/diff": recover the ids.  */
      char *end = strrchr (paths[i], '/');
      char *start;
      *end = '\0';
      start = strrchr (paths[i], '/') + 1;
      st->ids[i] = xstrdup (start);
      *end = '/';
      st->fds[i] = esbx_open_dir_at (AT_FDCWD, paths[i], err);
      if (st->fds[i] < 0)
        {
          esbx_stack_close (st);
          return -1;
        }
      (void)j;
    }
  return 0;
}

void
esbx_stack_close (struct esbx_stack *st)
{
  size_t i;

  for (i = 0; i < st->n; i++)
    {
      if (st->fds[i] >= 0)
        close (st->fds[i]);
      free (st->ids[i]);
      esbx_layer_free (st->records[i]);
    }
  esbx_stack_cache_free (st->cache);
  free (st->fds);
  free (st->ids);
  free (st->records);
  free (st->record_failed);
  free (st->project);
  memset (st, 0, sizeof *st);
}

/* What layer LAYER says about REL.  *stop is set when a directory on the
   way is opaque, so lower layers must not be consulted.  */
static enum esbx_probe
probe (struct esbx_stack *st, size_t layer, const char *rel, struct stat *out, bool *stop)
{
  const char *slash = strrchr (rel, '/');
  const char *name = slash ? slash + 1 : rel;
  enum esbx_probe pr;
  struct stat sb;
  int dfd;

  pr = esbx_stack_walk (st, layer, rel, slash ? (size_t)(slash - rel) : 0, &dfd, stop);
  if (pr != ESBX_PROBE_FOUND)
    return pr;
  if (fstatat (dfd, name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
    return ESBX_PROBE_MISSING;
  if (esbx_is_whiteout (&sb))
    return ESBX_PROBE_GONE;
  *out = sb;
  return ESBX_PROBE_FOUND;
}

int
esbx_stack_lookup (struct esbx_stack *st, const char *rel, size_t *layer, struct stat *out)
{
  size_t i;
  bool stop;

  for (i = st->n; i > 0; i--)
    {
      switch (probe (st, i - 1, rel, out, &stop))
        {
        case ESBX_PROBE_FOUND:
          *layer = i - 1;
          return 1;
        case ESBX_PROBE_GONE:
          return 0;
        case ESBX_PROBE_MISSING:
          break;
        }
      if (stop)
        return 0;
    }
  return 0;
}

int
esbx_stack_file_sha (struct esbx_stack *st, size_t layer, const char *rel,
                     char sha[ESBX_SHA256_HEX_LEN + 1], esbx_error_t *err)
{
  _cleanup_free_ char *abs = xasprintf ("/%s", rel);
  _cleanup_close_ int fd = -1;
  const struct esbx_change *c;

  /* Stacks opened outside a store (unit tests) have no records.  A record
     that cannot be read is tried once, not once per file.  */
  if (st->records[layer] == NULL && st->store != NULL && !st->record_failed[layer])
    {
      esbx_error_t ignored = NULL;
      if (esbx_layer_load (st->store, st->project, st->ids[layer], &st->records[layer], &ignored)
          < 0)
        {
          esbx_error_free (&ignored);
          st->record_failed[layer] = true;
        }
    }
  if (st->records[layer])
    {
      c = esbx_changeset_find (&st->records[layer]->changes, abs);
      if (c && c->type == ESBX_TYPE_FILE && c->sha256[0])
        {
          memcpy (sha, c->sha256, ESBX_SHA256_HEX_LEN + 1);
          return 0;
        }
    }
  fd = esbx_open_regular_beneath (st->fds[layer], rel, err);
  if (fd < 0)
    return -1;
  return esbx_sha256_fd (fd, sha, NULL, err);
}

static bool
strv_contains (const struct strv *v, const char *s)
{
  size_t i;

  for (i = 0; i < v->n; i++)
    if (strcmp (v->v[i], s) == 0)
      return true;
  return false;
}

char **
esbx_stack_readdir (struct esbx_stack *st, const char *rel, esbx_error_t *err)
{
  struct strv seen = { 0 }, hidden = { 0 };
  size_t i, k;
  bool stop;

  for (i = st->n; i > 0; i--)
    {
      _cleanup_strv_ char **names = NULL;
      enum esbx_probe pr;
      int dfd;

      /* A directory of the view lists its own entries and, unless it or
         one above it is opaque, the lower layers' ones it does not hide.  */
      pr = esbx_stack_walk (st, i - 1, rel, strlen (rel), &dfd, &stop);
      if (pr == ESBX_PROBE_GONE)
        break;
      if (pr == ESBX_PROBE_MISSING)
        {
          if (stop)
            break;
          continue;
        }
      if ((names = esbx_list_dir_at (dfd, ".", err)) == NULL)
        {
          strv_free (&seen);
          strv_free (&hidden);
          return NULL;
        }
      for (k = 0; names[k]; k++)
        {
          struct stat cst;
          if (strv_contains (&seen, names[k]) || strv_contains (&hidden, names[k]))
            continue;
          if (fstatat (dfd, names[k], &cst, AT_SYMLINK_NOFOLLOW) == 0 && esbx_is_whiteout (&cst))
            strv_push (&hidden, xstrdup (names[k]));
          else
            strv_push (&seen, xstrdup (names[k]));
        }
      if (stop)
        break;
    }
  strv_free (&hidden);
  if (seen.v == NULL)
    return xmalloc0 (sizeof (char *));
  return seen.v;
}
