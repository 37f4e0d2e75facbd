#include "driver.h"
#include "fs.h"
#include "http.h"
#include "config.h"
#include "log.h"
#include "sandbox.h"
#include "text.h"
#include "utils.h"

#include <fcntl.h>
#include <pthread.h>
#include <string.h>

struct esbx_driver
{
  esbx_store_t *store;
  struct esbx_volumes *vols;
  /* Create with from=PATH: two volumes of a new project arriving together
     must not both import it.  */
  pthread_mutex_t project_mutex;
  /* Project of a volume created without one (esbxd --default-project, the
     config file); changed on SIGHUP while requests run.  */
  pthread_mutex_t default_mutex;
  char *default_project;
};

struct esbx_driver *
esbx_driver_new (esbx_store_t *store, struct esbx_volumes *vols)
{
  struct esbx_driver *d = xmalloc0 (sizeof *d);

  d->store = store;
  d->vols = vols;
  pthread_mutex_init (&d->project_mutex, NULL);
  pthread_mutex_init (&d->default_mutex, NULL);
  return d;
}

void
esbx_driver_set_default_project (struct esbx_driver *d, const char *project)
{
  pthread_mutex_lock (&d->default_mutex);
  free (d->default_project);
  d->default_project = project ? xstrdup (project) : NULL;
  pthread_mutex_unlock (&d->default_mutex);
}

static char *
default_project (struct esbx_driver *d)
{
  char *p;

  pthread_mutex_lock (&d->default_mutex);
  p = d->default_project ? xstrdup (d->default_project) : NULL;
  pthread_mutex_unlock (&d->default_mutex);
  return p;
}

void
esbx_driver_free (struct esbx_driver *d)
{
  if (d == NULL)
    return;
  pthread_mutex_destroy (&d->project_mutex);
  pthread_mutex_destroy (&d->default_mutex);
  free (d->default_project);
  free (d);
}

void
esbx_driver_reply_error (struct esbx_driver_reply *reply, unsigned status, const char *msg)
{
  _cleanup_json_ json_t *j = json_new (JSON_OBJECT);

  /* dockerd treats an empty Err as success.  */
  json_set_string (j, "Err", msg && *msg ? msg : "unknown error");
  free (reply->body);
  reply->body = json_serialize (j, false, NULL);
  free (reply->result);
  reply->result = xstrdup (msg && *msg ? msg : "unknown error");
  reply->status = status;
}

static int
no_such_volume (esbx_error_t *err, const char *name)
{
  return esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0, "volume `%s` does not exist", name);
}

/* A request that can never succeed as sent.  */
#define bad_request(err, ...) esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, __VA_ARGS__)

static const char *const known_options[]
    = { "project", "base", "network", "from",      "snapshot", "allow",
        "secret",  "disk", "userns",  "isolation", "resume",   "push-every" };
#define LABEL_PREFIX  "label."
#define ENV_PREFIX    "env."
#define SECRET_PREFIX "secret."
#define OPTIONS_HELP                                                                               \
  "project, base, label.KEY, env.KEY, network, from, snapshot, allow, secret, secret.KEY, disk, "  \
  "userns, isolation, resume, push-every"

/* -o secret=NAME[,env=VAR][,file=PATH], and secret.KEY=... for more than
   one (Docker keeps one value per option): session create --secret.  */
static bool
is_secret_option (const char *key)
{
  return strcmp (key, "secret") == 0
         || (esbx_has_prefix (key, SECRET_PREFIX) && key[strlen (SECRET_PREFIX)] != '\0');
}

