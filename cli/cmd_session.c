/* esbx session create|list|inspect|path|stop|snapshot|fork */
#include "cli.h"
#include "sandbox.h"
#include "text.h"
#include "utils.h"

#include <getopt.h>
#include <string.h>

struct create_opts
{
  const char *project;
  struct esbx_session_opts session; /* its labels and env point into LABELS and ENV */
  struct strv labels;
  struct strv env_flags;     /* --env, in order */
  struct strv env;           /* --env-file lines, then --env: later ones win */
  struct strv secrets;       /* --secret NAME[,env=VAR][,file=PATH] */
  const char *memory, *pids; /* as given, for the gateway to parse */
  const char *tmpfs_size, *shm_size, *disk;
  const char *ttl, *idle_ttl;
  struct strv allow; /* --allow, in order */
};

static int
parse_create_opts (int argc, char **argv, struct create_opts *o, esbx_error_t *err)
{
  static const struct option opts[] = { { "name", required_argument, NULL, 'n' },
                                        { "base", required_argument, NULL, 'b' },
                                        { "label", required_argument, NULL, 'l' },
                                        { "network", required_argument, NULL, 'N' },
                                        { "workspace", required_argument, NULL, 'w' },
                                        { "memory", required_argument, NULL, 'm' },
                                        { "pids", required_argument, NULL, 'p' },
                                        { "cpus", required_argument, NULL, 'c' },
                                        { "rootfs", required_argument, NULL, 'r' },
                                        { "env", required_argument, NULL, 'e' },
                                        { "env-file", required_argument, NULL, 'E' },
                                        { "from-snapshot", required_argument, NULL, 'S' },
                                        { "ttl", required_argument, NULL, 'T' },
                                        { "idle-ttl", required_argument, NULL, 'I' },
                                        { "on-expiry", required_argument, NULL, 'X' },
                                        { "secret", required_argument, NULL, 's' },
                                        { "json", no_argument, NULL, 'J' },
                                        { "allow", required_argument, NULL, 'A' },
                                        { "tmpfs-size", required_argument, NULL, 'Z' },
                                        { "shm-size", required_argument, NULL, 'H' },
                                        { "disk", required_argument, NULL, 'D' },
                                        { NULL, 0, NULL, 0 } };
  int c;

  while ((c = getopt_long (argc, argv, "n:b:l:e:", opts, NULL)) != -1)
    switch (c)
      {
      case 'n':
        o->session.name = optarg;
        break;
      case 'b':
        o->session.base = optarg;
        break;
      case 'l':
        strv_push (&o->labels, xstrdup (optarg));
        break;
      case 'N':
        o->session.network = optarg;
        break;
      case 'w':
        o->session.workspace = optarg;
        break;
      case 'm':
        if (esbx_parse_size (optarg, &o->session.memory, err) < 0)
          return -1;
        o->memory = optarg;
        break;
      case 'p':
        if (esbx_parse_size (optarg, &o->session.pids, err) < 0)
          return -1;
        o->pids = optarg;
        break;
      case 'c':
        o->session.cpus = optarg;
        break;
      case 'r':
        o->session.rootfs = optarg;
        break;
      case 'e':
        strv_push (&o->env_flags, xstrdup (optarg));
        break;
      case 'E':
        /* Read now: a bare KEY takes this process's value.  */
        if (cli_read_env_file (optarg, &o->env, err) < 0)
          return -1;
        break;
      case 'S':
        o->session.snapshot = optarg;
        break;
      case 'T':
        if (esbx_parse_duration (optarg, &o->session.ttl, err) < 0)
          return -1;
        o->ttl = optarg;
        break;
      case 'I':
        if (esbx_parse_duration (optarg, &o->session.idle_ttl, err) < 0)
          return -1;
        o->idle_ttl = optarg;
        break;
      case 'X':
        o->session.on_expiry = optarg;
        break;
      case 's':
        strv_push (&o->secrets, xstrdup (optarg));
        break;
      case 'J':
        break;
      case 'A':
        strv_push (&o->allow, xstrdup (optarg));
        break;
      case 'Z':
        if (esbx_parse_tmpfs_size ("--tmpfs-size", optarg, &o->session.tmpfs_size, err) < 0)
          return -1;
        o->tmpfs_size = optarg;
        break;
      case 'H':
        if (esbx_parse_tmpfs_size ("--shm-size", optarg, &o->session.shm_size, err) < 0)
          return -1;
        o->shm_size = optarg;
        break;
      case 'D':
        if (esbx_disk_size_parse (optarg, &o->session.disk, err) < 0)
          return -1;
        o->disk = optarg;
        break;
      default:
        return cli_usage (err, "%s: unknown option `%s`", argv[0], argv[optind - 1]);
      }
  if (optind + 1 != argc)
    return strcmp (argv[0], "fork") == 0 ? cli_usage (err, "session fork: expected a session")
                                         : cli_usage (err, "session create: expected PROJECT");
  o->project = argv[optind];
  o->session.labels = o->labels.v;
  /* As docker run: --env wins over --env-file, wherever they stand.  */
  for (size_t i = 0; i < o->env_flags.n; i++)
    strv_push (&o->env, xstrdup (o->env_flags.v[i]));
  o->session.env = o->env.v;
  o->session.allow = o->allow.v;
  o->session.secrets = o->secrets.v;
  return 0;
}

