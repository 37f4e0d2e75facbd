/* Publish's check for secrets copied into the workspace: every changed
 * path and symlink target is searched for the value of each secret the
 * session holds or keeps, and every changed regular file is read in chunks
 * (each overlapping the last by the longest value less one byte, so that a
 * value across a chunk boundary is found) and searched too.  Values
 * shorter than ESBX_SECRET_SCAN_MIN bytes are not looked for: a short
 * value is found by chance in ordinary files.  The error names the path
 * (redacted when the value is in it) and the secret, never the value.  */
#include "internal.h"
#include "path.h"
#include "secret_redact.h"
#include "utils.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#define CHUNK (256u * 1024)

static bool
allowed (const char *name, char *const *allow)
{
  for (size_t i = 0; allow && allow[i]; i++)
    if (strcmp (allow[i], name) == 0)
      return true;
  return false;
}

/* The index of the secret found in the file FD, or -1 (-2 on a read
   error).  */
static ssize_t
scan_fd (int fd, const struct esbx_secret *v, size_t n, size_t longest, char *buf)
{
  size_t have = 0, i;
  ssize_t r;

  for (;;)
    {
      r = TEMP_FAILURE_RETRY (read (fd, buf + have, CHUNK));
      if (r < 0)
        return -2;
      if (r == 0)
        return -1;
      have += (size_t)r;
      for (i = 0; i < n; i++)
        if (v[i].value && memmem (buf, have, v[i].value, v[i].len) != NULL)
          return (ssize_t)i;
      /* Keep the tail that could start a value the next read completes.  */
      if (have > longest - 1)
        {
          memmove (buf, buf + have - (longest - 1), longest - 1);
          have = longest - 1;
        }
    }
}

/* The index of the first secret of V whose value S holds, or -1.  */
static ssize_t
find_in (const struct esbx_secret *v, size_t n, const char *s)
{
  size_t i;

  for (i = 0; s && i < n; i++)
    if (v[i].value && memmem (s, strlen (s), v[i].value, v[i].len) != NULL)
      return (ssize_t)i;
  return -1;
}

/* Refused when the name or the link target of C holds a value.  */
static int
scan_names (const struct esbx_change *c, const struct esbx_secret *v, size_t n, esbx_error_t *err)
{
  _cleanup_free_ char *shown = esbx_redact_string (v, n, c->path);
  ssize_t hit;

  if ((hit = find_in (v, n, c->path)) >= 0)
    return esbx_make_error_kind (err, ESBX_ERR_FORBIDDEN, 0,
                                 "the name `%s` holds the value of secret `%s`: rename it, or "
                                 "publish with --allow-secret %s",
                                 shown, v[hit].name, v[hit].name);
  if (c->type == ESBX_TYPE_SYMLINK && (hit = find_in (v, n, c->target)) >= 0)
    return esbx_make_error_kind (err, ESBX_ERR_FORBIDDEN, 0,
                                 "`%s` points at a target holding the value of secret `%s`: "
                                 "remove it, or publish with --allow-secret %s",
                                 shown, v[hit].name, v[hit].name);
  return 0;
}

int
esbx_secret_scan_changes (esbx_store_t *store, const struct esbx_session *s, int ufd,
                          const struct esbx_changeset *cs, char *const *allow, esbx_error_t *err)
{
  struct esbx_secret *v = NULL;
  _cleanup_free_ char *buf = NULL;
  size_t n = 0, i, longest = 0;
  int ret = 0;

  if (esbx_session_secrets (store, s, &v, &n, err) < 0)
    return -1;
  for (i = 0; i < n; i++)
    {
      /* Skipped values are dropped here: scan_fd sees only the others.  */
      if (v[i].len < ESBX_SECRET_SCAN_MIN || allowed (v[i].name, allow))
        {
          explicit_bzero (v[i].value, v[i].len);
          free (v[i].value);
          v[i].value = NULL;
        }
      else if (v[i].len > longest)
        longest = v[i].len;
    }
  /* Nothing to look for: no file is opened.  */
  if (longest == 0)
    {
      esbx_secrets_free (v, n);
      return 0;
    }
  buf = xmalloc (CHUNK + longest);
  for (i = 0; i < cs->n && ret == 0; i++)
    {
      const struct esbx_change *c = &cs->v[i];
      _cleanup_close_ int fd = -1;
      ssize_t hit;

      if (c->kind == ESBX_DELETED)
        continue;
      if ((ret = scan_names (c, v, n, err)) < 0)
        break;
      if (c->type != ESBX_TYPE_FILE || c->link)
        continue;
      fd = esbx_open_regular_beneath (ufd, c->path, err);
      if (fd < 0)
        {
          ret = esbx_error_wrap (err, "scan `%s` for secrets", c->path);
          break;
        }
      hit = scan_fd (fd, v, n, longest, buf);
      if (hit == -2)
        ret = esbx_make_error (err, errno, "scan `%s` for secrets", c->path);
      else if (hit >= 0)
        ret = esbx_make_error_kind (err, ESBX_ERR_FORBIDDEN, 0,
                                    "`%s` holds the value of secret `%s`: remove it, or publish "
                                    "with --allow-secret %s",
                                    c->path, v[hit].name, v[hit].name);
    }
  explicit_bzero (buf, CHUNK + longest);
  esbx_secrets_free (v, n);
  return ret;
}