static int
check_options (const json_t *opts, esbx_error_t *err)
{
  const char *key, *value;
  const json_t *v;
  size_t i, k;

  if (opts == NULL || opts->type == JSON_NULL)
    return 0;
  if (opts->type != JSON_OBJECT)
    return bad_request (err, "%s: Opts must be an object of strings", "Create");
  json_object_foreach (opts, i, key, v)
    {
      if (v->type != JSON_STRING)
        return bad_request (err, "option `%s`: value must be a string", key);
      value = v->text;
      for (k = 0; k < ARRAY_SIZE (known_options); k++)
        if (strcmp (key, known_options[k]) == 0)
          break;
      if (k == ARRAY_SIZE (known_options))
        {
          if ((esbx_has_prefix (key, LABEL_PREFIX) && key[strlen (LABEL_PREFIX)] != '\0')
              || is_secret_option (key))
            continue;
          if (esbx_has_prefix (key, ENV_PREFIX) && key[strlen (ENV_PREFIX)] != '\0')
            {
              if (esbx_session_env_check (key + strlen (ENV_PREFIX), value, err) < 0)
                return esbx_error_wrap (err, "option `%s`", key);
              continue;
            }
          return bad_request (err, "unknown option `%s` (known: " OPTIONS_HELP ")", key);
        }
      if (strcmp (key, "project") == 0 && esbx_check_name ("project", value, err) < 0)
        return -1;
      if (strcmp (key, "snapshot") == 0 && esbx_check_name ("snapshot", value, err) < 0)
        return -1;
      if (strcmp (key, "network") == 0 && strcmp (value, "none") != 0 && strcmp (value, "host") != 0
          && strcmp (value, "egress") != 0)
        return bad_request (err, "option `network`: `%s` is not one of none, host, egress", value);
      if (strcmp (key, "isolation") == 0 && strcmp (value, "namespaces") != 0
          && strcmp (value, "gvisor") != 0)
        return bad_request (err, "option `isolation`: `%s` is not one of namespaces, gvisor",
                            value);
      if (strcmp (key, "userns") == 0 && strcmp (value, "auto") != 0 && strcmp (value, "off") != 0)
        return bad_request (err, "option `userns`: `%s` is not one of auto, off", value);
      if (strcmp (key, "from") == 0 && value[0] != '/')
        return bad_request (err, "option `from`: `%s` is not an absolute path", value);
      if (strcmp (key, "resume") == 0 && strcmp (value, "last") != 0
          && esbx_check_name ("session", value, err) < 0)
        return esbx_error_wrap (err, "option `resume`: `last` or a session");
      if (strcmp (key, "push-every") == 0)
        {
          int64_t seconds;
          if (esbx_parse_duration (value, &seconds, err) < 0)
            return esbx_error_wrap (err, "option `push-every`");
        }
      if (strcmp (key, "disk") == 0)
        {
          int64_t bytes;
          if (esbx_disk_size_parse (value, &bytes, err) < 0)
            return esbx_error_wrap (err, "option `disk`");
        }
    }
  return 0;
}

static bool
options_equal (const json_t *a, const json_t *b)
{
  const char *key, *v;
  const json_t *value;
  size_t i;

  if (json_len (a) != json_len (b))
    return false;
  json_object_foreach (a, i, key, value)
    {
      v = json_get_string (b, key);
      if (v == NULL || value->type != JSON_STRING || strcmp (v, value->text) != 0)
        return false;
    }
  return true;
}

static int
ensure_project (struct esbx_driver *d, const char *project, const char *from, esbx_error_t *err)
{
  int ret = 0;

  if (esbx_project_exists (d->store, project))
    return 0;
  if (from == NULL)
    {
      esbx_error_t e = NULL;

      /* A shared project this host has not seen: its head from the
         remote, as `session create` does (a task placed on a new node).  */
      pthread_mutex_lock (&d->project_mutex);
      ret = esbx_project_exists (d->store, project)
                ? 0
                : esbx_project_pull (d->store, project, NULL, &e);
      pthread_mutex_unlock (&d->project_mutex);
      if (ret == 0)
        return 0;
      /* Without a remote (usage), as before.  */
      if (e->kind == ESBX_ERR_USAGE)
        ret = bad_request (err, "project `%s` does not exist (add -o from=PATH to create it)",
                           project);
      else
        ret = bad_request (err, "project `%s` does not exist (add -o from=PATH to create it): %s",
                           project, e->msg);
      esbx_error_free (&e);
      return ret;
    }
  pthread_mutex_lock (&d->project_mutex);
  if (!esbx_project_exists (d->store, project))
    {
      ret = esbx_project_create (d->store, project, from, err);
      /* The CLI may have created it in the meantime.  */
      if (ret < 0 && esbx_project_exists (d->store, project))
        {
          esbx_error_free (err);
          ret = 0;
        }
    }
  pthread_mutex_unlock (&d->project_mutex);
  if (ret < 0)
    return esbx_error_wrap (err, "create project `%s` from `%s`", project, from);
  return 0;
}

