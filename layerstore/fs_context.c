/* The new mount API's fs context, as the overlays of sessions use it
   (mount.c by path, mount_idmap.c by idmapped fd): one setting, the
   options every session overlay has, and the error of a failed call with
   the kernel's own explanation.  */
#include "internal.h"
#include "utils.h"

#include <string.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Options that keep the upper directory made of plain files: no redirect
   xattrs, no metacopy-only copy-ups, no index of hard links.  */
const char *const esbx_overlay_plain_options[ESBX_OVERLAY_PLAIN_OPTIONS][2] = {
  { "redirect_dir", "off" },
  { "index", "off" },
  { "metacopy", "off" },
};

int
esbx_fsconfig_string (int fsfd, const char *key, const char *value)
{
  return (int)syscall (SYS_fsconfig, fsfd, FSCONFIG_SET_STRING, key, value, 0);
}

int
esbx_fsconfig_fd (int fsfd, const char *key, int fd)
{
  return (int)syscall (SYS_fsconfig, fsfd, FSCONFIG_SET_FD, key, NULL, fd);
}

int
esbx_fs_context_error (esbx_error_t *err, int fsfd, const char *what, const char *object)
{
  int saved = errno;
  char msg[512];
  ssize_t r;

  /* The reads end with ENODATA, which must not replace the cause.  */
  msg[0] = '\0';
  while ((r = read (fsfd, msg, sizeof msg - 1)) > 0)
    msg[r] = '\0';
  /* "e overlayfs: ..." : drop the severity letter.  */
  if (msg[0] != '\0' && msg[1] == ' ')
    memmove (msg, msg + 2, strlen (msg + 2) + 1);
  return esbx_make_error (err, saved, "%s `%s`%s%s", what, object, msg[0] ? ": " : "", msg);
}

int
esbx_overlay_set_plain (int fsfd, esbx_error_t *err)
{
  size_t i;

  for (i = 0; i < ESBX_OVERLAY_PLAIN_OPTIONS; i++)
    if (esbx_fsconfig_string (fsfd, esbx_overlay_plain_options[i][0],
                              esbx_overlay_plain_options[i][1])
        < 0)
      return esbx_make_error (err, errno, "overlay option %s=%s", esbx_overlay_plain_options[i][0],
                              esbx_overlay_plain_options[i][1]);
  return 0;
}
