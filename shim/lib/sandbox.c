/* The lifecycle of a session as its front ends see it: the CLI, the
   gateway and the Docker volume driver call these and nothing below them,
   so that what a verb means (publish then discard, when the merged view may
   be unmounted, when a rebase must wait) is decided here once.  */
#include "sandbox.h"
#include "egress.h"
#include "events.h"
#include "holder.h"
#include "log.h"
#include "ps.h"
#include "sandbox_session.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

int
esbx_sandbox_create (esbx_store_t *store, const char *project, const struct esbx_session_opts *opts,
                     char **name, esbx_error_t *err)
{
  return esbx_session_create (store, project, opts, name, err);
}

/* Where the layer goes is decided here: a shared project's head is in
   etcd, so its publish goes through the remote (started as soon as the
   project is known, beside the scan); any other's is the store's.  */
/* A project whose gate is not auto (README, "The gate") takes no layer
   from a publish: the prepared change set is filed as a request of its
   merge queue (layerstore/queue.c), whose runner lands it.  */
static int
publish (esbx_store_t *store, const char *name, const char *message, unsigned int changes,
         char *const *allow, const char *by, bool discard, struct esbx_publish_result *r,
         char **request, esbx_error_t *err)
{
  struct esbx_publish *p = NULL;
  struct esbx_remote_warm *warm = NULL;
  struct esbx_gate gate = { 0 };
  int ret = -1;

  memset (r, 0, sizeof *r);
  if (esbx_publish_open (store, name, message, &p, err) < 0)
    return -1;
  if (esbx_gate_load (store, esbx_publish_project (p), &gate, err) < 0)
    goto out;
  if (esbx_project_is_shared (store, esbx_publish_project (p)))
    warm = esbx_remote_warm_start (store, esbx_publish_project (p));
  if (esbx_publish_prepare (p, changes, allow, r, err) < 0)
    goto out;
  if (!esbx_publish_is_empty (p) && !esbx_gate_is_auto (&gate))
    {
      _cleanup_free_ char *uid = xasprintf ("uid:%u", (unsigned)getuid ());
      json_t *f;

      if (esbx_queue_file (p, by ? by : uid, discard, changes, request, err) < 0)
        goto out;
      f = json_new (JSON_OBJECT);
      json_set_string (f, "request", *request);
      {
        esbx_error_t e = NULL;
        if (esbx_event_append (store, name, "queue.filed", f, &e) < 0)
          esbx_error_free (&e);
      }
      ret = 0;
      goto out;
    }
  if (!esbx_publish_is_empty (p)
      && (warm ? esbx_remote_publish (p, warm, r, err) : esbx_publish_commit (p, r, err)) < 0)
    goto out;
  ret = esbx_publish_end (p, r, err);
out:
  esbx_gate_clear (&gate);
  esbx_publish_free (p);
  /* The remote's last request (moving its tag `head`) ran beside the
     local install and the session's record; --discard (by the caller)
     forks its remover only when no other thread runs.  */
  esbx_remote_warm_free (warm);
  return ret;
}

int
esbx_sandbox_publish_allow (esbx_store_t *store, const char *name, const char *message,
                            unsigned int flags, char *const *allow,
                            struct esbx_publish_result *result, esbx_error_t *err)
{
  _cleanup_free_ char *request = NULL;

  return esbx_sandbox_publish_as (store, name, message, flags, allow, NULL, result, &request, err);
}

int
esbx_sandbox_publish_as (esbx_store_t *store, const char *name, const char *message,
                         unsigned int flags, char *const *allow, const char *by,
                         struct esbx_publish_result *result, char **request, esbx_error_t *err)
{
  unsigned int changes = flags & ESBX_PUBLISH_INCLUDE_IGNORED ? ESBX_CHANGES_INCLUDE_IGNORED : 0;

  *request = NULL;
  if (esbx_sandbox_push_before_publish (store, name, err) < 0
      || publish (store, name, message, changes, allow, by, (flags & ESBX_PUBLISH_DISCARD) != 0,
                  result, request, err)
             < 0)
    return -1;
  /* A request filed: the session ends once it lands, not now.  */
  if (*request)
    return 0;
  if ((flags & ESBX_PUBLISH_DISCARD) && esbx_sandbox_discard (store, name, 0, err) < 0)
    return -1;
  return 0;
}

int
esbx_sandbox_discard (esbx_store_t *store, const char *name, unsigned int flags, esbx_error_t *err)
{
  if (esbx_check_name ("session", name, err) < 0)
    return -1;
  if (esbx_holder_stop (store, name, err) < 0)
    return esbx_error_wrap (err, "discard `%s`", name);
  return esbx_session_discard (store, name, flags, err);
}

int
esbx_sandbox_stop (esbx_store_t *store, const char *name, esbx_error_t *err)
{
  if (esbx_check_name ("session", name, err) < 0)
    return -1;
  if (!esbx_session_exists (store, name))
    return esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0, "session `%s` does not exist", name);
  if (esbx_holder_stop (store, name, err) < 0)
    return esbx_error_wrap (err, "stop `%s`", name);
  return 0;
}