/* A session made with the CLI becomes a volume when Docker asks for its
   name; the options, if any, must describe that session.  */
static int
check_adoption (struct esbx_driver *d, const char *name, const json_t *opts, esbx_error_t *err)
{
  struct esbx_session *s = NULL;
  _cleanup_free_ char *base = NULL;
  const char *project, *want, *have, *key;
  const json_t *v;
  size_t i;
  int ret = -1;

  if (esbx_session_load (d->store, name, &s, err) < 0)
    return -1;
  project = json_get_string (opts, "project");
  if (project && strcmp (project, s->project) != 0)
    {
      esbx_make_error (err, 0, "session `%s` exists in project `%s`, not `%s`", name, s->project,
                       project);
      goto out;
    }
  want = json_get_string (opts, "base");
  if (want)
    {
      if (esbx_layer_resolve (d->store, s->project, want, &base, err) < 0)
        goto out;
      if (strcmp (base, s->base) != 0)
        {
          esbx_make_error (err, 0, "session `%s` exists with base `%s`, not `%s`", name, s->base,
                           want);
          goto out;
        }
    }
  want = json_get_string (opts, "disk");
  if (want)
    {
      int64_t bytes = 0;
      _cleanup_free_ char *have_disk = esbx_disk_size_string (s->disk);

      if (esbx_disk_size_parse (want, &bytes, err) < 0)
        goto out;
      if ((bytes > 0 ? bytes : 0) != s->disk)
        {
          esbx_make_error (err, 0, "session `%s` exists with disk `%s`, not `%s`", name, have_disk,
                           want);
          goto out;
        }
    }
  want = json_get_string (opts, "network");
  if (want && strcmp (want, s->network ? s->network : "none") != 0)
    {
      esbx_make_error (err, 0, "session `%s` exists with network `%s`, not `%s`", name,
                       s->network ? s->network : "none", want);
      goto out;
    }
  json_object_foreach (opts, i, key, v)
    {
      bool label = esbx_has_prefix (key, LABEL_PREFIX);
      const char *prefix = label ? LABEL_PREFIX : ENV_PREFIX;

      if (!label && !esbx_has_prefix (key, ENV_PREFIX))
        continue;
      have = json_get_string (label ? s->labels : s->env, key + strlen (prefix));
      if (have == NULL || strcmp (have, v->text) != 0)
        {
          esbx_make_error (err, 0, "session `%s` exists without %s `%s=%s`", name,
                           label ? "label" : "env", key + strlen (prefix), v->text);
          goto out;
        }
    }
  ret = 0;
out:
  esbx_session_free (s);
  return ret;
}

/* The project a volume NAME without `-o project=` belongs to: PROJECT of
   a name PROJECT.SESSION when PROJECT is an existing project (exactly one
   such prefix), else the default project.  The session's name is the whole
   volume name either way.  */
static char *
implied_project (struct esbx_driver *d, const char *name, esbx_error_t *err)
{
  _cleanup_free_ char *found = NULL;
  const char *dot;

  for (dot = strchr (name, '.'); dot; dot = strchr (dot + 1, '.'))
    {
      _cleanup_free_ char *prefix = xstrndup (name, (size_t)(dot - name));

      if (dot[1] == '\0' || !esbx_name_valid (prefix) || !esbx_project_exists (d->store, prefix))
        continue;
      if (found)
        {
          bad_request (err,
                       "volume `%s`: names both project `%s` and project `%s`; add -o project=NAME",
                       name, found, prefix);
          return NULL;
        }
      found = steal_pointer (&prefix);
    }
  if (found)
    return steal_pointer (&found);
  found = default_project (d);
  if (found == NULL)
    bad_request (err,
                 "volume `%s`: no project: name it PROJECT.SESSION after an existing project, "
                 "add -o project=NAME, or start esbxd with --default-project NAME (or "
                 "`default-project = NAME` in " ESBX_CONFIG_DEFAULT_PATH ")",
                 name);
  return steal_pointer (&found);
}