static int
create_local (struct esbx_cli *cli, const struct create_opts *o, esbx_error_t *err)
{
  _cleanup_free_ char *name = NULL;
  esbx_store_t *store = cli_store (cli, err);

  if (store == NULL || esbx_sandbox_create (store, o->project, &o->session, &name, err) < 0)
    return -1;
  printf ("%s\n", name);
  return 0;
}

static void
set_optional (json_t *body, const char *key, const char *value)
{
  if (value)
    json_set_string (body, key, value);
}

static int
create_remote (struct esbx_cli *cli, const struct create_opts *o, esbx_error_t *err)
{
  _cleanup_json_ json_t *body = json_new (JSON_OBJECT);
  json_t *labels = json_new (JSON_ARRAY);
  size_t i;

  for (i = 0; i < o->labels.n; i++)
    json_append (labels, json_new_string (o->labels.v[i]));
  json_set (body, "labels", labels);
  if (o->env.n > 0)
    {
      _cleanup_json_ json_t *env = NULL;

      /* Checked here too: the object sent cannot say which came last.  */
      if (esbx_session_env_parse (o->env.v, &env, err) < 0)
        return -1;
      json_set (body, "env", steal_pointer (&env));
    }
  json_set_string (body, "project", o->project);
  set_optional (body, "name", o->session.name);
  set_optional (body, "base", o->session.base);
  set_optional (body, "network", o->session.network);
  set_optional (body, "workspace", o->session.workspace);
  set_optional (body, "memory", o->memory);
  set_optional (body, "pids", o->pids);
  set_optional (body, "tmpfs_size", o->tmpfs_size);
  set_optional (body, "shm_size", o->shm_size);
  set_optional (body, "cpus", o->session.cpus);
  set_optional (body, "snapshot", o->session.snapshot);
  set_optional (body, "ttl", o->ttl);
  set_optional (body, "idle_ttl", o->idle_ttl);
  set_optional (body, "on_expiry", o->session.on_expiry);
  set_optional (body, "disk", o->disk);
  if (o->secrets.n > 0)
    {
      json_t *secrets = json_new (JSON_ARRAY);
      for (i = 0; i < o->secrets.n; i++)
        json_append (secrets, json_new_string (o->secrets.v[i]));
      json_set (body, "secrets", secrets);
    }
  if (o->allow.n > 0)
    {
      json_t *allow = json_new (JSON_ARRAY);
      for (i = 0; i < o->allow.n; i++)
        json_append (allow, json_new_string (o->allow.v[i]));
      json_set (body, "allow", allow);
    }
  return cli_gateway_print (cli, "POST", body, NULL, "name", err, "/v1/sessions");
}

