/* liblayerstore import: `docker save` archives, detected by a top-level
 * manifest.json holding `[{"Layers": [...]}]`.  The image layers of the
 * first (only) image are applied in order into the one destination, because
 * esbx keeps an imported image as a single flat base layer
 * (import_whiteout.c).  Each image layer is read twice, first for its
 * whiteouts and then for its content, so that an opaque marker listed after
 * the layer's own entries of that directory does not delete them.  */
#include "importer.h"
#include "json.h"
#include "path.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define MANIFEST_MAX (4U << 20)

/* An image layer is an entry of the outer archive read as a stream.  */
struct nested
{
  struct archive *outer;
  char buf[READ_BUF];
};

static la_ssize_t
nested_read (struct archive *a, void *data, const void **buf)
{
  struct nested *n = data;
  la_ssize_t r = archive_read_data (n->outer, n->buf, sizeof n->buf);

  if (r < 0)
    archive_set_error (a, archive_errno (n->outer), "%s", archive_error_string (n->outer));
  *buf = n->buf;
  return r;
}

/* Docker writes a layer that two saved images share once and makes the other
   layer.tar a relative symlink to it: resolve such a link lexically inside
   the archive.  NULL when it leaves the archive.  */
static char *
resolve_in_archive (const char *entry, const char *target)
{
  _cleanup_free_ char *joined = NULL;
  struct strv parts = { 0 };
  char *save = NULL, *tok;
  size_t i, len = 0;
  char *out, *o;

  if (target[0] == '/')
    return NULL;
  joined = xasprintf ("%.*s/%s", (int)(esbx_import_last_component (entry) - entry), entry, target);
  for (tok = strtok_r (joined, "/", &save); tok; tok = strtok_r (NULL, "/", &save))
    {
      if (strcmp (tok, ".") == 0)
        continue;
      if (strcmp (tok, "..") == 0)
        {
          if (parts.n == 0)
            {
              strv_free (&parts);
              return NULL;
            }
          free (parts.v[--parts.n]);
          parts.v[parts.n] = NULL;
          continue;
        }
      strv_push (&parts, xstrdup (tok));
    }
  for (i = 0; i < parts.n; i++)
    len += strlen (parts.v[i]) + 1;
  out = o = xmalloc0 (len + 1);
  for (i = 0; i < parts.n; i++)
    o += sprintf (o, "%s%s", i ? "/" : "", parts.v[i]);
  strv_free (&parts);
  return out;
}

/* Position a new reader of the outer archive at the regular file NAME,
   following the links of resolve_in_archive.  */
static int
find_layer (struct source *src, const char *name, struct archive **outerp, esbx_error_t *err)
{
  _cleanup_free_ char *want = xstrdup (name);
  _cleanup_free_ char *shown = esbx_quote_path (name);
  int hops;

  for (hops = 0; hops < 8; hops++)
    {
      _cleanup_archive_read_ struct archive *outer = NULL;
      struct archive_entry *e;
      int r;

      if (esbx_import_open_source (src, &outer, err) < 0)
        return -1;
      while ((r = esbx_import_next_header (outer, &e, err)) > 0)
        {
          _cleanup_free_ char *rel = NULL;
          esbx_error_t sub = NULL;
          const char *path = archive_entry_pathname (e);

          if (esbx_clean_relpath (path ? path : "", true, &rel, &sub) < 0)
            {
              esbx_error_free (&sub);
              continue;
            }
          if (strcmp (rel, want) != 0)
            continue;
          if (archive_entry_filetype (e) == AE_IFREG)
            {
              *outerp = steal_pointer (&outer);
              return 0;
            }
          if (archive_entry_filetype (e) == AE_IFLNK && archive_entry_symlink (e))
            {
              char *next = resolve_in_archive (rel, archive_entry_symlink (e));

              if (next == NULL)
                return esbx_make_error (err, 0, "image layer `%s` links outside the archive",
                                        shown);
              free (want);
              want = next;
              break;
            }
          return esbx_make_error (err, 0, "image layer `%s` is not a file", shown);
        }
      if (r < 0)
        return -1;
      if (r == 0)
        return esbx_make_error (err, 0, "image layer `%s` listed in manifest.json is missing",
                                shown);
    }
  return esbx_make_error (err, ELOOP, "image layer `%s`", shown);
}

