/* esbx secret create NAME [--project P] [--from-file PATH] [--for HOST]...
   [--header 'NAME: T{}' | --basic USER | --query PARAM] | list [--project P]
   | rm NAME [--project P] */
#include "cli.h"
#include "fs.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>

/* The value on stdin, up to one byte more than a secret may hold so that
   the store reports the size.  */
static int
read_stdin (char **value, size_t *len, esbx_error_t *err)
{
  size_t cap = ESBX_SECRET_MAX + 2, used = 0;
  _cleanup_free_ char *buf = xmalloc (cap);
  ssize_t r;

  while (used < cap)
    {
      r = TEMP_FAILURE_RETRY (read (STDIN_FILENO, buf + used, cap - used));
      if (r < 0)
        return esbx_make_error (err, errno, "secret create: read stdin");
      if (r == 0)
        break;
      used += (size_t)r;
    }
  *value = steal_pointer (&buf);
  *len = used;
  return 0;
}

static int
create_remote (struct esbx_cli *cli, const char *name, const char *project, const json_t *inject,
               const char *value, size_t len, esbx_error_t *err)
{
  _cleanup_json_ json_t *body = json_new (JSON_OBJECT);
  _cleanup_free_ char *text = xstrndup (value, len);

  /* JSON carries text: a binary value is made where the store is.  */
  if (strlen (text) != len || !esbx_utf8_valid (text, len))
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "secret `%s`: a value that is not UTF-8 text cannot go through "
                                 "the gateway",
                                 name);
  json_set_string (body, "name", name);
  if (project)
    json_set_string (body, "project", project);
  json_set_string (body, "value", text);
  if (inject)
    {
      static const char *const keys[] = { "header", "basic", "query" };
      size_t i;

      json_set (body, "for", json_copy (json_get (inject, "for")));
      for (i = 0; i < ARRAY_SIZE (keys); i++)
        if (json_get_string (inject, keys[i]))
          json_set_string (body, keys[i], json_get_string (inject, keys[i]));
    }
  explicit_bzero (text, len);
  return cli_gateway_print (cli, "POST", body, NULL, NULL, err, "/v1/secrets");
}

static int
secret_create (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  static const struct option opts[] = { { "from-file", required_argument, NULL, 'f' },
                                        { "project", required_argument, NULL, 'p' },
                                        { "json", no_argument, NULL, 'J' },
                                        { "for", required_argument, NULL, 'F' },
                                        { "header", required_argument, NULL, 'H' },
                                        { "basic", required_argument, NULL, 'B' },
                                        { "query", required_argument, NULL, 'Q' },
                                        { NULL, 0, NULL, 0 } };
  _cleanup_free_ char *value = NULL;
  _cleanup_json_ json_t *inject = NULL;
  const char *from = NULL, *project = NULL, *name, *header = NULL, *basic = NULL, *query = NULL;
  struct strv hosts = { 0 };
  size_t len = 0;
  int c, ret;

  while ((c = getopt_long (argc, argv, "", opts, NULL)) != -1)
    {
      if (c == 'f')
        from = optarg;
      else if (c == 'p')
        project = optarg;
      else if (c == 'F')
        strv_push (&hosts, xstrdup (optarg));
      else if (c == 'H')
        header = optarg;
      else if (c == 'B')
        basic = optarg;
      else if (c == 'Q')
        query = optarg;
      else if (c != 'J')
        {
          strv_free (&hosts);
          return cli_usage (err, "secret create: unknown option `%s`", argv[optind - 1]);
        }
    }
  if (optind + 1 != argc)
    return cli_usage (err, "secret create: expected a secret name");
  name = argv[optind];
  if (esbx_check_name ("secret", name, err) < 0
      || (project && esbx_check_name ("project", project, err) < 0))
    {
      strv_free (&hosts);
      return -1;
    }
  ret = esbx_secret_inject_parse (name, hosts.v, header, basic, query, &inject, err);
  strv_free (&hosts);
  if (ret < 0)
    return -1;
  if (from)
    {
      if (esbx_read_file_at (AT_FDCWD, from, ESBX_SECRET_MAX + 2, &value, &len, err) < 0)
        {
          /* Too large: let the store say it with the limit.  */
          if (!(err && *err && (*err)->status == EFBIG))
            return esbx_error_wrap (err, "secret `%s`", name);
          esbx_error_free (err);
          value = xmalloc0 (ESBX_SECRET_MAX + 2);
          len = ESBX_SECRET_MAX + 2;
        }
    }
  else if (read_stdin (&value, &len, err) < 0)
    return -1;
  if (cli_gateway_mode (cli))
    ret = create_remote (cli, name, project, inject, value, len, err);
  else
    ret = cli_store (cli, err) == NULL
              ? -1
              : esbx_secret_create_inject (cli->store, name, project, inject, value, len, err);
  explicit_bzero (value, len);
  return ret;
}

