/* liblayerstore import: the checks every entry passes, from a directory or
 * an archive alike: the limits that import.c reads, counted, and names.
 *
 * Names: every entry name and file name must be valid UTF-8 without control
 * characters, and no component may start with `.wh.`, which would read as an
 * overlayfs-era whiteout once the tree is a layer.  */
#include "importer.h"
#include "log.h"
#include "path.h"
#include "text.h"
#include "utils.h"

#include <inttypes.h>
#include <string.h>
#include <sys/stat.h>

static char *
format_bytes (uint64_t n)
{
  if (n != 0 && n % (1ULL << 30) == 0)
    return xasprintf ("%" PRIu64 " GiB", n >> 30);
  if (n != 0 && n % (1ULL << 20) == 0)
    return xasprintf ("%" PRIu64 " MiB", n >> 20);
  if (n != 0 && n % (1ULL << 10) == 0)
    return xasprintf ("%" PRIu64 " KiB", n >> 10);
  return xasprintf ("%" PRIu64 " bytes", n);
}

static int
too_big (struct importer *im, esbx_error_t *err)
{
  _cleanup_free_ char *limit = format_bytes (im->max_bytes);

  return esbx_make_error (err, 0, "%s the %s limit",
                          im->is_dir ? "tree is larger than" : "archive expands beyond", limit);
}

int
esbx_import_count_bytes (struct importer *im, uint64_t n, esbx_error_t *err)
{
  if (n > im->max_bytes || im->bytes > im->max_bytes - n)
    return too_big (im, err);
  return 0;
}

int
esbx_import_count_entry (struct importer *im, uint64_t *counter, esbx_error_t *err)
{
  if (++*counter > im->max_entries)
    return esbx_make_error (err, 0, "%s more than %" PRIu64 " entries",
                            im->is_dir ? "tree has" : "archive has", im->max_entries);
  return 0;
}

/* Names end up in shells, JSON reports and one-line errors: refuse what they
   cannot show, and `.wh.` components, which would read as whiteouts.  */
int
esbx_import_check_name (const char *name, esbx_error_t *err)
{
  _cleanup_free_ char *shown = esbx_quote_path (name);
  const unsigned char *p;
  const char *c;

  if (!esbx_utf8_valid (name, strlen (name)))
    return esbx_make_error (err, 0, "name `%s` is not valid UTF-8", shown);
  for (p = (const unsigned char *)name; *p; p++)
    if (*p < 0x20 || *p == 0x7f)
      return esbx_make_error (err, 0, "name `%s` contains a control character", shown);
  for (c = name; c; c = strchr (c, '/'))
    {
      if (*c == '/')
        c++;
      if (esbx_has_prefix (c, WHITEOUT_PREFIX))
        return esbx_make_error (err, 0, "name `%s`: names starting with `.wh.` are not allowed",
                                shown);
    }
  return 0;
}

/* The relative path an archive entry name stands for ("" for the root).  */
int
esbx_import_clean_entry_name (const char *name, char **out, esbx_error_t *err)
{
  _cleanup_free_ char *shown = NULL;

  if (name == NULL || name[0] == '\0')
    return esbx_make_error (err, 0, "entry without a name");
  if (name[0] == '/')
    {
      shown = esbx_quote_path (name);
      return esbx_make_error (err, 0, "entry `%s`: absolute paths are not allowed", shown);
    }
  return esbx_clean_relpath (name, true, out, err);
}

bool
esbx_import_missing (esbx_error_t *err)
{
  if (*err && ((*err)->status == ENOENT || (*err)->status == ENOTDIR))
    {
      esbx_error_free (err);
      return true;
    }
  return false;
}

const char *
esbx_import_last_component (const char *rel)
{
  const char *slash = strrchr (rel, '/');
  return slash ? slash + 1 : rel;
}

int
esbx_import_strip_setid (const char *rel, mode_t *mode)
{
  _cleanup_free_ char *shown = NULL;

  if ((*mode & (S_ISUID | S_ISGID)) == 0)
    return 0;
  shown = esbx_quote_path (rel);
  esbx_warn ("import: stripped setuid/setgid bits from `%s`", shown);
  *mode &= ~(mode_t)(S_ISUID | S_ISGID);
  return 1;
}

bool
esbx_import_skip_git (struct importer *im, const char *rel)
{
  const char *c;

  if (!im->skip_git)
    return false;
  for (c = rel; c; c = strchr (c, '/'))
    {
      if (*c == '/')
        c++;
      if (strncmp (c, ".git", 4) == 0 && (c[4] == '\0' || c[4] == '/'))
        {
          if (!im->warned_git)
            {
              _cleanup_free_ char *shown = esbx_quote_path (rel);
              esbx_warn ("import: `/%s` and every other .git are left out: a git repository "
                         "makes a git project with `esbx project create --from-git`",
                         shown);
            }
          im->warned_git = true;
          return true;
        }
    }
  return false;
}