/* The snapshot -o resume=... names: the last one pushed of session NAME
   (resume=last) or of the session the option names, NULL when none.  */
static int
resume_snapshot (struct esbx_driver *d, const char *project, const char *name, const json_t *opts,
                 char **snap, esbx_error_t *err)
{
  const char *which = json_get_string (opts, "resume");

  if (json_get_string (opts, "snapshot") || json_get_string (opts, "base"))
    return bad_request (err, "option `resume`: not with `snapshot` or `base`");
  if (strcmp (which, "last") == 0)
    which = name;
  if (esbx_snapshot_last_pushed (d->store, project, which, snap, err) < 0)
    return esbx_error_wrap (err, "volume `%s`: resume", name);
  if (*snap)
    esbx_info ("volume `%s`: resuming from snapshot `%s` of session `%s`", name, *snap, which);
  return 0;
}

static int
create_session (struct esbx_driver *d, const char *name, const json_t *opts, esbx_error_t *err)
{
  struct esbx_session_opts so = { .name = name };
  _cleanup_strv_ char **labels = NULL, **env = NULL;
  _cleanup_free_ char **secrets = NULL;
  _cleanup_free_ char *created = NULL;
  _cleanup_free_ char *implied = NULL, *resumed = NULL;
  const char *project = json_get_string (opts, "project"), *key;
  const json_t *v;
  size_t i, n = 0, nenv = 0, nsecrets = 0;
  struct strv allow = { 0 };
  int ret;

  if (project == NULL)
    {
      implied = implied_project (d, name, err);
      if (implied == NULL)
        return -1;
      project = implied;
    }
  if (ensure_project (d, project, json_get_string (opts, "from"), err) < 0)
    return -1;

  labels = xmalloc0 ((json_len (opts) + 1) * sizeof (char *));
  env = xmalloc0 ((json_len (opts) + 1) * sizeof (char *));
  secrets = xmalloc0 ((json_len (opts) + 1) * sizeof (char *));
  json_object_foreach (opts, i, key, v)
    {
      if (is_secret_option (key))
        secrets[nsecrets++] = v->text;
      if (esbx_has_prefix (key, LABEL_PREFIX))
        labels[n++] = xasprintf ("%s=%s", key + strlen (LABEL_PREFIX), v->text);
      else if (esbx_has_prefix (key, ENV_PREFIX))
        env[nenv++] = xasprintf ("%s=%s", key + strlen (ENV_PREFIX), v->text);
    }
  so.labels = labels;
  so.env = env;
  so.secrets = secrets;
  so.base = json_get_string (opts, "base");
  so.network = json_get_string (opts, "network");
  so.snapshot = json_get_string (opts, "snapshot");
  /* A volume is mounted by containers of any runtime, and one of runc's
     root (host uid 0) has no id in the session's user namespace: it could
     not create a file there.  Only -o userns=auto asks for one, for
     volumes used with --runtime esbx alone (shim/runtime/userns.c).  */
  so.userns = json_get_string (opts, "userns") ? json_get_string (opts, "userns") : "off";
  /* -o isolation=gvisor: the volume's session is a gVisor sandbox; Docker
     mounts its workspace as any volume's.  */
  so.isolation = json_get_string (opts, "isolation");
  if (json_get_string (opts, "push-every")
      && esbx_parse_duration (json_get_string (opts, "push-every"), &so.push_every, err) < 0)
    return -1;
  /* -o resume=last (or =SESSION): the session starts from the last
     snapshot that a session of this name (or SESSION) pushed, on any host:
     a task rescheduled after its node died gets its work back.  Nothing
     pushed yet: a new session.  */
  if (json_get_string (opts, "resume")
      && resume_snapshot (d, project, name, opts, &resumed, err) < 0)
    return -1;
  if (resumed)
    so.snapshot = resumed;
  /* -o disk=SIZE: session create --disk (checked by check_options).  */
  if (json_get_string (opts, "disk")
      && esbx_disk_size_parse (json_get_string (opts, "disk"), &so.disk, err) < 0)
    return -1;
  /* -o allow=a.test,10.0.0.0/8:443: the entries of --allow, comma-separated.  */
  if (json_get_string (opts, "allow"))
    {
      _cleanup_free_ char *copy = xstrdup (json_get_string (opts, "allow"));
      char *save = NULL, *e;

      for (e = strtok_r (copy, ",", &save); e; e = strtok_r (NULL, ",", &save))
        strv_push (&allow, xstrdup (e));
      so.allow = allow.v;
    }
  ret = esbx_sandbox_create (d->store, project, &so, &created, err);
  strv_free (&allow);
  return ret < 0 ? -1 : 0;
}

