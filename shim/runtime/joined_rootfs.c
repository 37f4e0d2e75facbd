/* The root filesystem of a container joined to a session in a user
 * namespace, seen through idmapped mounts (joined_userns.c says why).
 *
 * The engine's root (Docker's overlay2 or containers-storage's merged
 * directory, an overlay) belongs to host root, and overlayfs cannot be
 * idmapped itself.  Its layers can (layerstore/mount_idmap.c): the
 * overlay's options are read from /proc/self/mountinfo, and a second
 * overlay of the same lower layers and the same upper directory, every
 * layer idmapped with the session's map, is made at TARGET.  Its work
 * directory is one of its own beside the upper (`esbx-work`): overlayfs
 * empties its work directory when it mounts, under the engine's overlay
 * that still uses it.  The engine's overlay stays where it is, for
 * `docker cp`, `export` and `diff`, which see the real owners; the kernel
 * warns once per create that the upper is in use by two overlays, which
 * is safe while only the container writes (docs/DOCKER.md).  Relative
 * lower directories (Docker's `l/XXX`, made short for the mount's page of
 * options) are relative to the directory above the upper's layer.
 *
 * A root that is a plain directory (an OCI bundle's rootfs) is bound at
 * TARGET through one idmapped mount.  */
#include "runtime.h"
#include "layerstore.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>

#define OVERLAYFS_MAGIC 0x794c7630

struct overlay_opts
{
  struct strv lowers; /* top first, as in the options */
  char *upper;
};

static void
overlay_opts_free (struct overlay_opts *o)
{
  strv_free (&o->lowers);
  free (o->upper);
}

/* The overlay options of the mount at PATH, the last one mounted there:
   1 when PATH is an overlay's root, 0 when no overlay is mounted there.  */
static int
overlay_at (const char *path, struct overlay_opts *out, esbx_error_t *err)
{
  _cleanup_file_ FILE *f = fopen ("/proc/self/mountinfo", "re");
  _cleanup_free_ char *line = NULL, *found = NULL;
  size_t cap = 0;
  char *opt, *save = NULL, *p;
  int ret = 0;

  memset (out, 0, sizeof *out);
  if (f == NULL)
    return esbx_make_error (err, errno, "open /proc/self/mountinfo");
  while (getline (&line, &cap, f) > 0)
    {
      char *fields[5], *sep, *s = line;
      size_t i;

      for (i = 0; i < 5; i++)
        {
          fields[i] = s;
          s = strchr (s, ' ');
          if (s == NULL)
            break;
          *s++ = '\0';
        }
      if (i < 5)
        continue;
      esbx_unescape_mountinfo (fields[4]);
      if (strcmp (fields[4], path) != 0)
        continue;
      sep = strstr (s, " - ");
      free (found);
      found = sep ? xstrdup (sep + 3) : NULL;
    }
  if (found == NULL || !esbx_has_prefix (found, "overlay "))
    return 0;
  /* "overlay SOURCE OPTIONS" */
  p = strchr (found + strlen ("overlay "), ' ');
  if (p == NULL)
    return 0;
  p[strcspn (p, "\n")] = '\0';
  for (opt = strtok_r (p + 1, ",", &save); opt; opt = strtok_r (NULL, ",", &save))
    {
      if (esbx_has_prefix (opt, "lowerdir="))
        {
          char *l, *lsave = NULL, *list = opt + strlen ("lowerdir=");

          if (strstr (list, "::"))
            goto data_only;
          for (l = strtok_r (list, ":", &lsave); l; l = strtok_r (NULL, ":", &lsave))
            {
              esbx_unescape_mountinfo (l);
              strv_push (&out->lowers, xstrdup (l));
            }
        }
      else if (esbx_has_prefix (opt, "lowerdir+="))
        {
          esbx_unescape_mountinfo (opt);
          strv_push (&out->lowers, xstrdup (opt + strlen ("lowerdir+=")));
        }
      else if (esbx_has_prefix (opt, "datadir+="))
        goto data_only;
      else if (esbx_has_prefix (opt, "upperdir="))
        {
          esbx_unescape_mountinfo (opt);
          free (out->upper);
          out->upper = xstrdup (opt + strlen ("upperdir="));
        }
    }
  ret = out->lowers.n > 0 ? 1 : 0;
  if (ret == 0)
    return esbx_make_error (err, 0, "the overlay at `%s` shows no lower directory", path);
  return ret;

data_only:
  overlay_opts_free (out);
  memset (out, 0, sizeof *out);
  return esbx_make_error (err, 0, "the overlay at `%s` has data-only layers", path);
}

static char *
dirname_of (const char *path)
{
  const char *slash = strrchr (path, '/');

  return slash && slash != path ? xstrndup (path, (size_t)(slash - path)) : xstrdup ("/");
}

static int
mount_overlay (const char *root, struct overlay_opts *o, const char *target,
               const struct esbx_idmap *map, char **work, esbx_error_t *err)
{
  _cleanup_free_ char *layer = NULL, *home = NULL, *w = NULL;
  struct strv lowers = { 0 };
  size_t i, n = o->lowers.n;
  int r;

  if (o->upper == NULL || o->upper[0] != '/')
    return esbx_make_error (err, 0, "the overlay at `%s` has no upper directory", root);
  layer = dirname_of (o->upper);
  home = dirname_of (layer);
  /* Bottom first, relative ones beneath HOME.  */
  for (i = n; i > 0; i--)
    {
      const char *l = o->lowers.v[i - 1];
      strv_push (&lowers, l[0] == '/' ? xstrdup (l) : xasprintf ("%s/%s", home, l));
    }
  w = xasprintf ("%s/esbx-work", layer);
  if (mkdir (w, 0700) < 0 && errno != EEXIST)
    {
      strv_free (&lowers);
      return esbx_make_error (err, errno, "mkdir `%s`", w);
    }
  *work = xstrdup (w);
  r = esbx_mount_overlay_idmapped (lowers.v, n, o->upper, w, target, map, err);
  strv_free (&lowers);
  return r;
}

int
joined_rootfs_mount (const char *root, const char *target, const struct esbx_idmap *map,
                     char **work, esbx_error_t *err)
{
  _cleanup_free_ char *real = realpath (root, NULL);
  struct overlay_opts o;
  struct statfs sfs;
  int r;

  *work = NULL;
  if (real == NULL)
    return esbx_make_error (err, errno, "root filesystem `%s`", root);
  r = overlay_at (real, &o, err);
  if (r < 0)
    return -1;
  if (r > 0)
    {
      r = mount_overlay (real, &o, target, map, work, err);
      overlay_opts_free (&o);
      return r;
    }
  if (statfs (real, &sfs) == 0 && sfs.f_type == OVERLAYFS_MAGIC)
    {
      esbx_make_error (err, 0, "`%s` lies inside an overlay but is not its root", real);
      return -2;
    }
  return esbx_mount_idmapped_bind (real, target, map->userns_fd, err);
}
