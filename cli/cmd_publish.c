/* esbx publish S [-m MESSAGE] [--discard] [--include-ignored] [--allow-secret NAME]... [--wait] */
#include "cli.h"
#include "queue.h"
#include "sandbox.h"
#include "text.h"
#include "utils.h"

#include <getopt.h>

struct publish_opts
{
  const char *session;
  const char *message;
  bool discard;         /* the final publish of a session ends it */
  bool include_ignored; /* ignore rules do not apply */
  bool wait;            /* a request filed: until it lands or is rejected */
  struct strv allow;    /* --allow-secret: values that may be published */
};

static int
parse_publish_opts (int argc, char **argv, struct publish_opts *o, esbx_error_t *err)
{
  static const struct option opts[] = { { "message", required_argument, NULL, 'm' },
                                        { "discard", no_argument, NULL, 'd' },
                                        { "include-ignored", no_argument, NULL, 'I' },
                                        { "allow-secret", required_argument, NULL, 'A' },
                                        { "json", no_argument, NULL, 'J' },
                                        { "wait", no_argument, NULL, 'w' },
                                        { NULL, 0, NULL, 0 } };
  int c;

  while ((c = getopt_long (argc, argv, "m:", opts, NULL)) != -1)
    {
      if (c == 'm')
        o->message = optarg;
      else if (c == 'w')
        o->wait = true;
      else if (c == 'd')
        o->discard = true;
      else if (c == 'I')
        o->include_ignored = true;
      else if (c == 'A')
        {
          if (esbx_check_name ("secret", optarg, err) < 0)
            return -1;
          strv_push (&o->allow, xstrdup (optarg));
        }
      else if (c != 'J')
        return cli_usage (err, "publish: unknown option `%s`", argv[optind - 1]);
    }
  if (optind + 1 != argc)
    return cli_usage (err, "publish: expected a session name");
  o->session = argv[optind];
  return 0;
}

static int
publish_remote (struct esbx_cli *cli, const struct publish_opts *o, esbx_error_t *err)
{
  _cleanup_json_ json_t *body = json_new (JSON_OBJECT), *answer = NULL;

  if (o->message)
    json_set_string (body, "message", o->message);
  if (o->discard)
    json_set (body, "discard", json_new_bool (true));
  if (o->include_ignored)
    json_set (body, "include_ignored", json_new_bool (true));
  if (o->allow.n > 0)
    {
      json_t *allow = json_new (JSON_ARRAY);
      for (size_t i = 0; i < o->allow.n; i++)
        json_append (allow, json_new_string (o->allow.v[i]));
      json_set (body, "allow_secrets", allow);
    }
  if (cli_gateway_json (cli, "POST", body, &answer, err, "/v1/sessions/%s/publish", o->session) < 0)
    return -1;
  if (json_get_string (answer, "request") == NULL)
    {
      cli_print_published (cli, o->session, answer);
      return 0;
    }
  if (!o->wait)
    {
      cli_print_published (cli, o->session, answer);
      return CLI_EXIT_QUEUED;
    }
  {
    _cleanup_free_ char *id = xstrdup (json_get_string (answer, "request"));
    _cleanup_json_ json_t *rec = NULL;

    for (;;)
      {
        json_free (rec);
        rec = NULL;
        if (cli_gateway_json (cli, "GET", NULL, &rec, err, "/v1/requests/%s?wait=60", id) < 0)
          return -1;
        if (cli_request_final (rec))
          break;
      }
    return cli_request_outcome (cli, o->session, rec, err);
  }
}

static int
publish_local (struct esbx_cli *cli, const struct publish_opts *o, esbx_error_t *err)
{
  struct esbx_publish_result r = { 0 };
  esbx_store_t *store = cli_store (cli, err);
  int ret = 0;
  _cleanup_free_ char *request = NULL;

  if (store == NULL)
    return -1;
  if (esbx_sandbox_publish_as (store, o->session, o->message,
                               (o->discard ? ESBX_PUBLISH_DISCARD : 0)
                                   | (o->include_ignored ? ESBX_PUBLISH_INCLUDE_IGNORED : 0),
                               o->allow.v, NULL, &r, &request, err)
      < 0)
    {
      if (!r.published)
        return cli_publish_failed (cli, &r);
      ret = -1;
    }
  {
    _cleanup_json_ json_t *view = esbx_publish_result_json (&r);
    if (request)
      {
        _cleanup_json_ json_t *rec = esbx_request_load (store, request, NULL, err);
        json_set_string (view, "request", request);
        json_set_string (view, "state", rec ? json_get_string (rec, "state") : "queued");
        if (rec == NULL)
          return -1;
      }
    if (!(request && o->wait))
      cli_print_published (cli, o->session, view);
  }
  esbx_publish_result_free (&r);
  if (request && o->wait)
    {
      _cleanup_json_ json_t *rec = NULL;
      if (esbx_queue_wait (store, request, 0, &rec, err) < 0)
        return -1;
      return cli_request_outcome (cli, o->session, rec, err);
    }
  return request ? CLI_EXIT_QUEUED : ret;
}

int
cmd_publish (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  struct publish_opts o = { 0 };
  int ret;

  ret = parse_publish_opts (argc, argv, &o, err);
  if (ret == 0)
    ret = cli_gateway_mode (cli) ? publish_remote (cli, &o, err) : publish_local (cli, &o, err);
  strv_free (&o.allow);
  return ret;
}
