/* create (and run, which creates): put a container that mounts a session's
 * merged directory into that session's holder, then become runc.
 *
 * Everything that can fail happens before config.json is replaced, and the
 * replacement is one rename: on any error runc never runs, so no container
 * exists half-way and the bundle keeps its original config.  */
#include "runtime.h"
#include "events.h"
#include "fs.h"
#include "holder.h"
#include "layerstore.h"
#include "sandbox_session.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void
cleanup_holder_infop (struct esbx_holder_info *info)
{
  esbx_holder_info_free (info);
}
#define _cleanup_holder_info_ __attribute__ ((cleanup (cleanup_holder_infop)))

/* With the systemd driver (--systemd-cgroup, crun's --cgroup-manager
   systemd) cgroupsPath is "slice:prefix:name" and systemd owns the tree;
   the holder's cgroup is plain cgroupfs, so there is no session slice to
   name.  With crun's --cgroup-manager disabled the container has no cgroup
   of its own.  Either way the container keeps the engine's placement (it
   still joins the session's namespaces) and the event says so.  */
static char *
cgroups_path (const struct runtime *rt, const struct esbx_holder_info *info, const char *id)
{
  const char *cg = info->cgroup;

  if (rt->systemd_cgroup || cg == NULL || *cg == '\0')
    return NULL;
  if (rt->cgroup_manager && strcmp (rt->cgroup_manager, "cgroupfs") != 0)
    return NULL;
  while (*cg == '/')
    cg++;
  return xasprintf ("/%s/%s", cg, id);
}

/* Replace config.json by rename, so that runc never reads half a file.  No
   fsync: the bundle lives as long as the container, which a crash ends
   anyway, and two fsyncs would double the latency we add to create.  */
static int
write_config (int bundlefd, const char *bundle, const json_t *config, esbx_error_t *err)
{
  _cleanup_free_ char *data = NULL;
  struct stat st;
  size_t len;

  if (fstatat (bundlefd, "config.json", &st, 0) < 0)
    return esbx_make_error (err, errno, "stat `%s/config.json`", bundle);
  data = json_serialize (config, false, &len);
  if (esbx_replace_file_at (bundlefd, "config.json", data, len, st.st_mode & 07777, err) < 0)
    return esbx_error_wrap (err, "bundle `%s`", bundle);
  return 0;
}

static int
mark_outside_cgroup (const struct esbx_sandbox_session *ss, esbx_error_t *err)
{
  _cleanup_close_ int fd = TEMP_FAILURE_RETRY (openat (
      ss->dfd, ESBX_HOLDER_OUTSIDE_CGROUP, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644));

  if (fd < 0)
    return esbx_make_error (err, errno, "create `%s`", ESBX_HOLDER_OUTSIDE_CGROUP);
  return 0;
}

static void
record_attached (struct runtime *rt, const struct esbx_sandbox_session *ss, const char *id,
                 const char *bundle, const struct esbx_holder_info *info, const char *cgroup,
                 json_t *withheld)
{
  json_t *fields = json_new (JSON_OBJECT);
  esbx_error_t err = NULL;

  json_set_string (fields, "container", id ? id : "");
  json_set_int (fields, "holder", info->pid);
  json_set_string (fields, "bundle", bundle);
  if (cgroup)
    json_set_string (fields, "cgroup", cgroup);
  else
    json_set (fields, "cgroup", json_new (JSON_NULL));
  if (withheld)
    json_set (fields, "env_withheld", withheld);
  /* The container is fine without its event: warn, do not fail create.  */
  if (esbx_event_append_to (ss, "container-attached", fields, &err) < 0)
    {
      _cleanup_free_ char *msg = xasprintf ("session `%s`: %s", ss->name, err->msg);
      runtime_log (rt, "warning", msg);
      esbx_error_free (&err);
    }
}

