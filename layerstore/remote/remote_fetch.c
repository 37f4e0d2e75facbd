/* liblayerstore: installing the layers of a remote head the local stack
 * lacks (docs/SCALE-OUT.md, "pull P / sync").  Every blob they need, the
 * records and the layer blobs, is downloaded at once (registry_fetch.c)
 * and verified; then the layers are unpacked in stack order into staged
 * layers, all of them made durable by one syncfs, and renamed into
 * layers/ bottom to top: a crash leaves each layer installed whole or not
 * at all, and a bad blob anywhere installs none.  */
#include "remote.h"
#include "fs.h"
#include "path.h"
#include "text.h"
#include "utils.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

/* One layer to fetch: its blobs' places in the download, its record and
   its staged copy.  */
struct pull
{
  const struct esbx_remote_desc *d;
  size_t index;
  size_t blob; /* the record is blobs[blob], the layer blobs[blob + 1] */
  struct esbx_layer *l;
  struct esbx_staged staged;
};

/* Whiteouts and opaque directories in overlay format, from the record: the
   importer skipped the tar's `.wh.` entries.  */
static int
overlay_markers (int diffd, const struct esbx_layer *l, esbx_error_t *err)
{
  size_t i;

  for (i = 0; i < l->changes.n; i++)
    {
      const struct esbx_change *c = &l->changes.v[i];
      const char *rel = c->path[0] == '/' ? c->path + 1 : c->path;
      _cleanup_free_ char *base = NULL;
      _cleanup_close_ int pfd = -1;
      _cleanup_close_ int dfd = -1;

      if (c->kind == ESBX_DELETED)
        {
          struct stat st;

          /* The directory keeps the times the importer gave it from the
             archive, as on the publishing host: otherwise the export of
             the head would differ between hosts, and the directory would
             look newer than the layers published after it.  */
          pfd = esbx_open_parent_beneath (diffd, rel, &base, err);
          if (pfd < 0)
            return -1;
          if (fstat (pfd, &st) < 0)
            return esbx_make_error (err, errno, "stat the directory of `%s`", c->path);
          if (mknodat (pfd, base, S_IFCHR | 0, makedev (0, 0)) < 0)
            return esbx_make_error (err, errno, "whiteout `%s`", c->path);
          if (utimensat (pfd, ".", (struct timespec[2]){ st.st_atim, st.st_mtim }, 0) < 0)
            return esbx_make_error (err, errno, "set the times of the directory of `%s`", c->path);
        }
      else if (c->opaque && c->type == ESBX_TYPE_DIR)
        {
          dfd = rel[0] ? esbx_open_beneath (diffd, rel, O_RDONLY | O_DIRECTORY, 0, err)
                       : fcntl (diffd, F_DUPFD_CLOEXEC, 3);
          if (dfd < 0)
            return rel[0] ? -1 : esbx_make_error (err, errno, "dup");
          if (fsetxattr (dfd, "trusted.overlay.opaque", "y", 1, 0) < 0)
            return esbx_make_error (err, errno, "mark `%s` opaque", c->path);
        }
    }
  return 0;
}

/* The record of P (downloaded into REC: the record, or the config that
   carries it, which it then replaces) parsed and checked against its
   place in the stack.  */
static int
read_record (struct pull *p, struct esbx_registry_blob *rec, const char *parent, esbx_error_t *err)
{
  _cleanup_json_ json_t *j = NULL;
  const struct esbx_layer *l;

  if (p->d->record_in_config)
    {
      char *text;
      size_t len;

      if (esbx_remote_config_record (rec->buf, rec->len, &text, &len, err) < 0)
        return esbx_error_wrap (err, "record");
      free (rec->buf);
      rec->buf = text;
      rec->len = len;
    }
  j = json_parse (rec->buf, rec->len, err);
  if (j == NULL || esbx_layer_from_json (j, &p->l, err) < 0)
    return esbx_error_wrap (err, "record");
  l = p->l;
  if (strcmp (l->id, p->d->id) != 0 || l->index != (int64_t)p->index
      || (parent ? l->parent == NULL || strcmp (l->parent, parent) != 0 : l->parent != NULL))
    return esbx_make_error (err, 0, "its record does not fit the stack");
  return 0;
}