static int
session_create (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  struct create_opts o = { 0 };
  int ret;

  ret = parse_create_opts (argc, argv, &o, err);
  /* An import reads host paths with the daemon's rights: local only, like
     `project create --from`.  */
  if (ret == 0 && o.session.rootfs && cli_gateway_mode (cli))
    ret = cli_usage (err, "session create: --rootfs is not available over the gateway");
  else if (ret == 0)
    ret = cli_gateway_mode (cli) ? create_remote (cli, &o, err) : create_local (cli, &o, err);
  strv_free (&o.labels);
  strv_free (&o.env_flags);
  strv_free (&o.env);
  strv_free (&o.allow);
  strv_free (&o.secrets);
  return ret;
}

static int
parse_list_opts (int argc, char **argv, const char **project, esbx_error_t *err)
{
  static const struct option opts[] = { { "project", required_argument, NULL, 'p' },
                                        { "json", no_argument, NULL, 'J' },
                                        { NULL, 0, NULL, 0 } };
  int c;

  while ((c = getopt_long (argc, argv, "p:", opts, NULL)) != -1)
    {
      if (c == 'p')
        *project = optarg;
      else if (c != 'J')
        return cli_usage (err, "session list: unknown option `%s`", argv[optind - 1]);
    }
  if (optind != argc)
    return cli_usage (err, "session list: unexpected argument `%s`", argv[optind]);
  if (*project && esbx_check_name ("project", *project, err) < 0)
    return -1;
  return 0;
}

static int
list_local (struct esbx_cli *cli, const char *project, esbx_error_t *err)
{
  esbx_store_t *store = cli_store (cli, err);
  _cleanup_json_ json_t *arr = NULL;

  if (store == NULL || (arr = esbx_sandbox_list (store, project, NULL, NULL, err)) == NULL)
    return -1;
  cli_print_sessions (cli, arr);
  return 0;
}

static int
session_list (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  const char *project = NULL;

  if (parse_list_opts (argc, argv, &project, err) < 0)
    return -1;
  if (cli_gateway_mode (cli) && project)
    return cli_gateway_print (cli, "GET", NULL, cli_print_sessions, NULL, err,
                              "/v1/sessions?project=%s", project);
  if (cli_gateway_mode (cli))
    return cli_gateway_print (cli, "GET", NULL, cli_print_sessions, NULL, err, "/v1/sessions");
  return list_local (cli, project, err);
}

static int
path_local (struct esbx_cli *cli, const char *name, esbx_error_t *err)
{
  _cleanup_free_ char *merged = NULL;
  esbx_store_t *store = cli_store (cli, err);

  /* The path is only useful mounted: mount it on demand (after a reboot,
     say).  */
  if (store == NULL || esbx_sandbox_view_acquire (store, name, &merged, err) < 0)
    return -1;
  printf ("%s\n", merged);
  return 0;
}

/* esbx session stop S: the holder and every process of the session end;
   the files stay, and the next exec starts a new holder.  */
static int
session_stop (struct esbx_cli *cli, const char *name, esbx_error_t *err)
{
  esbx_store_t *store;

  if (cli_gateway_mode (cli))
    return cli_gateway_print (cli, "POST", NULL, NULL, NULL, err, "/v1/sessions/%s/stop", name);
  store = cli_store (cli, err);
  if (store == NULL || esbx_sandbox_stop (store, name, err) < 0)
    return -1;
  return 0;
}

static int
inspect_local (struct esbx_cli *cli, const char *name, esbx_error_t *err)
{
  _cleanup_json_ json_t *j = NULL;
  esbx_store_t *store = cli_store (cli, err);

  if (store == NULL || (j = esbx_sandbox_inspect (store, name, err)) == NULL)
    return -1;
  cli_print_json (j);
  return 0;
}

static int
inspect_remote (struct esbx_cli *cli, const char *name, esbx_error_t *err)
{
  _cleanup_json_ json_t *j = NULL;

  if (cli_gateway_json (cli, "GET", NULL, &j, err, "/v1/sessions/%s", name) < 0)
    return -1;
  cli_print_json (j);
  return 0;
}