int
cmd_create (struct runtime *rt, esbx_error_t *err)
{
  _cleanup_strv_ char **roots = runtime_store_roots (rt);
  _cleanup_store_ esbx_store_t *store = NULL;
  _cleanup_sandbox_session_ struct esbx_sandbox_session *ss = NULL;
  _cleanup_holder_info_ struct esbx_holder_info info = { 0 };
  _cleanup_json_ json_t *config = NULL;
  _cleanup_json_ json_t *withheld = NULL;
  _cleanup_free_ char *session = NULL;
  _cleanup_free_ char *cgroup = NULL;
  _cleanup_free_ char *joined = NULL;
  _cleanup_close_ int bundlefd = -1;
  /* Held into runc (joined_dir.c): never closed on success.  */
  int joined_lock = -1;
  char bundle_real[PATH_MAX];
  struct verb_args args;
  const char *bundle, *store_root;
  size_t root = 0;

  runtime_parse_verb (rt->argc - rt->verb - 1, rt->argv + rt->verb + 1, &args);
  bundle = args.bundle && *args.bundle ? args.bundle : ".";
  bundlefd = TEMP_FAILURE_RETRY (open (bundle, O_DIRECTORY | O_RDONLY | O_CLOEXEC));
  if (bundlefd < 0)
    return esbx_make_error (err, errno, "open bundle `%s`", bundle);
  config = json_parse_file_at (bundlefd, "config.json", err);
  if (config == NULL)
    return esbx_error_wrap (err, "bundle `%s`", bundle);
  if (spec_find_session (config, roots, &session, &root, err) < 0)
    return esbx_error_wrap (err, "bundle `%s`", bundle);
  if (session == NULL)
    return runtime_exec_runc (rt, err);
  store_root = roots[root];

  if (esbx_store_open (store_root, &store, err) < 0)
    return esbx_error_wrap (err, "esbx session `%s`", session);
  if (esbx_sandbox_session_open (store, session, &ss, err) < 0)
    {
      if ((*err)->kind != ESBX_ERR_NOT_FOUND)
        return esbx_error_wrap (err, "esbx session `%s`: start its holder", session);
      esbx_error_free (err);
      return esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0,
                                   "esbx session `%s` does not exist (discarded?)", session);
    }
  if (esbx_holder_ensure (ss, &info, err) < 0)
    return esbx_error_wrap (err, "esbx session `%s`: start its holder", session);
  if (spec_refuse_join (session, &info, config, err) < 0)
    return -1;

  cgroup = cgroups_path (rt, &info, args.id ? args.id : "container");
  /* Outside the session cgroup, only the marker lets discard find it.  */
  if (cgroup == NULL && mark_outside_cgroup (ss, err) < 0)
    return esbx_error_wrap (err, "esbx session `%s`", session);
  spec_join_holder (config, session, info.pid, cgroup);
  withheld = spec_fill_env (config, ss->rec->env);
  if (spec_join_userns (rt, config, session, bundle, args.id, &info, &joined, &joined_lock, err)
      < 0)
    return -1;
  if (write_config (bundlefd, bundle, config, err) < 0)
    {
      esbx_error_t ignored = NULL;

      if (joined && joined_dir_remove (joined, &ignored) < 0)
        esbx_error_free (&ignored);
      if (joined_lock >= 0)
        close (joined_lock);
      return -1;
    }
  if (runtime_map_set (store_root, args.id, session, err) < 0)
    {
      /* Only `delete`'s event depends on the map.  */
      runtime_log (rt, "warning", (*err)->msg);
      esbx_error_free (err);
    }
  record_attached (rt, ss, args.id, realpath (bundle, bundle_real) ? bundle_real : bundle, &info,
                   cgroup, steal_pointer (&withheld));
  if (joined && !runtime_is_crun (rt) && strcmp (rt->argv[rt->verb], "create") == 0)
    return joined_create_runc (rt, args.id, err);
  return runtime_exec_runc (rt, err);
}
