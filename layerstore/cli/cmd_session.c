/* esbx session create|list|inspect|path */
#include "cli.h"
#include "fs.h"
#include "sandbox.h"
#include "text.h"
#include "utils.h"

#include <fcntl.h>
#include <getopt.h>
#include <string.h>

static int
session_create (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  static const struct option opts[] = { { "name", required_argument, NULL, 'n' },
                                        { "base", required_argument, NULL, 'b' },
                                        { "label", required_argument, NULL, 'l' },
                                        { "network", required_argument, NULL, 'N' },
                                        { "workspace", required_argument, NULL, 'w' },
                                        { "memory", required_argument, NULL, 'm' },
                                        { "pids", required_argument, NULL, 'p' },
                                        { "cpus", required_argument, NULL, 'c' },
                                        { "json", no_argument, NULL, 'J' },
                                        { NULL, 0, NULL, 0 } };
  struct esbx_session_opts o = { 0 };
  struct strv labels = { 0 };
  _cleanup_free_ char *name = NULL;
  esbx_store_t *store;
  uint64_t v;
  int c, ret = -1;

  while ((c = getopt_long (argc, argv, "n:b:l:", opts, NULL)) != -1)
    switch (c)
      {
      case 'n':
        o.name = optarg;
        break;
      case 'b':
        o.base = optarg;
        break;
      case 'l':
        strv_push (&labels, xstrdup (optarg));
        break;
      case 'N':
        o.network = optarg;
        break;
      case 'w':
        o.workspace = optarg;
        break;
      case 'm':
        if (esbx_parse_size (optarg, &o.memory, err) < 0)
          goto out;
        break;
      case 'p':
        if (esbx_parse_size (optarg, &v, err) < 0)
          goto out;
        o.pids = v;
        break;
      case 'c':
        o.cpus = optarg;
        break;
      case 'J':
        break;
      default:
        cli_usage (err, "session create: unknown option `%s`", argv[optind - 1]);
        goto out;
      }
  if (optind + 1 != argc)
    {
      cli_usage (err, "session create: expected PROJECT");
      goto out;
    }
  o.labels = labels.v;
  store = cli_store (cli, err);
  if (store == NULL || esbx_session_create (store, argv[optind], &o, &name, err) < 0)
    goto out;
  printf ("%s\n", name);
  ret = 0;
out:
  strv_free (&labels);
  return ret;
}

static json_t *
session_json (esbx_store_t *store, const struct esbx_session *s, bool full)
{
  return esbx_session_json (store, s, full ? esbx_sandbox_status (store, s->name) : NULL);
}

static int
session_list (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  static const struct option opts[] = { { "project", required_argument, NULL, 'p' },
                                        { "json", no_argument, NULL, 'J' },
                                        { NULL, 0, NULL, 0 } };
  const char *project = NULL;
  esbx_store_t *store;
  _cleanup_strv_ char **names = NULL;
  _cleanup_json_ json_t *arr = json_new (JSON_ARRAY);
  size_t i;
  int c;

  while ((c = getopt_long (argc, argv, "p:", opts, NULL)) != -1)
    {
      if (c == 'p')
        project = optarg;
      else if (c != 'J')
        return cli_usage (err, "session list: unknown option `%s`", argv[optind - 1]);
    }
  if (optind != argc)
    return cli_usage (err, "session list: unexpected argument `%s`", argv[optind]);
  if (project && esbx_check_name ("project", project, err) < 0)
    return -1;
  store = cli_store (cli, err);
  if (store == NULL || (names = esbx_session_list (store, project, err)) == NULL)
    return -1;
  for (i = 0; names[i]; i++)
    {
      struct esbx_session *s = NULL;
      esbx_error_t e = NULL;

      /* A session discarded while we list is simply gone.  */
      if (esbx_session_load (store, names[i], &s, &e) < 0)
        {
          esbx_error_free (&e);
          continue;
        }
      json_append (arr, session_json (store, s, false));
      esbx_session_free (s);
    }
  cli_print_sessions (cli, arr);
  return 0;
}

int
cmd_session (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  const char *sub = argc > 1 ? argv[1] : NULL;
  struct esbx_session *s = NULL;
  esbx_store_t *store;

  if (sub == NULL)
    return cli_usage (err, "session: expected a subcommand");
  if (strcmp (sub, "create") == 0)
    return session_create (cli, argc - 1, argv + 1, err);
  if (strcmp (sub, "list") == 0 || strcmp (sub, "ls") == 0)
    return session_list (cli, argc - 1, argv + 1, err);
  if (strcmp (sub, "inspect") != 0 && strcmp (sub, "path") != 0)
    return cli_usage (err, "session: unknown subcommand `%s`", sub);
  if (argc < 3 || argv[2][0] == '-')
    return cli_usage (err, "session %s: expected a session name", sub);
  store = cli_store (cli, err);
  if (store == NULL)
    return -1;
  if (strcmp (sub, "path") == 0)
    {
      _cleanup_free_ char *merged = NULL;
      /* The path is only useful mounted: mount it on demand (after a
         reboot, say).  */
      if (esbx_session_mount (store, argv[2], err) < 0)
        return -1;
      merged = esbx_session_merged (store, argv[2]);
      printf ("%s\n", merged);
      return 0;
    }
  if (esbx_session_load (store, argv[2], &s, err) < 0)
    return -1;
  {
    _cleanup_json_ json_t *j = session_json (store, s, true);
    cli_print_json (j);
  }
  esbx_session_free (s);
  return 0;
}
