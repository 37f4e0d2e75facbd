/* The trash's free-space floor: the trash must not keep a full store full.
 * A discard that would put an entry in the trash first checks the store's
 * filesystem: an entry larger than the largest the trash takes
 * (ESBX_TRASH_MAX_ENTRY, default a quarter of the filesystem) is deleted
 * at once; when less than the floor is free (ESBX_TRASH_MIN_FREE, default
 * a tenth of the filesystem), the oldest entries are purged until it is,
 * and when even an empty trash leaves less, the entry is deleted too.
 * Each purge and each skip is said in one warning.  Sizes are "64M" or a
 * percentage of the filesystem, "10%"; 0 turns the rule off.  */
#include "internal.h"
#include "fs.h"
#include "log.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#define DEFAULT_MIN_FREE_PCT  10
#define DEFAULT_MAX_ENTRY_PCT 25

/* $VAR as bytes of a filesystem of TOTAL bytes, else DEFAULT_PCT of it.  */
static int
limit_of (const char *var, uint64_t total, unsigned default_pct, uint64_t *out, esbx_error_t *err)
{
  const char *v = getenv (var);
  size_t len;

  *out = total / 100 * default_pct;
  if (v == NULL || *v == '\0')
    return 0;
  len = strlen (v);
  if (v[len - 1] == '%')
    {
      char *end;
      unsigned long pct = strtoul (v, &end, 10);

      if (end != v + len - 1 || end == v || pct > 100)
        return esbx_make_error (err, 0, "%s: invalid size `%s`: expected e.g. 64M or 10%%", var, v);
      *out = total / 100 * pct;
      return 0;
    }
  if (esbx_parse_size (v, out, NULL) < 0)
    return esbx_make_error (err, 0, "%s: invalid size `%s`: expected e.g. 64M or 10%%", var, v);
  return 0;
}

static int
free_space (esbx_store_t *store, uint64_t *avail, uint64_t *total, esbx_error_t *err)
{
  struct statvfs sv;

  if (fstatvfs (store->rootfd, &sv) < 0)
    return esbx_make_error (err, errno, "statvfs `%s`", store->root);
  *avail = (uint64_t)sv.f_bavail * sv.f_frsize;
  *total = (uint64_t)sv.f_blocks * sv.f_frsize;
  return 0;
}

static char *
mib (uint64_t bytes)
{
  return xasprintf ("%.1f MiB", (double)bytes / (1024 * 1024));
}

/* The entry deleted longest ago (the trash lists them by name).  */
static char *
oldest (esbx_store_t *store, uint64_t *size)
{
  _cleanup_json_ json_t *list = NULL;
  const char *best = NULL, *best_at = NULL;
  esbx_error_t e = NULL;
  const json_t *o;
  size_t i;

  list = esbx_trash_list (store, &e);
  if (list == NULL)
    {
      esbx_error_free (&e);
      return NULL;
    }
  json_array_foreach (list, i, o)
    {
      const char *at = json_get_string (o, "deleted"), *entry = json_get_string (o, "entry");
      int64_t n = 0;

      if (entry == NULL || at == NULL)
        continue;
      if (best == NULL || strcmp (at, best_at) < 0)
        {
          best = entry;
          best_at = at;
          json_get_int (o, "size", &n);
          *size = (uint64_t)n;
        }
    }
  return best ? xstrdup (best) : NULL;
}

int
esbx_trash_make_room (esbx_store_t *store, const char *rel, char **why, esbx_error_t *err)
{
  _cleanup_free_ char *upper = xasprintf ("%s/upper", rel);
  unsigned long long size = 0;
  uint64_t avail, total, floor, max_entry;
  esbx_error_t ignored = NULL;

  *why = NULL;
  if (free_space (store, &avail, &total, err) < 0
      || limit_of ("ESBX_TRASH_MIN_FREE", total, DEFAULT_MIN_FREE_PCT, &floor, err) < 0
      || limit_of ("ESBX_TRASH_MAX_ENTRY", total, DEFAULT_MAX_ENTRY_PCT, &max_entry, err) < 0)
    return -1;
  if (esbx_du_at (store->rootfd, upper, &size, &ignored) < 0)
    esbx_error_free (&ignored);
  size += esbx_session_disk_allocated_at (store->rootfd, rel);
  if (max_entry > 0 && size > max_entry)
    {
      _cleanup_free_ char *s = mib (size), *m = mib (max_entry);
      *why = xasprintf ("%s, larger than the %s the trash keeps (ESBX_TRASH_MAX_ENTRY)", s, m);
      return 0;
    }
  while (floor > 0 && avail < floor)
    {
      uint64_t freed = 0;
      _cleanup_free_ char *entry = oldest (store, &freed);
      esbx_error_t e = NULL;

      if (entry == NULL)
        {
          _cleanup_free_ char *a = mib (avail), *f = mib (floor);
          *why = xasprintf ("the store's filesystem has %s free, below the trash's floor of %s "
                            "(ESBX_TRASH_MIN_FREE)",
                            a, f);
          return 0;
        }
      if (esbx_trash_purge (store, entry, NULL, &e) < 0)
        {
          esbx_warn ("trash: %s", e->msg);
          esbx_error_free (&e);
          _cleanup_free_ char *a = mib (avail), *f = mib (floor);
          *why = xasprintf ("the store's filesystem has %s free, below the trash's floor of %s", a,
                            f);
          return 0;
        }
      {
        _cleanup_free_ char *a = mib (avail), *f = mib (floor), *n = mib (freed);
        esbx_warn ("trash: purged `%s` (%s) early: the store's filesystem had %s free, below "
                   "the trash's floor of %s",
                   entry, n, a, f);
      }
      if (free_space (store, &avail, &total, err) < 0)
        return -1;
    }
  return 1;
}
