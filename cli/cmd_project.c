/* esbx project create|list|log|rm|squash|lifetime|network|disk|git-dir|push-git|pull-git
   (push|pull: cmd_remote.c; gate: project_gate.c) */
#include "cli.h"
#include "text.h"
#include "utils.h"

#include <getopt.h>
#include <inttypes.h>
#include <string.h>

struct create_opts
{
  const char *name;
  const char *from;
  const char *git; /* --from-git */
  const char *ref; /* --ref */
};

static int
parse_create_opts (struct esbx_cli *cli, int argc, char **argv, struct create_opts *o,
                   esbx_error_t *err)
{
  static const struct option opts[] = { { "from", required_argument, NULL, 'f' },
                                        { "from-git", required_argument, NULL, 'g' },
                                        { "ref", required_argument, NULL, 'r' },
                                        { "json", no_argument, NULL, 'J' },
                                        CLI_PROGRESS_OPTIONS,
                                        { NULL, 0, NULL, 0 } };
  int c;

  while ((c = getopt_long (argc, argv, "f:", opts, NULL)) != -1)
    {
      if (c == 'f')
        o->from = optarg;
      else if (c == 'g')
        o->git = optarg;
      else if (c == 'r')
        o->ref = optarg;
      else if (c != 'J' && !cli_progress_option (cli, c))
        return cli_usage (err, "project create: unknown option `%s`", argv[optind - 1]);
    }
  if (optind + 1 != argc)
    return cli_usage (err, "project create: expected NAME");
  if (o->from && o->git)
    return cli_usage (err, "project create: --from and --from-git exclude each other");
  if (o->ref && !o->git)
    return cli_usage (err, "project create: --ref goes with --from-git");
  o->name = argv[optind];
  return 0;
}

static int
create_remote (struct esbx_cli *cli, const struct create_opts *o, esbx_error_t *err)
{
  _cleanup_json_ json_t *body = json_new (JSON_OBJECT);

  if (o->from || o->git)
    return esbx_make_error (err, 0,
                            "project create --from%s: the gateway does not read host paths; "
                            "create the project on the host",
                            o->git ? "-git" : "");
  json_set_string (body, "name", o->name);
  return cli_gateway_print (cli, "POST", body, NULL, "name", err, "/v1/projects");
}

static int
project_create (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  struct create_opts o = { 0 };
  esbx_store_t *store;

  if (parse_create_opts (cli, argc, argv, &o, err) < 0)
    return -1;
  if (cli_gateway_mode (cli))
    return create_remote (cli, &o, err);
  cli_progress_start (cli, false);
  store = cli_store (cli, err);
  if (store == NULL
      || (o.git ? esbx_project_create_git (store, o.name, o.git, o.ref, err)
                : esbx_project_create (store, o.name, o.from, err))
             < 0)
    return -1;
  printf ("%s\n", o.name);
  return 0;
}

static int
project_list (struct esbx_cli *cli, esbx_error_t *err)
{
  esbx_store_t *store;
  _cleanup_strv_ char **names = NULL;
  _cleanup_json_ json_t *arr = NULL;
  size_t i;

  if (cli_gateway_mode (cli))
    return cli_gateway_print (cli, "GET", NULL, cli_print_projects, NULL, err, "/v1/projects");
  store = cli_store (cli, err);
  if (store == NULL || (names = esbx_project_list (store, err)) == NULL)
    return -1;
  arr = json_new (JSON_ARRAY);
  for (i = 0; names[i]; i++)
    {
      json_t *o = esbx_project_json (store, names[i], err);

      if (o == NULL)
        return -1;
      json_append (arr, o);
    }
  cli_print_projects (cli, arr);
  return 0;
}

static int
project_log (struct esbx_cli *cli, const char *name, esbx_error_t *err)
{
  _cleanup_json_ json_t *arr = NULL;
  esbx_store_t *store;

  if (cli_gateway_mode (cli))
    return cli_gateway_print (cli, "GET", NULL, cli_print_log, NULL, err, "/v1/projects/%s/log",
                              name);
  store = cli_store (cli, err);
  if (store == NULL || (arr = esbx_project_log_json (store, name, err)) == NULL)
    return -1;
  cli_print_log (cli, arr);
  return 0;
}

static int
project_rm (struct esbx_cli *cli, const char *name, esbx_error_t *err)
{
  esbx_store_t *store;

  if (cli_gateway_mode (cli))
    return cli_gateway_print (cli, "DELETE", NULL, NULL, NULL, err, "/v1/projects/%s", name);
  store = cli_store (cli, err);
  return store && esbx_project_rm (store, name, err) == 0 ? 0 : -1;
}

