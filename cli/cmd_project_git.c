/* esbx project push-git|pull-git: a git project and another repository
   (layerstore/git/git_push.c, git_pull.c), on the store or through the
   gateway (POST /v1/projects/P/push-git, /pull-git).  Credentials come
   from a secret, by name: never on the command line.  */
#include "cli.h"
#include "utils.h"

#include <getopt.h>
#include <inttypes.h>
#include <string.h>

static const char *
str (const json_t *o, const char *key)
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
    printf ("up to date: %s %s at %.12s (layer %s)\n", str (v, "remote"), str (v, "ref"),
            str (v, "commit"), str (v, "layer"));
  else
    printf ("pushed %" PRId64 " layer%s to %s %s: %.12s..%.12s (layer %s)\n", n, n == 1 ? "" : "s",
            str (v, "remote"), str (v, "ref"),
            json_get_string (v, "previous") ? str (v, "previous") : "(new)", str (v, "commit"),
            str (v, "layer"));
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
      printf ("up to date: %s %s at %.12s\n", str (v, "remote"), str (v, "ref"), str (v, "commit"));
      return;
    }
  json_array_foreach (layers, i, l)
    printf ("%s %s\n", str (l, "id"), str (l, "commit"));
  printf ("pulled %zu commit%s of %s %s: %.12s..%.12s\n", n, n == 1 ? "" : "s", str (v, "remote"),
          str (v, "ref"), str (v, "previous"), str (v, "commit"));
}

/* `project push-git NAME REMOTE [--branch B] [--secret S]` and `project
   pull-git NAME [REMOTE] [--ref REF] [--secret S]`, ARGV[0] the
   subcommand.  */
static int
parse (int argc, char **argv, bool push, const char **name, struct esbx_git_sync_opts *o,
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
run (struct esbx_cli *cli, int argc, char **argv, bool push, esbx_error_t *err)
{
  struct esbx_git_sync_opts o = { 0 };
  _cleanup_json_ json_t *view = NULL;
  const char *name = NULL;
  esbx_store_t *store;

  if (parse (argc, argv, push, &name, &o, err) < 0)
    return -1;
  if (cli_remote_mode (cli))
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
      return cli_remote_print (cli, "POST", body, push ? print_pushed : print_pulled, NULL, err,
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
cmd_project_push_git (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  return run (cli, argc, argv, true, err);
}

int
cmd_project_pull_git (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  return run (cli, argc, argv, false, err);
}