/* Unpack P's layer blob BLOB into a staged layer with its record.  */
static int
unpack (esbx_store_t *store, const char *project, struct pull *p, const char *blob,
        const struct esbx_registry_blob *rec, esbx_error_t *err)
{
  _cleanup_free_ char *diffrel = NULL;
  _cleanup_close_ int diffd = -1;
  _cleanup_close_ int sfd = -1;
  struct esbx_changeset none = { 0 };

  if (esbx_layer_stage (store, project, -1, &none, &p->staged, err) < 0)
    return -1;
  diffrel = xasprintf ("%s/diff", p->staged.rel);
  diffd = esbx_open_dir_at (store->rootfd, diffrel, err);
  if (diffd < 0 || esbx_import_tree_flags (blob, diffd, ESBX_IMPORT_IMAGE_LAYER, err) < 0
      || overlay_markers (diffd, p->l, err) < 0)
    return -1;
  /* Durable with the diff, by the syncfs before the layer is installed.  */
  sfd = esbx_open_dir_at (store->rootfd, p->staged.rel, err);
  if (sfd < 0 || esbx_replace_file_at (sfd, "record.json", rec->buf, rec->len, 0644, err) < 0)
    return -1;
  return 0;
}

/* Rename the staged layers into layers/ bottom to top, after one syncfs
   made every one of them durable, then fsync layers/.  */
static int
install (esbx_store_t *store, const char *project, struct pull *p, size_t n, esbx_error_t *err)
{
  _cleanup_free_ char *layers = esbx_project_file (project, "layers");
  _cleanup_close_ int lfd = esbx_open_dir_at (store->rootfd, layers, err);
  size_t i;

  if (lfd < 0 || esbx_layer_sync (lfd, err) < 0)
    return -1;
  for (i = 0; i < n; i++)
    {
      _cleanup_free_ char *dest = xasprintf ("%s/%s", layers, p[i].d->id);

      if (renameat2 (store->rootfd, p[i].staged.rel, store->rootfd, dest, RENAME_NOREPLACE) < 0)
        return esbx_make_error (err, errno, "install layer `%s`", p[i].d->id);
      free (p[i].staged.rel);
      p[i].staged.rel = NULL;
    }
  if (fsync (lfd) < 0)
    return esbx_make_error (err, errno, "fsync `%s`", layers);
  return 0;
}

int
esbx_remote_fetch_layers (esbx_store_t *store, struct esbx_registry *reg, const char *project,
                          const char *tmp, const struct esbx_remote_desc *d, size_t from, size_t to,
                          size_t *fetched, esbx_error_t *err)
{
  _cleanup_free_ struct pull *p = xmalloc0 ((to - from + 1) * sizeof *p);
  _cleanup_free_ struct esbx_registry_blob *b = xmalloc0 (2 * (to - from + 1) * sizeof *b);
  _cleanup_free_ char **paths = xmalloc0 ((to - from + 1) * sizeof *paths);
  size_t n = 0, nb = 0, i;
  int ret = -1;

  for (i = from; i < to; i++)
    {
      _cleanup_free_ char *dest = esbx_layer_rel (project, d[i].id);

      if (esbx_exists_at (store->rootfd, dest))
        continue;
      p[n].d = &d[i];
      p[n].index = i;
      p[n].blob = nb;
      p[n].staged.lockfd = -1;
      paths[n] = xasprintf ("%s/%zu.blob", tmp, i);
      b[nb].digest = d[i].record;
      b[nb++].fd = -1;
      b[nb].digest = d[i].digest;
      /* A blob is no larger than its descriptor says (a longer answer
         would fill the disk before its digest is checked).  */
      b[nb].size = d[i].size > 0 ? (uint64_t)d[i].size : 0;
      b[nb].fd = TEMP_FAILURE_RETRY (open (paths[n], O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
      if (b[nb++].fd < 0)
        {
          esbx_make_error (err, errno, "create `%s`", paths[n]);
          n++;
          goto out;
        }
      n++;
    }
  if (esbx_registry_get_blobs (reg, b, nb, err) < 0)
    goto out;
  for (i = 0; i < n; i++)
    {
      struct esbx_registry_blob *rec = &b[p[i].blob];

      close (b[p[i].blob + 1].fd);
      b[p[i].blob + 1].fd = -1;
      if (read_record (&p[i], rec, p[i].index ? d[p[i].index - 1].id : NULL, err) < 0
          || unpack (store, project, &p[i], paths[i], rec, err) < 0)
        {
          esbx_error_wrap (err, "fetch layer `%s`", p[i].d->id);
          goto out;
        }
      unlink (paths[i]);
    }
  if (install (store, project, p, n, err) < 0)
    goto out;
  if (fetched)
    *fetched = n;
  ret = 0;

out:
  for (i = 0; i < nb; i++)
    {
      free (b[i].buf);
      if (b[i].fd >= 0)
        close (b[i].fd);
    }
  for (i = 0; i < n; i++)
    {
      esbx_layer_unstage (store, &p[i].staged);
      esbx_layer_free (p[i].l);
      free (paths[i]);
    }
  return ret;
}