static int
project_squash (struct esbx_cli *cli, const char *name, esbx_error_t *err)
{
  _cleanup_free_ char *id = NULL;
  esbx_store_t *store;

  if (cli_gateway_mode (cli))
    return cli_gateway_print (cli, "POST", NULL, NULL, "layer", err, "/v1/projects/%s/squash",
                              name);
  store = cli_store (cli, err);
  if (store == NULL || esbx_project_squash (store, name, &id, err) < 0)
    return -1;
  printf ("%s\n", id);
  return 0;
}

/* esbx project lifetime NAME [--ttl D] [--idle-ttl D] [--on-expiry X]:
   the defaults of new sessions; without options, print them.  */
static int
project_lifetime (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  static const struct option opts[] = { { "ttl", required_argument, NULL, 'T' },
                                        { "idle-ttl", required_argument, NULL, 'I' },
                                        { "on-expiry", required_argument, NULL, 'E' },
                                        { "json", no_argument, NULL, 'J' },
                                        { NULL, 0, NULL, 0 } };
  const char *on_expiry = NULL;
  int64_t ttl = 0, idle = 0;
  bool set = false;
  int c;

  while ((c = getopt_long (argc, argv, "", opts, NULL)) != -1)
    switch (c)
      {
      case 'T':
        if (esbx_parse_duration (optarg, &ttl, err) < 0)
          return -1;
        set = true;
        break;
      case 'I':
        if (esbx_parse_duration (optarg, &idle, err) < 0)
          return -1;
        set = true;
        break;
      case 'E':
        on_expiry = optarg;
        set = true;
        break;
      case 'J':
        break;
      default:
        return cli_usage (err, "project lifetime: unknown option `%s`", argv[optind - 1]);
      }
  if (optind + 1 != argc)
    return cli_usage (err, "project lifetime: expected NAME");
  if (cli_gateway_mode (cli))
    return cli_usage (err, "project lifetime: a setting of the store: not through the gateway");
  if (cli_store (cli, err) == NULL)
    return -1;
  if (set)
    return esbx_lifetime_set_defaults (cli->store, argv[optind], ttl, idle, on_expiry, err);
  {
    _cleanup_json_ json_t *j = esbx_lifetime_defaults (cli->store, argv[optind], err);
    if (j == NULL)
      return -1;
    cli_print_json (j);
  }
  return 0;
}

/* esbx project disk NAME [--disk SIZE|none|default]: the disk of new
   sessions that name none ("default": the store's again); without
   options, print it.  */
static int
project_disk (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  static const struct option opts[] = { { "disk", required_argument, NULL, 'D' },
                                        { "json", no_argument, NULL, 'J' },
                                        { NULL, 0, NULL, 0 } };
  const char *size = NULL;
  int c;

  while ((c = getopt_long (argc, argv, "", opts, NULL)) != -1)
    switch (c)
      {
      case 'D':
        size = optarg;
        break;
      case 'J':
        break;
      default:
        return cli_usage (err, "project disk: unknown option `%s`", argv[optind - 1]);
      }
  if (optind + 1 != argc)
    return cli_usage (err, "project disk: expected NAME");
  if (cli_gateway_mode (cli))
    return cli_usage (err, "project disk: a setting of the store: not through the gateway");
  if (cli_store (cli, err) == NULL)
    return -1;
  if (size && strcmp (size, "default") == 0)
    return esbx_project_disk_clear (cli->store, argv[optind], err);
  if (size)
    return esbx_project_disk_set (cli->store, argv[optind], size, err);
  {
    _cleanup_json_ json_t *j = esbx_project_disk_get (cli->store, argv[optind], err);
    if (j == NULL)
      return -1;
    cli_print_json (j);
  }
  return 0;
}

/* esbx project network NAME [--network none|host|egress] [--allow ENTRY]...:
   the network of new sessions that name none; without options, print it.  */
static int
set_or_print_remote (struct esbx_cli *cli, const char *project, bool set, const char *network,
                     char *const *allow, esbx_error_t *err)
{
  _cleanup_json_ json_t *body = NULL, *j = NULL;
  json_t *list;
  size_t i;

  if (!set)
    {
      if (cli_gateway_json (cli, "GET", NULL, &j, err, "/v1/projects/%s/network", project) < 0)
        return -1;
      cli_print_json (j);
      return 0;
    }
  body = json_new (JSON_OBJECT);
  if (network)
    json_set_string (body, "network", network);
  list = json_new (JSON_ARRAY);
  for (i = 0; allow && allow[i]; i++)
    json_append (list, json_new_string (allow[i]));
  json_set (body, "allow", list);
  return cli_gateway_json (cli, "PUT", body, &j, err, "/v1/projects/%s/network", project);
}