static json_t *
do_create (struct esbx_driver *d, const char *name, const json_t *req, esbx_error_t *err)
{
  _cleanup_volume_ struct esbx_volume *vol = NULL;
  _cleanup_json_ json_t *empty = json_new (JSON_OBJECT);
  const json_t *opts = json_get (req, "Opts");
  struct esbx_session *s = NULL;
  _cleanup_free_ char *created = NULL;

  if (check_options (opts, err) < 0)
    return NULL;
  if (opts == NULL || opts->type != JSON_OBJECT)
    opts = empty;

  if (esbx_volume_load (d->vols, name, &vol, err) < 0)
    return NULL;
  if (vol && esbx_session_exists (d->store, name))
    {
      /* `docker run --volume-driver` creates with no options: that means
         "this volume", whatever it was made with.  */
      if (json_len (opts) == 0 || options_equal (opts, vol->opts))
        return json_new (JSON_OBJECT);
      bad_request (err, "volume `%s` already exists with other options", name);
      return NULL;
    }

  if (esbx_session_exists (d->store, name))
    {
      if (check_adoption (d, name, opts, err) < 0)
        return NULL;
      if (esbx_session_load (d->store, name, &s, err) < 0)
        return NULL;
      created = s->created ? xstrdup (s->created) : NULL;
      esbx_session_free (s);
    }
  else if (create_session (d, name, opts, err) < 0)
    return NULL;

  esbx_volume_free (vol);
  vol = esbx_volume_new (name, opts, created);
  if (esbx_volume_save (d->vols, vol, err) < 0)
    return NULL;
  return json_new (JSON_OBJECT);
}

/* A record whose session is gone was discarded (or finally published)
   behind Docker's back: the volume no longer exists, and its record goes so
   that the name can be used again.  */
static bool
forget_if_discarded (struct esbx_driver *d, struct esbx_volume **vol)
{
  esbx_error_t err = NULL;

  if (*vol == NULL || esbx_session_exists (d->store, (*vol)->name))
    return false;
  esbx_info ("volume `%s`: its session is gone; forgetting it", (*vol)->name);
  if (esbx_volume_delete (d->vols, (*vol)->name, &err) < 0)
    {
      esbx_warn ("%s", err->msg);
      esbx_error_free (&err);
    }
  esbx_volume_free (*vol);
  *vol = NULL;
  return true;
}

static int
load_existing (struct esbx_driver *d, const char *name, struct esbx_volume **vol, esbx_error_t *err)
{
  if (esbx_volume_load (d->vols, name, vol, err) < 0)
    return -1;
  forget_if_discarded (d, vol);
  if (*vol == NULL)
    return no_such_volume (err, name);
  return 0;
}

