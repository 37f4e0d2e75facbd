/* esbx-runtime: a runc-compatible OCI runtime wrapper.
 *
 * Docker (through the containerd shim) calls it exactly as it calls runc,
 * podman (through conmon) exactly as it calls crun.
 * Only `create` (and `run`, which creates) may rewrite the bundle's
 * config.json, so that a container that mounts a session's merged directory
 * joins that session's holder; every verb then execve()s runc with the
 * original arguments.  */
#ifndef ESBX_RUNTIME_H
#define ESBX_RUNTIME_H

#include "error.h"
#include "json.h"
#include "utils.h"

#include <stdbool.h>
#include <sys/types.h>

/* Where the runtime's own settings live; $ESBX_RUNTIME_CONF overrides it.  */
#define ESBX_RUNTIME_CONF "/etc/esbx/runtime.conf"
/* The annotation that names the session a container joined.  */
#define ESBX_SESSION_ANNOTATION "io.esbx.session"

struct runtime_conf
{
  char *runc;        /* runc=PATH */
  struct strv roots; /* root=PATH lines: esbx stores */
};

struct runtime
{
  int argc;
  char **argv;
  /* runc's global flags that matter to us.  */
  const char *runc_root;
  const char *log;
  const char *log_format;
  bool systemd_cgroup;
  const char *cgroup_manager; /* crun's: cgroupfs, systemd or disabled */
  int verb;                   /* index of the verb in argv; argc when there is none */
  struct runtime_conf conf;
  char *runc; /* found once, before anything else can fail */
};

/* args.c: runc's command line.  */
void runtime_parse_globals (struct runtime *rt, int argc, char **argv);

struct verb_args
{
  const char *bundle;
  const char *id;
};
/* Parse the arguments of create/run/delete (argv after the verb).  */
void runtime_parse_verb (int argc, char **argv, struct verb_args *out);

/* conf.c */
int runtime_conf_load (struct runtime_conf *conf, esbx_error_t *err);
void runtime_conf_free (struct runtime_conf *conf);
/* The esbx stores whose sessions the runtime recognises, NULL-terminated:
   $ESBX_ROOT, every root= of the config, and the default.  */
char **runtime_store_roots (const struct runtime *rt);

/* spec.c: the config.json rewrite.  Finds the one session whose merged
   directory (under one of ROOTS, index in *root) is the source of a bind
   mount: *session is NULL when there is none; an error when there are
   several, or when a mount names a session that no longer exists.  */
int spec_find_session (const json_t *config, char *const *roots, char **session, size_t *root,
                       esbx_error_t *err);
/* Join the holder PID's net/uts/ipc namespaces (the pid namespace stays the
   config's own), drop what conflicts with that, set the cgroup path (unless
   NULL) and the session annotation.  */
void spec_join_holder (json_t *config, const char *session, pid_t pid, const char *cgroups_path);
/* unjoinable.c: refuse to join a session whose holder (INFO) is a gVisor
   sandbox, or one in a user namespace from a runtime that is not host
   root (podman rootless) or for a CONFIG with a user namespace of its own
   (Docker's userns-remap, podman --userns).  */
struct esbx_holder_info;
/* OBJ's member KEY as an object, made (replacing what was there) when it
   is not one.  */
json_t *spec_object_member (json_t *obj, const char *key);
int spec_refuse_join (const char *session, const struct esbx_holder_info *info,
                      const json_t *config, esbx_error_t *err);
/* joined_userns.c: for a session in a user namespace (INFO), give the
   container its map, its root filesystem through idmapped mounts and the
   session's sysfs and mqueue, all made in *DIR (owned), whose lock *LOCK_FD
   (not close-on-exec) runc must inherit.  Nothing to do (*DIR NULL) for
   another session; on error nothing is left.  BUNDLE: root.path may be
   relative to it.  */
int spec_join_userns (struct runtime *rt, json_t *config, const char *session, const char *bundle,
                      const char *id, const struct esbx_holder_info *info, char **dir, int *lock_fd,
                      esbx_error_t *err);
/* joined_dir.c: a joined container's directory of host-side mounts.  */
char *joined_dir_path (const char *runc_root, const char *id);
int joined_dir_make (struct runtime *rt, const char *runc_root, const char *id, gid_t group,
                     char **path, int *lock_fd, esbx_error_t *err);
int joined_dir_set_work (const char *path, const char *work, esbx_error_t *err);
/* Unmount, remove the work directory, remove the entry; missing is fine.  */
int joined_dir_remove (const char *path, esbx_error_t *err);
/* joined_rootfs.c: ROOT (the engine's overlay or a plain directory) at
   TARGET through idmapped layers of MAP; *WORK (owned) the work directory
   made for it.  -2 when its filesystem cannot be idmapped.  */
struct esbx_idmap;
int joined_rootfs_mount (const char *root, const char *target, const struct esbx_idmap *map,
                         char **work, esbx_error_t *err);
/* joined_nsfs.c: the sysfs of the holder's net namespace, the mqueue of its
   ipc namespace, mounted at TARGET.  */
int joined_mount_sysfs (pid_t holder, const char *target, esbx_error_t *err);
int joined_mount_mqueue (pid_t holder, const char *target, esbx_error_t *err);
/* env.c: add the session's env (an object of strings) to process.env, key
   by key, where the config does not set the key: the image's ENV and
   `docker run -e` win.  Never HOME (runc takes the image user's), and no
   loader variable (runtime_env_is_loader) unless the config's own env has
   ESBX_SESSION_LOADER_ENV=1.  Returns the keys held back, sorted (owned;
   NULL when none).  */
json_t *spec_fill_env (json_t *config, const json_t *env);
bool runtime_env_is_loader (const char *key);

/* runc.c: find runc (rt->runc), and execve it with the original argv;
   the latter returns only on error.  "runc" stands for the wrapped runtime,
   which may be crun: its command line is runc's.  */
int runtime_find_runc (struct runtime *rt, esbx_error_t *err);
/* Whether the wrapped runtime is crun (by its file name), whose text log
   lines differ from runc's.  */
bool runtime_is_crun (const struct runtime *rt);
/* The wrapped runtime's --root, or its default.  */
const char *runtime_root (const struct runtime *rt);
int runtime_exec_runc (struct runtime *rt, esbx_error_t *err);
/* runc with the original arguments, as a child of ours (VERB names it in
   an error): its wait status in *STATUS.  For the verbs that have more to
   do after runc (a joined container's create and delete).  */
int runtime_run_runc (struct runtime *rt, const char *verb, int *status, esbx_error_t *err);

/* logfile.c: runc's log lines in --log (json or text) and on stderr.  */
void runtime_log (const struct runtime *rt, const char *level, const char *msg);

/* map.c: which session a container joined, for `delete`.  */
int runtime_map_set (const char *store_root, const char *id, const char *session,
                     esbx_error_t *err);
/* Returns the session (owned) or NULL when the container is not mapped.  */
char *runtime_map_take (const char *store_root, const char *id);

/* One file per verb.  Each returns only on error (after success it has
   exec'd runc).  */
int cmd_create (struct runtime *rt, esbx_error_t *err);
int cmd_delete (struct runtime *rt, esbx_error_t *err);
/* joined_exec.c: exec into a joined container (runc 1.1's order), and the
   create that prepares it: runc as a child, its state then patched; exits
   with runc's status.  */
int cmd_exec (struct runtime *rt, esbx_error_t *err);
int joined_create_runc (struct runtime *rt, const char *id, esbx_error_t *err);

#endif