static int
set_or_print_network (struct esbx_cli *cli, const char *project, bool set, const char *network,
                      char *const *allow, esbx_error_t *err)
{
  _cleanup_json_ json_t *j = NULL;

  if (cli_gateway_mode (cli))
    return set_or_print_remote (cli, project, set, network, allow, err);
  if (cli_store (cli, err) == NULL)
    return -1;
  if (set)
    return esbx_project_network_set (cli->store, project, network, allow, err);
  j = esbx_project_network_get (cli->store, project, err);
  if (j == NULL)
    return -1;
  cli_print_json (j);
  return 0;
}

static int
project_network (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  static const struct option opts[] = { { "network", required_argument, NULL, 'N' },
                                        { "allow", required_argument, NULL, 'A' },
                                        { "json", no_argument, NULL, 'J' },
                                        { NULL, 0, NULL, 0 } };
  struct strv allow = { 0 };
  const char *network = NULL;
  bool set = false;
  int c, ret;

  while ((c = getopt_long (argc, argv, "", opts, NULL)) != -1)
    switch (c)
      {
      case 'N':
        network = optarg;
        set = true;
        break;
      case 'A':
        strv_push (&allow, xstrdup (optarg));
        set = true;
        break;
      case 'J':
        break;
      default:
        strv_free (&allow);
        return cli_usage (err, "project network: unknown option `%s`", argv[optind - 1]);
      }
  if (optind + 1 != argc)
    ret = cli_usage (err, "project network: expected NAME");
  else
    ret = set_or_print_network (cli, argv[optind], set, network, allow.v, err);
  strv_free (&allow);
  return ret;
}

/* The store's repository of a git project, for plain git (`git fetch
   "$(esbx project git-dir P)" esbx/head`).  */
static int
project_git_dir (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  _cleanup_free_ char *dir = NULL;
  esbx_store_t *store;

  if (argc != 2)
    return cli_usage (err, "project git-dir: expected NAME");
  if (cli_gateway_mode (cli))
    return esbx_make_error (err, 0, "project git-dir: a path of the store's host; run it there");
  store = cli_store (cli, err);
  if (store == NULL)
    return -1;
  if (!esbx_project_exists (store, argv[1]))
    return esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0, "project `%s` does not exist",
                                 argv[1]);
  if (!esbx_project_is_git (store, argv[1]))
    return esbx_make_error (err, 0, "project `%s` was not made from a git repository", argv[1]);
  dir = esbx_project_git_dir (store, argv[1]);
  printf ("%s\n", dir);
  return 0;
}

/* push-git and pull-git: a git project and another repository
   (layerstore/git/git_push.c, git_pull.c), on the store or through the
   gateway (POST /v1/projects/P/push-git, /pull-git).  Credentials come
   from a secret, by name: never on the command line.  */
static const char *
str_of (const json_t *o, const char *key)
{
  const char *s = json_get_string (o, key);
  return s ? s : "";
}

static void
print_pushed (struct esbx_cli *cli, const json_t *v)
{
  int64_t n = 0;

  if (cli->json)
    {
      cli_print_json (v);
      return;
    }
  json_get_int (v, "layers", &n);
  if (!json_get_bool (v, "pushed", false))
    printf ("up to date: %s %s at %.12s (layer %s)\n", str_of (v, "remote"), str_of (v, "ref"),
            str_of (v, "commit"), str_of (v, "layer"));
  else
    printf ("pushed %" PRId64 " layer%s to %s %s: %.12s..%.12s (layer %s)\n", n, n == 1 ? "" : "s",
            str_of (v, "remote"), str_of (v, "ref"),
            json_get_string (v, "previous") ? str_of (v, "previous") : "(new)",
            str_of (v, "commit"), str_of (v, "layer"));
}

static void
print_pulled (struct esbx_cli *cli, const json_t *v)
{
  const json_t *layers = json_get (v, "layers"), *l;
  size_t i, n = json_len (layers);

  if (cli->json)
    {
      cli_print_json (v);
      return;
    }
  if (n == 0)
    {
      printf ("up to date: %s %s at %.12s\n", str_of (v, "remote"), str_of (v, "ref"),
              str_of (v, "commit"));
      return;
    }
  json_array_foreach (layers, i, l)
    printf ("%s %s\n", str_of (l, "id"), str_of (l, "commit"));
  printf ("pulled %zu commit%s of %s %s: %.12s..%.12s\n", n, n == 1 ? "" : "s",
          str_of (v, "remote"), str_of (v, "ref"), str_of (v, "previous"), str_of (v, "commit"));
}

