/* The session's /run/secrets: a tmpfs of the holder's own mount namespace
 * (mode 0700, read-only once filled, noexec), one 0400 file per secret
 * the session holds as a file.  The values are read from the store before
 * the holder covers /tmp (where a store may live) and wiped from its
 * memory once written; they never touch the session's upper directory,
 * the host's view of the workspace or any other mount the host sees.  */
#include "root.h"
#include "fs.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#define SECRETS_MOUNT "/run/secrets"
/* Bytes of tmpfs besides the values: inodes and rounding.  */
#define SLACK (64u * 1024)

int
holder_secrets_add (struct holder_config *cfg, const char *arg, esbx_error_t *err)
{
  const char *colon = strrchr (arg, ':'), *base;
  struct holder_secret *s;
  _cleanup_free_ char *src = NULL;

  if (colon == NULL || strncmp (colon + 1, SECRETS_MOUNT "/", strlen (SECRETS_MOUNT "/")) != 0)
    return esbx_make_error (err, EINVAL, "--secret `%s`: expected SRC:" SECRETS_MOUNT "/FILE", arg);
  base = colon + 1 + strlen (SECRETS_MOUNT "/");
  if (base[0] == '\0' || base[0] == '.' || strchr (base, '/') != NULL)
    return esbx_make_error (err, EINVAL, "--secret `%s`: bad file name", arg);
  src = xstrndup (arg, (size_t)(colon - arg));
  cfg->secrets = xrealloc (cfg->secrets, sizeof *cfg->secrets * (cfg->n_secrets + 1));
  s = &cfg->secrets[cfg->n_secrets];
  memset (s, 0, sizeof *s);
  s->file = xstrdup (base);
  if (esbx_read_file_at (AT_FDCWD, src, 1u << 20, &s->value, &s->len, err) < 0)
    return esbx_error_wrap (err, "secret `%s`", s->file);
  cfg->n_secrets++;
  return 0;
}

int
holder_placeholder_add (struct holder_config *cfg, const char *arg, esbx_error_t *err)
{
  const char *colon = strchr (arg, ':'), *base;
  struct holder_secret *s;

  if (colon == NULL || strncmp (colon + 1, SECRETS_MOUNT "/", strlen (SECRETS_MOUNT "/")) != 0)
    return esbx_make_error (err, EINVAL, "--placeholder `%s`: expected TEXT:" SECRETS_MOUNT "/FILE",
                            arg);
  base = colon + 1 + strlen (SECRETS_MOUNT "/");
  if (base[0] == '\0' || base[0] == '.' || strchr (base, '/') != NULL)
    return esbx_make_error (err, EINVAL, "--placeholder `%s`: bad file name", arg);
  cfg->secrets = xrealloc (cfg->secrets, sizeof *cfg->secrets * (cfg->n_secrets + 1));
  s = &cfg->secrets[cfg->n_secrets];
  memset (s, 0, sizeof *s);
  s->file = xstrdup (base);
  s->value = xstrndup (arg, (size_t)(colon - arg));
  s->len = strlen (s->value);
  cfg->n_secrets++;
  return 0;
}

int
holder_secrets_mount (const struct holder_config *cfg, const char *stage, esbx_error_t *err)
{
  _cleanup_free_ char *dir = xasprintf ("%s" SECRETS_MOUNT, stage);
  _cleanup_free_ char *opts = NULL;
  size_t i, total = SLACK;

  if (cfg->n_secrets == 0)
    return 0;
  for (i = 0; i < cfg->n_secrets; i++)
    total += cfg->secrets[i].len + 4096;
  opts = xasprintf ("mode=0700,size=%zu", total);
  if (mkdir (dir, 0700) < 0)
    return esbx_make_error (err, errno, "mkdir `%s`", dir);
  if (holder_tmpfs (dir, opts, MS_NODEV | MS_NOEXEC, err) < 0)
    return -1;
  for (i = 0; i < cfg->n_secrets; i++)
    {
      struct holder_secret *s = &cfg->secrets[i];
      _cleanup_free_ char *path = xasprintf ("%s/%s", dir, s->file);
      _cleanup_close_ int fd = TEMP_FAILURE_RETRY (
          open (path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0400));

      if (fd < 0 || esbx_write_all (fd, s->value, s->len) < 0)
        return esbx_make_error (err, errno, "write `" SECRETS_MOUNT "/%s`", s->file);
      explicit_bzero (s->value, s->len);
    }
  return holder_setattr (dir, false, MOUNT_ATTR_RDONLY, err);
}