static void
print_secrets (struct esbx_cli *cli, const json_t *arr)
{
  const json_t *t;
  size_t i;

  if (cli->json)
    {
      cli_print_json (arr);
      return;
    }
  /* PROJECT last: the columns before it read as they always did.  */
  printf ("NAME\tBYTES\tCREATED\tPROJECT\n");
  json_array_foreach (arr, i, t)
    {
      int64_t size = 0;
      json_get_int (t, "size", &size);
      printf ("%s\t%" PRId64 "\t%s\t%s\n", json_get_string (t, "name") ?: "", size,
              json_get_string (t, "created") ?: "", json_get_string (t, "project") ?: "-");
    }
}

/* [--project P] [--json], the options of list and rm; *REST: the first
   other argument's index.  */
static int
parse_project (int argc, char **argv, const char *verb, const char **project, int *rest,
               esbx_error_t *err)
{
  static const struct option opts[] = { { "project", required_argument, NULL, 'p' },
                                        { "json", no_argument, NULL, 'J' },
                                        { NULL, 0, NULL, 0 } };
  int c;

  *project = NULL;
  while ((c = getopt_long (argc, argv, "", opts, NULL)) != -1)
    {
      if (c == 'p')
        *project = optarg;
      else if (c != 'J')
        return cli_usage (err, "secret %s: unknown option `%s`", verb, argv[optind - 1]);
    }
  if (*project && esbx_check_name ("project", *project, err) < 0)
    return -1;
  *rest = optind;
  return 0;
}

static int
secret_list (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  _cleanup_json_ json_t *arr = NULL;
  const char *project;
  int rest;

  if (parse_project (argc, argv, "list", &project, &rest, err) < 0)
    return -1;
  if (rest != argc)
    return cli_usage (err, "secret list: unexpected argument `%s`", argv[rest]);
  if (cli_gateway_mode (cli) && project)
    return cli_gateway_print (cli, "GET", NULL, print_secrets, NULL, err, "/v1/secrets?project=%s",
                              project);
  if (cli_gateway_mode (cli))
    return cli_gateway_print (cli, "GET", NULL, print_secrets, NULL, err, "/v1/secrets");
  if (cli_store (cli, err) == NULL || (arr = esbx_secret_list (cli->store, project, err)) == NULL)
    return -1;
  print_secrets (cli, arr);
  return 0;
}

/* secret rm NAME [--project P]: with P, only when P owns it.  */
static int
secret_rm (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  _cleanup_free_ char *owner = NULL;
  const char *project, *name;
  int rest;

  if (parse_project (argc, argv, "rm", &project, &rest, err) < 0)
    return -1;
  if (rest + 1 != argc)
    return cli_usage (err, "secret rm: expected one secret name");
  name = argv[rest];
  if (esbx_check_name ("secret", name, err) < 0)
    return -1;
  if (cli_gateway_mode (cli) && project)
    return cli_gateway_print (cli, "DELETE", NULL, NULL, NULL, err, "/v1/secrets/%s?project=%s",
                              name, project);
  if (cli_gateway_mode (cli))
    return cli_gateway_print (cli, "DELETE", NULL, NULL, NULL, err, "/v1/secrets/%s", name);
  if (cli_store (cli, err) == NULL)
    return -1;
  if (project
      && (esbx_secret_owner (cli->store, name, &owner, err) < 0 || owner == NULL
          || strcmp (owner, project) != 0))
    {
      if (err && *err)
        return -1;
      return esbx_make_error_kind (err, ESBX_ERR_FORBIDDEN, 0,
                                   "secret `%s` is not a secret of project `%s`", name, project);
    }
  return esbx_secret_rm (cli->store, name, err);
}

int
cmd_secret (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  const char *sub = argc > 1 ? argv[1] : NULL;

  if (sub == NULL)
    return cli_usage (err, "secret: expected create, list or rm");
  if (strcmp (sub, "create") == 0)
    return secret_create (cli, argc - 1, argv + 1, err);
  if (strcmp (sub, "list") == 0 || strcmp (sub, "ls") == 0)
    return secret_list (cli, argc - 1, argv + 1, err);
  if (strcmp (sub, "rm") != 0)
    return cli_usage (err, "secret: unknown subcommand `%s`", sub);
  return secret_rm (cli, argc - 1, argv + 1, err);
}
