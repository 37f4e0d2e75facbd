/* esbx-holder: the session's root filesystem (rootfs.c, etc.c, devfs.c, procfs.c,
   mounts.c) and the configuration the holder is started with.  */
#ifndef ESBX_HOLDER_ROOT_H
#define ESBX_HOLDER_ROOT_H

#include "error.h"

#include <stdbool.h>
#include <stdint.h>

struct holder_secret
{
  char *file; /* its name in /run/secrets */
  char *value;
  size_t len;
};

struct holder_config
{
  const char *session;
  const char *session_dir;
  const char *merged;
  const char *workspace;
  const char *network;
  const char *cgroup;
  const char *hide;        /* the store root, resolved: never visible in a session */
  const char *rootfs;      /* an image root in the store, or NULL for the host's allow-list */
  const char *resolv_conf; /* bound on the session's /etc/resolv.conf (egress), or NULL */
  const char *ca_bundle;   /* bound on /etc/ssl/certs/ca-certificates.crt (egress), or NULL */
  uint64_t tmpfs_size;     /* bytes of each of /tmp, /run, /home, /root */
  uint64_t shm_size;       /* bytes of /dev/shm */
  int ready_fd;
  struct holder_secret *secrets; /* --secret SRC:/run/secrets/FILE, read at start */
  size_t n_secrets;
};

/* rootfs.c: in a fresh mount namespace, build the session's root and pivot
   into it (see rootfs.c for what it holds).  */
int holder_setup_root (const struct holder_config *cfg, esbx_error_t *err);

/* devfs.c: the session's minimal /dev on DEV.  */
int holder_mount_dev (const char *dev, uint64_t shm_size, esbx_error_t *err);
/* procfs.c: proc and sysfs with Docker's masked and read-only paths.  */
int holder_mount_proc (const char *proc, esbx_error_t *err);
int holder_mount_sys (const char *sys, esbx_error_t *err);
/* etc.c: mask the secrets of the /etc bound at ETC.  */
int holder_mask_etc (const char *etc, esbx_error_t *err);

/* secrets.c: read ARG's value (SRC:/run/secrets/FILE) now, while the
   store is reachable; mount the session's /run/secrets under STAGE.  */
int holder_secrets_add (struct holder_config *cfg, const char *arg, esbx_error_t *err);
/* ARG is TEXT:/run/secrets/FILE: a placeholder the file holds.  */
int holder_placeholder_add (struct holder_config *cfg, const char *arg, esbx_error_t *err);
int holder_secrets_mount (const struct holder_config *cfg, const char *stage, esbx_error_t *err);

/* mounts.c */
int holder_tmpfs (const char *target, const char *options, unsigned long flags, esbx_error_t *err);
/* mount_setattr: add the MOUNT_ATTR_* flags SET.  */
int holder_setattr (const char *path, bool recursive, uint64_t set, esbx_error_t *err);
int holder_bind (const char *src, const char *dst, bool recursive, uint64_t set, esbx_error_t *err);
/* Hide PATH: a file reads as empty, a directory is an empty read-only
   tmpfs (Docker's maskedPaths).  */
int holder_mask (const char *path, esbx_error_t *err);
/* Bind PATH on itself read-only (Docker's readonlyPaths).  */
int holder_readonly (const char *path, esbx_error_t *err);

/* main.c: bring up the loopback interface of the caller's net namespace.  */
int holder_loopback_up (esbx_error_t *err);

#endif