/* An anonymous volume (`docker run -v /work`): Docker names it with a
   generated id, 64 hex digits, and creates it without options; `docker
   run --rm` removes it with the container.  It never goes to the trash:
   nobody could name it to restore it, and --rm asks for nothing left.  */
static bool
anonymous (const struct esbx_volume *vol)
{
  size_t i;

  if (json_len (vol->opts) != 0 || strlen (vol->name) != 64)
    return false;
  for (i = 0; i < 64; i++)
    if (!strchr ("0123456789abcdef", vol->name[i]))
      return false;
  return true;
}

static json_t *
do_remove (struct esbx_driver *d, const char *name, const json_t *req, esbx_error_t *err)
{
  _cleanup_volume_ struct esbx_volume *vol = NULL;
  bool session = esbx_session_exists (d->store, name);

  if (esbx_volume_load (d->vols, name, &vol, err) < 0)
    return NULL;
  if (vol == NULL)
    return no_such_volume (err, name), NULL;
  if (esbx_volume_mount_total (vol) > 0)
    esbx_warn ("remove `%s`: still counted as mounted by %zu mount IDs; discarding anyway", name,
               json_len (vol->mounts));
  if (session
      && esbx_sandbox_discard (d->store, name, anonymous (vol) ? ESBX_DISCARD_FORCE : 0, err) < 0)
    return NULL;
  if (esbx_volume_delete (d->vols, name, err) < 0)
    return NULL;
  return json_new (JSON_OBJECT);
}

static const char *
required_string (const json_t *req, const char *key, esbx_error_t *err)
{
  const char *v = json_get_string (req, key);

  if (v == NULL || *v == '\0')
    bad_request (err, "request field `%s` is missing or not a string", key);
  return v && *v ? v : NULL;
}

static json_t *
mountpoint_reply (struct esbx_driver *d, const char *name)
{
  _cleanup_free_ char *merged = esbx_session_merged (d->store, name);
  json_t *r = json_new (JSON_OBJECT);

  json_set_string (r, "Mountpoint", esbx_session_is_mounted (d->store, name) ? merged : "");
  return r;
}

static json_t *
do_mount (struct esbx_driver *d, const char *name, const json_t *req, esbx_error_t *err)
{
  _cleanup_volume_ struct esbx_volume *vol = NULL;
  const char *id = required_string (req, "ID", err);

  if (id == NULL || load_existing (d, name, &vol, err) < 0)
    return NULL;
  if (esbx_sandbox_view_acquire (d->store, name, NULL, err) < 0)
    return NULL;
  esbx_volume_count_mount (vol, id, 1);
  if (esbx_volume_save (d->vols, vol, err) < 0)
    return NULL;
  return mountpoint_reply (d, name);
}

static json_t *
do_unmount (struct esbx_driver *d, const char *name, const json_t *req, esbx_error_t *err)
{
  _cleanup_volume_ struct esbx_volume *vol = NULL;
  esbx_error_t uerr = NULL;
  const char *id = required_string (req, "ID", err);
  int64_t n = 0;

  if (id == NULL || load_existing (d, name, &vol, err) < 0)
    return NULL;
  if (!json_get_int (vol->mounts, id, &n) || n <= 0)
    {
      /* dockerd retries Unmount after its own restarts; an unknown ID has
         nothing left to release.  */
      esbx_warn ("unmount `%s`: mount ID %s was not mounted", name, id);
      return json_new (JSON_OBJECT);
    }
  esbx_volume_count_mount (vol, id, -1);
  if (esbx_volume_save (d->vols, vol, err) < 0)
    return NULL;
  if (esbx_volume_mount_total (vol) == 0 && esbx_sandbox_view_release (d->store, name, &uerr) < 0)
    {
      esbx_warn ("unmount `%s`: %s", name, uerr->msg);
      esbx_error_free (&uerr);
    }
  return json_new (JSON_OBJECT);
}

static json_t *
do_path (struct esbx_driver *d, const char *name, const json_t *req, esbx_error_t *err)
{
  _cleanup_volume_ struct esbx_volume *vol = NULL;

  if (load_existing (d, name, &vol, err) < 0)
    return NULL;
  return mountpoint_reply (d, name);
}