/* esbx session snapshot S [--name SNAP]: prints the snapshot's name.  */
static int
session_snapshot (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  static const struct option opts[] = { { "name", required_argument, NULL, 'n' },
                                        { "json", no_argument, NULL, 'J' },
                                        { NULL, 0, NULL, 0 } };
  _cleanup_free_ char *snap = NULL;
  const char *name = NULL;
  esbx_store_t *store;
  int c;

  while ((c = getopt_long (argc, argv, "n:", opts, NULL)) != -1)
    {
      if (c == 'n')
        name = optarg;
      else if (c != 'J')
        return cli_usage (err, "session snapshot: unknown option `%s`", argv[optind - 1]);
    }
  if (optind + 1 != argc)
    return cli_usage (err, "session snapshot: expected a session");
  if (cli_gateway_mode (cli))
    {
      _cleanup_json_ json_t *body = json_new (JSON_OBJECT);
      set_optional (body, "name", name);
      return cli_gateway_print (cli, "POST", body, NULL, "snapshot", err,
                                "/v1/sessions/%s/snapshot", argv[optind]);
    }
  store = cli_store (cli, err);
  if (store == NULL || esbx_sandbox_snapshot (store, argv[optind], name, &snap, err) < 0)
    return -1;
  printf ("%s\n", snap);
  return 0;
}

/* esbx session fork S [create options]: prints the new session's name.  */
static int
session_fork (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  struct create_opts o = { 0 };
  _cleanup_free_ char *snap = NULL, *name = NULL;
  int ret;

  ret = parse_create_opts (argc, argv, &o, err);
  if (ret == 0 && (o.session.rootfs || o.session.base || o.session.snapshot))
    ret = cli_usage (err, "session fork: --base, --from-snapshot and --rootfs do not apply: a "
                          "fork starts from the session's own state");
  if (ret == 0 && cli_gateway_mode (cli))
    {
      _cleanup_json_ json_t *body = json_new (JSON_OBJECT);
      set_optional (body, "name", o.session.name);
      set_optional (body, "ttl", o.ttl);
      set_optional (body, "idle_ttl", o.idle_ttl);
      set_optional (body, "on_expiry", o.session.on_expiry);
      set_optional (body, "disk", o.disk);
      ret = cli_gateway_print (cli, "POST", body, NULL, "name", err, "/v1/sessions/%s/fork",
                               o.project);
    }
  else if (ret == 0)
    {
      esbx_store_t *store = cli_store (cli, err);
      if (store == NULL || esbx_sandbox_fork (store, o.project, &o.session, &snap, &name, err) < 0)
        ret = -1;
      else
        printf ("%s\n", name);
    }
  strv_free (&o.labels);
  return ret;
}

int
cmd_session (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  const char *sub = argc > 1 ? argv[1] : NULL;

  if (sub == NULL)
    return cli_usage (err, "session: expected a subcommand");
  if (strcmp (sub, "snapshot") == 0)
    return session_snapshot (cli, argc - 1, argv + 1, err);
  if (strcmp (sub, "fork") == 0)
    return session_fork (cli, argc - 1, argv + 1, err);
  if (strcmp (sub, "create") == 0)
    return session_create (cli, argc - 1, argv + 1, err);
  if (strcmp (sub, "list") == 0 || strcmp (sub, "ls") == 0)
    return session_list (cli, argc - 1, argv + 1, err);
  if (strcmp (sub, "inspect") != 0 && strcmp (sub, "path") != 0 && strcmp (sub, "stop") != 0)
    return cli_usage (err, "session: unknown subcommand `%s`", sub);
  if (argc < 3 || argv[2][0] == '-')
    return cli_usage (err, "session %s: expected a session name", sub);
  if (strcmp (sub, "path") == 0 && cli_gateway_mode (cli))
    return cli_gateway_print (cli, "GET", NULL, NULL, "path", err, "/v1/sessions/%s/path", argv[2]);
  if (strcmp (sub, "path") == 0)
    return path_local (cli, argv[2], err);
  if (strcmp (sub, "stop") == 0)
    return session_stop (cli, argv[2], err);
  return cli_gateway_mode (cli) ? inspect_remote (cli, argv[2], err)
                                : inspect_local (cli, argv[2], err);
}
