/* esbx queue list [--project P] [--all]
   esbx queue show ID [--log]
   esbx queue run PROJECT
   esbx queue cancel ID  */
#include "cli.h"
#include "fs.h"
#include "queue.h"
#include "utils.h"

#include <getopt.h>
#include <string.h>
#include <unistd.h>

int
cli_queue_list (struct esbx_cli *cli, int argc, char **argv, const char *only_state,
                esbx_error_t *err)
{
  static const struct option opts[] = { { "project", required_argument, NULL, 'p' },
                                        { "all", no_argument, NULL, 'a' },
                                        { "json", no_argument, NULL, 'J' },
                                        { NULL, 0, NULL, 0 } };
  const char *project = NULL;
  bool all = false;
  _cleanup_json_ json_t *arr = NULL, *shown = NULL;
  esbx_store_t *store;
  int c;

  while ((c = getopt_long (argc, argv, "", opts, NULL)) != -1)
    {
      if (c == 'p')
        project = optarg;
      else if (c == 'a' && only_state == NULL)
        all = true;
      else if (c != 'J')
        return cli_usage (err, "%s list: unknown option `%s`", argv[0], argv[optind - 1]);
    }
  if (optind != argc)
    return cli_usage (err, "%s list: unexpected argument `%s`", argv[0], argv[optind]);
  if (cli_gateway_mode (cli))
    {
      if (cli_gateway_json (cli, "GET", NULL, &arr, err, "/v1/requests?project=%s&all=%s",
                            project ? project : "", all ? "1" : "0")
          < 0)
        return -1;
    }
  else
    {
      store = cli_store (cli, err);
      if (store == NULL || (arr = esbx_queue_list (store, project, all, err)) == NULL)
        return -1;
    }
  shown = json_new (JSON_ARRAY);
  for (size_t i = 0; i < json_len (arr); i++)
    {
      const char *s = json_get_string (json_at (arr, i), "state");
      if (only_state == NULL || (s && strcmp (s, only_state) == 0))
        json_append (shown, json_copy (json_at (arr, i)));
    }
  cli_print_requests (cli, shown);
  return 0;
}

int
cli_queue_show (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  static const struct option opts[] = { { "log", no_argument, NULL, 'l' },
                                        { "json", no_argument, NULL, 'J' },
                                        { NULL, 0, NULL, 0 } };
  bool log = false;
  esbx_store_t *store;
  int c;

  while ((c = getopt_long (argc, argv, "", opts, NULL)) != -1)
    {
      if (c == 'l')
        log = true;
      else if (c != 'J')
        return cli_usage (err, "%s show: unknown option `%s`", argv[0], argv[optind - 1]);
    }
  if (optind + 1 != argc)
    return cli_usage (err, "%s show: expected a request id", argv[0]);
  if (cli_gateway_mode (cli))
    {
      if (log)
        {
          _cleanup_free_ char *data = NULL;
          size_t len;

          if (cli_gateway_raw (cli, &data, &len, err, "/v1/requests/%s/log", argv[optind]) < 0)
            return -1;
          return fwrite (data, 1, len, stdout) == len ? 0 : esbx_make_error (err, errno, "write");
        }
      return cli_gateway_print (cli, "GET", NULL, cli_print_request, NULL, err, "/v1/requests/%s",
                                argv[optind]);
    }
  store = cli_store (cli, err);
  if (store == NULL)
    return -1;
  if (log)
    {
      _cleanup_close_ int fd = esbx_request_open_log (store, argv[optind], err);
      char buf[65536];
      ssize_t n;

      if (fd < 0)
        return -1;
      fflush (stdout);
      while ((n = read (fd, buf, sizeof buf)) > 0)
        if (esbx_write_all (STDOUT_FILENO, buf, (size_t)n) < 0)
          return esbx_make_error (err, errno, "write");
      return 0;
    }
  {
    _cleanup_json_ json_t *rec = esbx_request_load (store, argv[optind], NULL, err);
    if (rec == NULL)
      return -1;
    cli_print_request (cli, rec);
  }
  return 0;
}

static int
queue_run (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  struct esbx_queue_run_opts o = { .report = stdout };
  esbx_store_t *store;
  int r;

  if (argc != 2 || argv[1][0] == '-')
    return cli_usage (err, "queue run: expected a project");
  if (cli_gateway_mode (cli))
    return esbx_make_error (err, 0, "queue run: esbxd runs the queues of its store itself");
  store = cli_store (cli, err);
  if (store == NULL)
    return -1;
  r = esbx_queue_run (store, argv[1], &o, err);
  if (r < 0)
    return -1;
  if (r == 1)
    return esbx_make_error_kind (err, ESBX_ERR_BUSY, 0,
                                 "queue run `%s`: another runner (esbxd, or a publish --wait) "
                                 "runs this queue now",
                                 argv[1]);
  return 0;
}

int
cli_request_act (struct esbx_cli *cli, const char *verb, const char *id, const char *message,
                 esbx_error_t *err)
{
  _cleanup_free_ char *by = xasprintf ("uid:%u", (unsigned)getuid ());
  _cleanup_json_ json_t *rec = NULL;
  esbx_store_t *store;
  int r;

  if (cli_gateway_mode (cli))
    {
      _cleanup_json_ json_t *body = json_new (JSON_OBJECT);

      if (strcmp (verb, "cancel") == 0)
        return cli_gateway_print (cli, "DELETE", NULL, NULL, NULL, err, "/v1/requests/%s", id);
      if (message)
        json_set_string (body, "message", message);
      return cli_gateway_print (
          cli, "POST", body, cli->json ? cli_print_request : NULL, NULL, err,
          strcmp (verb, "approve") == 0 ? "/v1/requests/%s/approve" : "/v1/requests/%s/reject", id);
    }
  store = cli_store (cli, err);
  if (store == NULL)
    return -1;
  if (strcmp (verb, "approve") == 0)
    r = esbx_request_approve (store, id, by, message, &rec, err);
  else if (strcmp (verb, "reject") == 0)
    r = esbx_request_reject (store, id, by, message, &rec, err);
  else
    r = esbx_request_cancel (store, id, by, err);
  if (r < 0)
    return -1;
  if (rec && cli->json)
    cli_print_request (cli, rec);
  return 0;
}

int
cmd_queue (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  const char *sub = argc > 1 ? argv[1] : NULL;

  if (sub == NULL)
    return cli_usage (err, "queue: expected list, show, run or cancel");
  if (strcmp (sub, "list") == 0)
    return cli_queue_list (cli, argc - 1, argv + 1, NULL, err);
  if (strcmp (sub, "show") == 0)
    return cli_queue_show (cli, argc - 1, argv + 1, err);
  if (strcmp (sub, "run") == 0)
    return queue_run (cli, argc - 1, argv + 1, err);
  if (strcmp (sub, "cancel") == 0)
    {
      if (argc != 3)
        return cli_usage (err, "queue cancel: expected a request id");
      return cli_request_act (cli, "cancel", argv[2], NULL, err);
    }
  return cli_usage (err, "queue: unknown subcommand `%s`", sub);
}