static json_t *
volume_summary (struct esbx_driver *d, const struct esbx_volume *vol)
{
  json_t *v = json_new (JSON_OBJECT);
  _cleanup_free_ char *merged = esbx_session_merged (d->store, vol->name);

  json_set_string (v, "Name", vol->name);
  if (esbx_session_is_mounted (d->store, vol->name))
    json_set_string (v, "Mountpoint", merged);
  json_set_string (v, "CreatedAt", vol->created);
  return v;
}

static json_t *
nullable_string (const char *s)
{
  return s ? json_new_string (s) : json_new (JSON_NULL);
}

/* Status is informational: a part that cannot be computed is null and the
   reason goes to the log, so that inspect never fails on a live volume.  */
static json_t *
volume_status (struct esbx_driver *d, const struct esbx_volume *vol)
{
  _cleanup_json_ json_t *sandbox = esbx_sandbox_status (d->store, vol->name);
  struct esbx_changeset cs = { 0 };
  _cleanup_free_ char *upper = esbx_session_upper (d->store, vol->name);
  _cleanup_free_ char *head = NULL;
  struct esbx_session *s = NULL;
  esbx_error_t err = NULL;
  unsigned long long bytes;
  int64_t pid;
  json_t *st = json_new (JSON_OBJECT);
  json_t *holder;

  if (esbx_session_load (d->store, vol->name, &s, &err) == 0)
    {
      json_set_string (st, "project", s->project);
      json_set_string (st, "base", s->base);
      if (esbx_layer_resolve (d->store, s->project, "head", &head, &err) < 0)
        {
          esbx_warn ("get `%s`: head: %s", vol->name, err->msg);
          esbx_error_free (&err);
        }
      json_set (st, "head", nullable_string (head));
      json_set_string (st, "network", s->network ? s->network : "none");
      /* The record read once serves the scan too.  */
      if (esbx_session_changes_of (d->store, s, &cs, &err) == 0)
        {
          json_set_int (st, "changes", (int64_t)cs.n);
          esbx_changeset_free (&cs);
        }
      else
        {
          json_set (st, "changes", json_new (JSON_NULL));
          esbx_warn ("get `%s`: changes: %s", vol->name, err->msg);
          esbx_error_free (&err);
        }
      esbx_session_free (s);
    }
  else
    {
      json_set (st, "changes", json_new (JSON_NULL));
      esbx_warn ("get `%s`: %s", vol->name, err->msg);
      esbx_error_free (&err);
    }

  if (esbx_du_at (AT_FDCWD, upper, &bytes, &err) == 0)
    json_set_int (st, "upper_size", (int64_t)bytes);
  else
    {
      json_set (st, "upper_size", json_new (JSON_NULL));
      esbx_error_free (&err);
    }

  holder = json_get (sandbox, "holder");
  if (holder && json_int_value (holder, &pid))
    json_set_int (st, "holder", pid);
  else
    json_set (st, "holder", json_new (JSON_NULL));
  json_set_int (st, "mounts", esbx_volume_mount_total (vol));
  return st;
}

static json_t *
do_get (struct esbx_driver *d, const char *name, const json_t *req, esbx_error_t *err)
{
  _cleanup_volume_ struct esbx_volume *vol = NULL;
  json_t *v, *r;

  if (load_existing (d, name, &vol, err) < 0)
    return NULL;
  v = volume_summary (d, vol);
  json_set (v, "Status", volume_status (d, vol));
  r = json_new (JSON_OBJECT);
  json_set (r, "Volume", v);
  return r;
}

