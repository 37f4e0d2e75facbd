/* A session's runtime state: its holder, its limits and what its cgroup
   has used.  Informational: what cannot be read is null.  */
#include "sandbox.h"
#include "cgroup.h"
#include "holder.h"
#include "utils.h"

#include <stdint.h>

static json_t *
num_or_null (uint64_t v)
{
  return v == UINT64_MAX ? json_new (JSON_NULL) : json_new_int ((int64_t)v);
}

json_t *
esbx_sandbox_status (esbx_store_t *store, const char *name)
{
  json_t *j = json_new (JSON_OBJECT);
  struct esbx_holder_info info = { 0 };
  struct esbx_session *s = NULL;
  struct esbx_cgroup_usage u;
  _cleanup_free_ char *cg = esbx_cgroup_session_path (store, name);
  esbx_error_t err = NULL;
  json_t *o;

  if (esbx_holder_get (store, name, &info, &err) == 0)
    {
      json_set_int (j, "holder", info.pid);
      json_set_int (j, "holder_starttime", (int64_t)info.starttime);
    }
  else
    json_set (j, "holder", json_new (JSON_NULL));
  esbx_error_free (&err);
  if (esbx_session_load (store, name, &s, &err) == 0)
    {
      json_set_string (j, "network", s->network ? s->network : "none");
      json_set_string (j, "workspace", s->workspace ? s->workspace : "/workspace");
      o = json_new (JSON_OBJECT);
      json_set (o, "memory", s->memory ? json_new_int ((int64_t)s->memory) : json_new (JSON_NULL));
      json_set (o, "pids", s->pids ? json_new_int ((int64_t)s->pids) : json_new (JSON_NULL));
      json_set (o, "cpus", s->cpus ? json_new_string (s->cpus) : json_new (JSON_NULL));
      json_set (j, "limits", o);
      esbx_session_free (s);
    }
  esbx_error_free (&err);
  json_set_string (j, "cgroup", info.cgroup ? info.cgroup : cg);
  json_set_int (j, "cgroup_version", esbx_cgroup_version ());
  if (esbx_cgroup_usage (info.cgroup ? info.cgroup : cg, &u, &err) == 0)
    {
      o = json_new (JSON_OBJECT);
      json_set (o, "current", num_or_null (u.memory));
      json_set (o, "peak", num_or_null (u.memory_peak));
      json_set (o, "limit", num_or_null (u.memory_limit));
      json_set (o, "oom_kills", num_or_null (u.oom_kills));
      json_set (j, "memory", o);
      o = json_new (JSON_OBJECT);
      json_set (o, "usage_usec", num_or_null (u.cpu_usec));
      json_set (j, "cpu", o);
      o = json_new (JSON_OBJECT);
      json_set (o, "current", num_or_null (u.pids));
      json_set (o, "limit", num_or_null (u.pids_limit));
      json_set (o, "denied", num_or_null (u.pids_denied));
      json_set (j, "pids", o);
    }
  else
    {
      json_set (j, "memory", json_new (JSON_NULL));
      json_set (j, "cpu", json_new (JSON_NULL));
      json_set (j, "pids", json_new (JSON_NULL));
    }
  esbx_error_free (&err);
  esbx_holder_info_free (&info);
  return j;
}

bool
esbx_sandbox_holder_running (esbx_store_t *store, const char *name)
{
  struct esbx_holder_info info = { 0 };
  esbx_error_t err = NULL;
  bool running = esbx_holder_get (store, name, &info, &err) == 0;

  esbx_holder_info_free (&info);
  esbx_error_free (&err);
  return running;
}