/* `project push-git NAME REMOTE [--branch B] [--secret S]` and `project
   pull-git NAME [REMOTE] [--ref REF] [--secret S]`, ARGV[0] the
   subcommand.  */
static int
parse_git_sync (int argc, char **argv, bool push, const char **name, struct esbx_git_sync_opts *o,
                esbx_error_t *err)
{
  static const struct option opts[] = { { "branch", required_argument, NULL, 'b' },
                                        { "ref", required_argument, NULL, 'r' },
                                        { "secret", required_argument, NULL, 's' },
                                        { "json", no_argument, NULL, 'J' },
                                        { NULL, 0, NULL, 0 } };
  int c, left;

  while ((c = getopt_long (argc, argv, "", opts, NULL)) != -1)
    {
      if (c == 'b' && push)
        o->branch = optarg;
      else if (c == 'r' && !push)
        o->ref = optarg;
      else if (c == 's')
        o->secret = optarg;
      else if (c != 'J')
        return cli_usage (err, "project %s: unknown option `%s`", argv[0], argv[optind - 1]);
    }
  left = argc - optind;
  if (push ? left != 2 : left < 1 || left > 2)
    return cli_usage (err, "project %s: expected NAME %s", argv[0], push ? "REMOTE" : "[REMOTE]");
  *name = argv[optind];
  o->remote = left == 2 ? argv[optind + 1] : NULL;
  return 0;
}

static int
project_git_sync (struct esbx_cli *cli, int argc, char **argv, bool push, esbx_error_t *err)
{
  struct esbx_git_sync_opts o = { 0 };
  _cleanup_json_ json_t *view = NULL;
  const char *name = NULL;
  esbx_store_t *store;

  if (parse_git_sync (argc, argv, push, &name, &o, err) < 0)
    return -1;
  if (cli_gateway_mode (cli))
    {
      _cleanup_json_ json_t *body = json_new (JSON_OBJECT);

      if (o.remote)
        json_set_string (body, "remote", o.remote);
      if (o.branch)
        json_set_string (body, "branch", o.branch);
      if (o.ref)
        json_set_string (body, "ref", o.ref);
      if (o.secret)
        json_set_string (body, "secret", o.secret);
      return cli_gateway_print (cli, "POST", body, push ? print_pushed : print_pulled, NULL, err,
                                push ? "/v1/projects/%s/push-git" : "/v1/projects/%s/pull-git",
                                name);
    }
  store = cli_store (cli, err);
  if (store == NULL)
    return -1;
  view = push ? esbx_project_push_git (store, name, &o, err)
              : esbx_project_pull_git (store, name, &o, err);
  if (view == NULL)
    return -1;
  (push ? print_pushed : print_pulled) (cli, view);
  return 0;
}

int
cmd_project (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  const char *sub = argc > 1 ? argv[1] : NULL;

  if (sub == NULL)
    return cli_usage (err, "project: expected a subcommand");
  if (strcmp (sub, "create") == 0)
    return project_create (cli, argc - 1, argv + 1, err);
  if (strcmp (sub, "list") == 0 || strcmp (sub, "ls") == 0)
    return project_list (cli, err);
  if (strcmp (sub, "lifetime") == 0)
    return project_lifetime (cli, argc - 1, argv + 1, err);
  if (strcmp (sub, "network") == 0)
    return project_network (cli, argc - 1, argv + 1, err);
  if (strcmp (sub, "disk") == 0)
    return project_disk (cli, argc - 1, argv + 1, err);
  if (strcmp (sub, "gate") == 0)
    return cli_project_gate (cli, argc - 1, argv + 1, err);
  if (argc < 3 || argv[2][0] == '-')
    return cli_usage (err, "project %s: expected NAME", sub);
  if (strcmp (sub, "log") == 0)
    return project_log (cli, argv[2], err);
  if (strcmp (sub, "rm") == 0)
    return project_rm (cli, argv[2], err);
  if (strcmp (sub, "squash") == 0)
    return project_squash (cli, argv[2], err);
  if (strcmp (sub, "push") == 0)
    return cmd_project_push (cli, argv[2], err);
  if (strcmp (sub, "pull") == 0)
    return cmd_project_pull (cli, argv[2], err);
  if (strcmp (sub, "git-dir") == 0)
    return project_git_dir (cli, argc - 1, argv + 1, err);
  if (strcmp (sub, "push-git") == 0)
    return project_git_sync (cli, argc - 1, argv + 1, true, err);
  if (strcmp (sub, "pull-git") == 0)
    return project_git_sync (cli, argc - 1, argv + 1, false, err);
  return cli_usage (err, "project: unknown subcommand `%s`", sub);
}