static json_t *
do_list (struct esbx_driver *d, esbx_error_t *err)
{
  _cleanup_strv_ char **names = esbx_volumes_names (d->vols, err);
  json_t *list, *r;
  size_t i;

  if (names == NULL)
    return NULL;
  list = json_new (JSON_ARRAY);
  for (i = 0; names[i]; i++)
    {
      _cleanup_volume_ struct esbx_volume *vol = NULL;
      esbx_error_t verr = NULL;

      esbx_volumes_lock (d->vols, names[i]);
      if (esbx_volume_load (d->vols, names[i], &vol, &verr) < 0)
        {
          esbx_warn ("list: %s", verr->msg);
          esbx_error_free (&verr);
        }
      else if (!forget_if_discarded (d, &vol) && vol)
        json_append (list, volume_summary (d, vol));
      esbx_volumes_unlock (d->vols, names[i]);
    }
  r = json_new (JSON_OBJECT);
  json_set (r, "Volumes", list);
  return r;
}

static json_t *
do_activate (void)
{
  json_t *r = json_new (JSON_OBJECT);
  json_t *impl = json_new (JSON_ARRAY);

  json_append (impl, json_new_string ("VolumeDriver"));
  json_set (r, "Implements", impl);
  return r;
}

static json_t *
do_capabilities (void)
{
  json_t *r = json_new (JSON_OBJECT);
  json_t *caps = json_new (JSON_OBJECT);

  json_set_string (caps, "Scope", "local");
  json_set (r, "Capabilities", caps);
  return r;
}

typedef json_t *(*volume_fn) (struct esbx_driver *d, const char *name, const json_t *req,
                              esbx_error_t *err);

static const struct
{
  const char *path;
  volume_fn fn;
} volume_endpoints[] = {
  { "/VolumeDriver.Create", do_create }, { "/VolumeDriver.Remove", do_remove },
  { "/VolumeDriver.Mount", do_mount },   { "/VolumeDriver.Unmount", do_unmount },
  { "/VolumeDriver.Path", do_path },     { "/VolumeDriver.Get", do_get },
};

static json_t *
dispatch (struct esbx_driver *d, const char *path, const json_t *req, char **subject,
          esbx_error_t *err)
{
  const char *name;
  json_t *r;
  size_t i;

  if (strcmp (path, "/Plugin.Activate") == 0)
    return do_activate ();
  if (strcmp (path, "/VolumeDriver.Capabilities") == 0)
    return do_capabilities ();
  if (strcmp (path, "/VolumeDriver.List") == 0)
    return do_list (d, err);

  for (i = 0; i < ARRAY_SIZE (volume_endpoints); i++)
    if (strcmp (path, volume_endpoints[i].path) == 0)
      break;
  if (i == ARRAY_SIZE (volume_endpoints))
    {
      esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0, "unknown endpoint `%s`", path);
      return NULL;
    }
  if (req == NULL || req->type != JSON_OBJECT)
    return bad_request (err, "%s: the request body must be a JSON object", path + 1), NULL;
  name = json_get_string (req, "Name");
  if (name == NULL)
    return bad_request (err, "%s: request field `Name` is missing or not a string", path + 1), NULL;
  *subject = xstrdup (name);
  if (esbx_check_name ("volume", name, err) < 0)
    return NULL;

  esbx_volumes_lock (d->vols, name);
  r = volume_endpoints[i].fn (d, name, req, err);
  esbx_volumes_unlock (d->vols, name);
  return r;
}

void
esbx_driver_serve (struct esbx_driver *d, const char *path, const char *body, size_t len,
                   struct esbx_driver_reply *reply)
{
  _cleanup_json_ json_t *req = NULL;
  _cleanup_json_ json_t *resp = NULL;
  esbx_error_t err = NULL;

  if (len > 0)
    {
      req = json_parse (body, len, &err);
      if (req == NULL)
        {
          esbx_error_wrap (&err, "%s: bad request body", path);
          esbx_driver_reply_error (reply, 400, err->msg);
          esbx_error_free (&err);
          return;
        }
    }

  resp = dispatch (d, path, req, &reply->subject, &err);
  if (resp == NULL)
    {
      esbx_driver_reply_error (reply, esbx_http_status_of_error (err), err->msg);
      esbx_error_free (&err);
      return;
    }
  reply->status = 200;
  reply->body = json_serialize (resp, false, NULL);
}
