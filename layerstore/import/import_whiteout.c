/* liblayerstore import: Docker's semantics for the layers of an image, which
 * are applied in order into one destination.  Whiteouts therefore only ever
 * delete what earlier image layers put there and are realised as deletions:
 * a `.wh.NAME` entry removes NAME, `.wh..wh..opq` empties its directory, and
 * neither stays in the result.  */
#include "fs.h"
#include "importer.h"
#include "path.h"
#include "text.h"
#include "utils.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

#define OPAQUE_MARKER ".wh..wh..opq"

/* Docker semantics for a later image layer: an entry that is not a
   directory replaces a directory an earlier layer left at its path.  */
int
esbx_import_make_room (struct importer *im, const char *rel, esbx_error_t *err)
{
  _cleanup_free_ char *base = NULL;
  _cleanup_close_ int pfd = -1;
  struct stat st;

  pfd = esbx_open_parent_beneath (im->destfd, rel, &base, err);
  if (pfd < 0)
    return esbx_import_missing (err) ? 0 : -1;
  if (fstatat (pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR (st.st_mode))
    return 0;
  return esbx_rm_rf_at (pfd, base, err);
}

bool
esbx_import_is_whiteout (const char *name)
{
  return name && esbx_has_prefix (esbx_import_last_component (name), WHITEOUT_PREFIX);
}

static int
remove_beneath (struct importer *im, const char *rel, esbx_error_t *err)
{
  _cleanup_free_ char *base = NULL;
  _cleanup_close_ int pfd = -1;

  pfd = esbx_open_parent_beneath (im->destfd, rel, &base, err);
  if (pfd < 0)
    return esbx_import_missing (err) ? 0 : -1;
  return esbx_rm_rf_at (pfd, base, err);
}

static int
empty_beneath (struct importer *im, const char *rel, esbx_error_t *err)
{
  _cleanup_strv_ char **names = NULL;
  _cleanup_close_ int dfd = -1;
  char **p;

  dfd = esbx_open_beneath (im->destfd, rel, O_RDONLY | O_DIRECTORY, 0, err);
  if (dfd < 0)
    return esbx_import_missing (err) ? 0 : -1;
  names = esbx_list_dir_at (dfd, ".", err);
  if (names == NULL)
    return -1;
  for (p = names; *p; p++)
    if (esbx_rm_rf_at (dfd, *p, err) < 0)
      return -1;
  return 0;
}

int
esbx_import_apply_whiteouts (struct importer *im, struct archive *in, esbx_error_t *err)
{
  struct archive_entry *e;
  uint64_t seen = im->entries;
  int r;

  while ((r = esbx_import_next_header (in, &e, err)) > 0)
    {
      _cleanup_free_ char *rel = NULL;
      _cleanup_free_ char *victim = NULL;
      _cleanup_free_ char *shown = NULL;
      const char *base;
      size_t dirlen;

      if (esbx_import_count_entry (im, &seen, err) < 0)
        return -1;
      if (!esbx_import_is_whiteout (archive_entry_pathname (e)))
        continue;
      if (esbx_import_clean_entry_name (archive_entry_pathname (e), &rel, err) < 0)
        return -1;
      base = esbx_import_last_component (rel);
      dirlen = base == rel ? 0 : (size_t)(base - rel - 1);
      victim = strcmp (base, OPAQUE_MARKER) == 0
                   ? xstrndup (rel, dirlen)
                   : xasprintf ("%.*s%s%s", (int)dirlen, rel, dirlen ? "/" : "",
                                base + strlen (WHITEOUT_PREFIX));
      shown = esbx_quote_path (rel);
      if (strcmp (base, OPAQUE_MARKER) != 0
          && (base[strlen (WHITEOUT_PREFIX)] == '\0' || strcmp (base, ".wh..") == 0
              || strcmp (base, ".wh...") == 0))
        return esbx_make_error (err, 0, "whiteout `%s` names no file", shown);
      if (victim[0] && esbx_import_check_name (victim, err) < 0)
        return esbx_error_wrap (err, "whiteout `%s`", shown);
      if (strcmp (base, OPAQUE_MARKER) == 0)
        r = empty_beneath (im, victim, err);
      else
        r = remove_beneath (im, victim, err);
      if (r < 0)
        return esbx_error_wrap (err, "whiteout `%s`", shown);
    }
  return r;
}