static int
import_layer (struct importer *im, struct source *src, const char *name, bool whiteouts,
              esbx_error_t *err)
{
  _cleanup_archive_read_ struct archive *outer = NULL;
  _cleanup_archive_read_ struct archive *inner = NULL;
  _cleanup_free_ struct nested *nested = xmalloc0 (sizeof *nested);
  _cleanup_free_ char *shown = esbx_quote_path (name);

  if (find_layer (src, name, &outer, err) < 0)
    return -1;
  nested->outer = outer;
  inner = archive_read_new ();
  archive_read_support_format_tar (inner);
  esbx_import_support_filters (inner);
  if (archive_read_open (inner, nested, NULL, nested_read, NULL) != ARCHIVE_OK)
    {
      esbx_import_archive_fail (inner, "read", err);
      return esbx_error_wrap (err, "image layer `%s`", shown);
    }
  if (whiteouts)
    return esbx_import_apply_whiteouts (im, inner, err);
  return esbx_import_extract (im, inner, EXTRACT_SKIP_WHITEOUTS | EXTRACT_REPLACE_DIRS, err);
}

/* The manifest of a `docker save` archive, or NULL for any other archive.
   A plain project may well have a manifest.json of its own: only docker's
   shape counts.  */
int
esbx_import_read_manifest (struct importer *im, struct source *src, json_t **out, esbx_error_t *err)
{
  _cleanup_archive_read_ struct archive *a = NULL;
  _cleanup_free_ char *buf = NULL;
  struct archive_entry *e;
  uint64_t seen = 0;
  la_ssize_t n;
  int64_t size;
  int r;

  *out = NULL;
  if (esbx_import_open_source (src, &a, err) < 0)
    return -1;
  while ((r = esbx_import_next_header (a, &e, err)) > 0)
    {
      const char *name = archive_entry_pathname (e);
      json_t *j, *first, *layers;
      esbx_error_t sub = NULL;

      if (esbx_import_count_entry (im, &seen, err) < 0)
        return -1;
      if (name == NULL || archive_entry_filetype (e) != AE_IFREG
          || (strcmp (name, "manifest.json") != 0 && strcmp (name, "./manifest.json") != 0))
        continue;
      size = archive_entry_size (e);
      if (size <= 0 || size > MANIFEST_MAX)
        continue;
      buf = xmalloc ((size_t)size);
      n = archive_read_data (a, buf, (size_t)size);
      if (n != size)
        return esbx_import_archive_fail (a, "read manifest.json", err);
      j = json_parse (buf, (size_t)n, &sub);
      esbx_error_free (&sub);
      first = j && j->type == JSON_ARRAY ? json_at (j, 0) : NULL;
      layers = json_get (first, "Layers");
      if (layers == NULL || layers->type != JSON_ARRAY)
        {
          json_free (j);
          return 0;
        }
      *out = j;
      return 0;
    }
  return r;
}

int
esbx_import_docker_save (struct importer *im, struct source *src, json_t *manifest,
                         esbx_error_t *err)
{
  json_t *layers = json_get (json_at (manifest, 0), "Layers");
  const json_t *layer;
  size_t i;

  if (json_len (manifest) != 1)
    return esbx_make_error (err, 0, "docker save archive holds %zu images; save one image",
                            json_len (manifest));
  json_array_foreach (layers, i, layer)
    {
      _cleanup_free_ char *name = NULL;

      if (layer->type != JSON_STRING)
        return esbx_make_error (err, 0, "manifest.json: layer %zu is not a string", i);
      if (esbx_clean_relpath (layer->text, false, &name, err) < 0)
        return esbx_error_wrap (err, "manifest.json");
      if (import_layer (im, src, name, true, err) < 0
          || import_layer (im, src, name, false, err) < 0)
        return -1;
    }
  return 0;
}