/* How many processes other than the holder (pid 1) run in the session.  */
static size_t
processes_besides_holder (esbx_store_t *store, const char *name)
{
  _cleanup_json_ json_t *ps = esbx_ps_list (store, name, NULL);
  const json_t *p;
  size_t i, n = 0;
  int64_t pid;

  json_array_foreach (ps, i, p)
    if (json_get_int (p, "pid", &pid) && pid != 1)
      n++;
  return n;
}

int
esbx_sandbox_rebase (esbx_store_t *store, const char *name, unsigned int flags,
                     struct esbx_publish_result *result, unsigned int *did, esbx_error_t *err)
{
  _cleanup_sandbox_session_ struct esbx_sandbox_session *ss = NULL;
  struct esbx_holder_info info = { 0 };
  esbx_error_t herr = NULL;
  size_t others;
  int ret;

  *did = 0;
  if (esbx_check_name ("session", name, err) < 0)
    return -1;
  if (!esbx_session_exists (store, name))
    return esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0, "session `%s` does not exist", name);
  /* Rebase remounts the session, and the holder's mount namespace would
     keep the old overlay: the holder goes first, and a new one comes back
     after.  Processes besides it are someone's work: only --restart ends
     them.  */
  if (esbx_sandbox_holder_running (store, name))
    {
      others = processes_besides_holder (store, name);
      if (others > 0 && !(flags & ESBX_REBASE_RESTART))
        return esbx_make_error_kind (err, ESBX_ERR_BUSY, 0,
                                     "rebase `%s`: %zu process%s besides the holder run in the "
                                     "session; stop them (`esbx session stop %s`) or rebase "
                                     "with --restart",
                                     name, others, others == 1 ? "" : "es", name);
      if (esbx_sandbox_stop (store, name, err) < 0)
        return esbx_error_wrap (err, "rebase `%s`", name);
      *did |= others ? ESBX_REBASE_DID_STOP_PROCESSES : ESBX_REBASE_DID_STOP_HOLDER;
    }
  ret = esbx_session_rebase (store, name, result, err);
  if (*did == 0)
    return ret;
  /* Whatever the rebase said, the session gets its holder back, started
     from the record as the rebase left it.  */
  if (esbx_sandbox_session_open (store, name, &ss, &herr) < 0
      || esbx_holder_ensure (ss, &info, &herr) < 0)
    {
      esbx_warn ("rebase `%s`: the holder did not start again: %s", name, herr->msg);
      esbx_error_free (&herr);
    }
  else
    *did |= ESBX_REBASE_DID_RESTART_HOLDER;
  esbx_holder_info_free (&info);
  return ret;
}

int
esbx_sandbox_view_acquire (esbx_store_t *store, const char *name, char **merged, esbx_error_t *err)
{
  if (esbx_session_mount (store, name, err) < 0)
    return -1;
  /* A Docker mount, a gateway file operation: the session is in use
     (--idle-ttl).  */
  esbx_session_touch (store, name);
  if (merged)
    *merged = esbx_session_merged (store, name);
  return 0;
}

int
esbx_sandbox_view_release (esbx_store_t *store, const char *name, esbx_error_t *err)
{
  /* The holder's processes (esbx exec, esbx-runtime containers) use the
     merged view too: it stays until the session ends.  */
  if (esbx_sandbox_holder_running (store, name) || !esbx_session_is_mounted (store, name))
    return 0;
  return esbx_session_unmount (store, name, err);
}

json_t *
esbx_sandbox_list (esbx_store_t *store, const char *project, esbx_sandbox_filter_t visible,
                   const void *data, esbx_error_t *err)
{
  _cleanup_sessions_ struct esbx_sessions it = { 0 };
  struct esbx_session *s;
  json_t *arr;

  if (esbx_sessions_open (store, project, &it, err) < 0)
    return NULL;
  arr = json_new (JSON_ARRAY);
  while ((s = esbx_sessions_next (&it)))
    if (visible == NULL || visible (s, data))
      json_append (arr, esbx_session_json (store, s, NULL));
  return arr;
}

json_t *
esbx_sandbox_inspect (esbx_store_t *store, const char *name, esbx_error_t *err)
{
  struct esbx_session *s = NULL;
  json_t *j;

  if (esbx_session_load (store, name, &s, err) < 0)
    return NULL;
  j = esbx_session_json (store, s, esbx_sandbox_status (store, s->name));
  {
    json_t *egress;

    esbx_egress_record_refused (store, s->name);
    egress = esbx_egress_json (store, s);
    if (egress)
      json_set (j, "egress", egress);
  }
  esbx_session_free (s);
  return j;
}

json_t *
esbx_sandbox_rebase_json (const struct esbx_publish_result *r, unsigned int did)
{
  json_t *o = esbx_rebase_result_json (r);
  const char *holder = "untouched";

  if (did & ESBX_REBASE_DID_RESTART_HOLDER)
    holder = "restarted";
  else if (did)
    holder = "stopped";
  json_set_string (o, "holder", holder);
  json_set (o, "processes_stopped", json_new_bool (did & ESBX_REBASE_DID_STOP_PROCESSES));
  return o;
}
