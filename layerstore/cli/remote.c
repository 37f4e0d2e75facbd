/* Remote mode: `esbx --host unix:///run/esbx/gateway.sock VERB ...` (or
   $ESBX_HOST, with the bearer token in $ESBX_TOKEN).  Each verb becomes one
   gateway request; the gateway answers with the JSON view that `--json`
   prints, and print.c turns it into the same bytes embedded mode prints.
   Exit statuses follow the error class the gateway reports ("code").  */
#include "cli.h"
#include "fs.h"
#include "text.h"
#include "utils.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define FOLLOW_INTERVAL_MS 200

struct response
{
  long status;
  char *body;
  size_t len;
};

static void
response_free (struct response *r)
{
  free (r->body);
  r->body = NULL;
  r->len = 0;
}

static size_t
on_body (char *data, size_t size, size_t nmemb, void *userdata)
{
  struct response *r = userdata;
  size_t n = size * nmemb;

  r->body = xrealloc (r->body, r->len + n + 1);
  memcpy (r->body + r->len, data, n);
  r->len += n;
  r->body[r->len] = '\0';
  return n;
}

static char *
escape (const char *s)
{
  char *e = curl_easy_escape (NULL, s, 0);
  char *copy;

  if (e == NULL)
    abort ();
  copy = xstrdup (e);
  curl_free (e);
  return copy;
}

/* unix:///PATH talks to a socket; tcp://H:P and http://H:P to a loopback
   listener of the gateway.  */
static int
host_target (const char *host, char **socket_path, char **base, esbx_error_t *err)
{
  if (esbx_has_prefix (host, "unix://"))
    {
      if (host[7] != '/')
        return esbx_make_error_code (err, ESBX_EXIT_USAGE, 0,
                                     "--host `%s`: expected unix:///ABSOLUTE/PATH", host);
      *socket_path = xstrdup (host + 7);
      *base = xstrdup ("http://esbx");
      return 0;
    }
  if (esbx_has_prefix (host, "tcp://"))
    {
      *socket_path = NULL;
      *base = xasprintf ("http://%s", host + 6);
      return 0;
    }
  if (esbx_has_prefix (host, "http://"))
    {
      *socket_path = NULL;
      *base = xstrdup (host);
      return 0;
    }
  return esbx_make_error_code (err, ESBX_EXIT_USAGE, 0,
                               "--host `%s`: expected unix:///PATH or tcp://HOST:PORT", host);
}

static int
call (struct esbx_cli *cli, const char *method, const char *path, const char *body, size_t len,
      const char *content_type, struct response *r, esbx_error_t *err)
{
  _cleanup_free_ char *sock = NULL, *base = NULL, *url = NULL, *auth = NULL, *ctype = NULL;
  const char *token = getenv ("ESBX_TOKEN");
  struct curl_slist *headers = NULL;
  char errbuf[CURL_ERROR_SIZE] = "";
  CURL *curl;
  CURLcode rc;

  if (host_target (cli->host, &sock, &base, err) < 0)
    return -1;
  if (token == NULL || token[0] == '\0')
    return esbx_make_error (
        err, 0, "gateway `%s`: set ESBX_TOKEN to a token from `esbx token create`", cli->host);
  url = xasprintf ("%s%s", base, path);
  auth = xasprintf ("Authorization: Bearer %s", token);
  curl = curl_easy_init ();
  if (curl == NULL)
    return esbx_make_error (err, 0, "gateway: cannot initialise libcurl");
  headers = curl_slist_append (headers, auth);
  headers = curl_slist_append (headers, "Expect:");
  if (content_type)
    {
      ctype = xasprintf ("Content-Type: %s", content_type);
      headers = curl_slist_append (headers, ctype);
    }
  if (sock)
    curl_easy_setopt (curl, CURLOPT_UNIX_SOCKET_PATH, sock);
  curl_easy_setopt (curl, CURLOPT_URL, url);
  curl_easy_setopt (curl, CURLOPT_CUSTOMREQUEST, method);
  curl_easy_setopt (curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt (curl, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt (curl, CURLOPT_WRITEDATA, r);
  curl_easy_setopt (curl, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt (curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt (curl, CURLOPT_PROTOCOLS_STR, "http");
  if (body)
    {
      curl_easy_setopt (curl, CURLOPT_POSTFIELDS, body);
      curl_easy_setopt (curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    }
  rc = curl_easy_perform (curl);
  if (rc == CURLE_OK)
    curl_easy_getinfo (curl, CURLINFO_RESPONSE_CODE, &r->status);
  curl_slist_free_all (headers);
  curl_easy_cleanup (curl);
  if (rc != CURLE_OK)
    return esbx_make_error (err, 0, "gateway `%s`: %s", cli->host,
                            errbuf[0] ? errbuf : curl_easy_strerror (rc));
  return 0;
}

/* An error answer: {"error": MSG, "code": N[, "conflicts": [...]]}.  */
static int
answer_error (struct esbx_cli *cli, const struct response *r, esbx_error_t *err)
{
  esbx_error_t perr = NULL;
  _cleanup_json_ json_t *j = json_parse (r->body ? r->body : "", r->len, &perr);
  const json_t *conflicts;
  const char *msg;
  int64_t code = ESBX_EXIT_ERROR;

  if (j == NULL)
    {
      esbx_error_free (&perr);
      return esbx_make_error (err, 0, "gateway: HTTP %ld", r->status);
    }
  msg = json_get_string (j, "error");
  json_get_int (j, "code", &code);
  conflicts = json_get (j, "conflicts");
  if (conflicts && conflicts->type == JSON_ARRAY && conflicts->n)
    {
      struct esbx_publish_result pr = { 0 };
      size_t i;

      pr.conflicts = xmalloc0 (conflicts->n * sizeof *pr.conflicts);
      pr.n_conflicts = conflicts->n;
      for (i = 0; i < conflicts->n; i++)
        {
          const char *s = json_get_string (conflicts->items[i], "session");
          pr.conflicts[i].path = xstrdup (json_get_string (conflicts->items[i], "path")
                                              ? json_get_string (conflicts->items[i], "path")
                                              : "");
          pr.conflicts[i].layer = xstrdup (json_get_string (conflicts->items[i], "layer")
                                               ? json_get_string (conflicts->items[i], "layer")
                                               : "");
          pr.conflicts[i].session = s ? xstrdup (s) : NULL;
        }
      cli_print_conflicts (cli, &pr);
      esbx_publish_result_free (&pr);
    }
  if (code < 1 || code > 255)
    code = ESBX_EXIT_ERROR;
  return esbx_make_error_code (err, (int)code, 0, "%s",
                               msg ? msg : "the gateway refused the request");
}

/* One request whose answer is a JSON document: *out receives it.  */
static int
call_json (struct esbx_cli *cli, const char *method, const char *path, const json_t *body,
           json_t **out, esbx_error_t *err)
{
  struct response r = { 0 };
  _cleanup_free_ char *doc = NULL;
  size_t len = 0;
  int ret;

  if (body)
    doc = json_serialize (body, false, &len);
  if (call (cli, method, path, doc, len, body ? "application/json" : NULL, &r, err) < 0)
    return -1;
  if (r.status >= 400)
    ret = answer_error (cli, &r, err);
  else
    {
      *out = json_parse (r.body ? r.body : "", r.len, err);
      ret = *out ? 0 : esbx_error_wrap (err, "gateway answer");
    }
  response_free (&r);
  return ret;
}

/* A request whose answer is raw bytes (patch, export).  */
static int
call_raw (struct esbx_cli *cli, const char *path, struct response *r, esbx_error_t *err)
{
  if (call (cli, "GET", path, NULL, 0, NULL, r, err) < 0)
    return -1;
  if (r->status >= 400)
    {
      int ret = answer_error (cli, r, err);
      response_free (r);
      return ret;
    }
  return 0;
}

static int
print_json_answer (struct esbx_cli *cli, const char *method, const char *path, const json_t *body,
                   void (*print) (struct esbx_cli *, const json_t *), esbx_error_t *err)
{
  _cleanup_json_ json_t *j = NULL;

  if (call_json (cli, method, path, body, &j, err) < 0)
    return -1;
  print (cli, j);
  return 0;
}

static void
print_name (struct esbx_cli *cli, const json_t *j)
{
  printf ("%s\n", json_get_string (j, "name") ? json_get_string (j, "name") : "");
}

static void
print_always_json (struct esbx_cli *cli, const json_t *j)
{
  cli_print_json (j);
}

static void
print_nothing (struct esbx_cli *cli, const json_t *j)
{
}

static void
print_layer (struct esbx_cli *cli, const json_t *j)
{
  printf ("%s\n", json_get_string (j, "layer") ? json_get_string (j, "layer") : "");
}

static void
print_path (struct esbx_cli *cli, const json_t *j)
{
  printf ("%s\n", json_get_string (j, "path") ? json_get_string (j, "path") : "");
}

static void
print_report (struct esbx_cli *cli, const json_t *j)
{
  fputs (json_get_string (j, "report") ? json_get_string (j, "report") : "", stdout);
}

static int
remote_project (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  static const struct option opts[] = { { "from", required_argument, NULL, 'f' },
                                        { "json", no_argument, NULL, 'J' },
                                        { NULL, 0, NULL, 0 } };
  const char *sub = argc > 1 ? argv[1] : NULL;
  _cleanup_free_ char *name = NULL, *path = NULL;
  int c;

  if (sub == NULL)
    return cli_usage (err, "project: expected a subcommand");
  if (strcmp (sub, "list") == 0 || strcmp (sub, "ls") == 0)
    return print_json_answer (cli, "GET", "/v1/projects", NULL, cli_print_projects, err);
  if (strcmp (sub, "create") == 0)
    {
      _cleanup_json_ json_t *body = json_new (JSON_OBJECT);
      argc--, argv++;
      while ((c = getopt_long (argc, argv, "f:", opts, NULL)) != -1)
        {
          if (c == 'f')
            return esbx_make_error (err, 0,
                                    "project create --from: the gateway does not read host "
                                    "paths; create the project on the host");
          if (c != 'J')
            return cli_usage (err, "project create: unknown option `%s`", argv[optind - 1]);
        }
      if (optind + 1 != argc)
        return cli_usage (err, "project create: expected NAME");
      json_set_string (body, "name", argv[optind]);
      return print_json_answer (cli, "POST", "/v1/projects", body, print_name, err);
    }
  if (argc < 3 || argv[2][0] == '-')
    return cli_usage (err, "project %s: expected NAME", sub);
  name = escape (argv[2]);
  if (strcmp (sub, "log") == 0)
    {
      path = xasprintf ("/v1/projects/%s/log", name);
      return print_json_answer (cli, "GET", path, NULL, cli_print_log, err);
    }
  if (strcmp (sub, "rm") == 0)
    {
      path = xasprintf ("/v1/projects/%s", name);
      return print_json_answer (cli, "DELETE", path, NULL, print_nothing, err);
    }
  if (strcmp (sub, "squash") == 0)
    {
      path = xasprintf ("/v1/projects/%s/squash", name);
      return print_json_answer (cli, "POST", path, NULL, print_layer, err);
    }
  return cli_usage (err, "project: unknown subcommand `%s`", sub);
}

static int
remote_session_create (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
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
  static const char *const keys[]
      = { ['n'] = "name",   ['b'] = "base", ['N'] = "network", ['w'] = "workspace",
          ['m'] = "memory", ['p'] = "pids", ['c'] = "cpus" };
  _cleanup_json_ json_t *body = json_new (JSON_OBJECT);
  json_t *labels = json_new (JSON_ARRAY);
  uint64_t v;
  int c;

  json_set (body, "labels", labels);
  while ((c = getopt_long (argc, argv, "n:b:l:", opts, NULL)) != -1)
    switch (c)
      {
      case 'l':
        json_append (labels, json_new_string (optarg));
        break;
      case 'm':
      case 'p':
        if (esbx_parse_size (optarg, &v, err) < 0)
          return -1;
        json_set_string (body, keys[c], optarg);
        break;
      case 'n':
      case 'b':
      case 'N':
      case 'w':
      case 'c':
        json_set_string (body, keys[c], optarg);
        break;
      case 'J':
        break;
      default:
        return cli_usage (err, "session create: unknown option `%s`", argv[optind - 1]);
      }
  if (optind + 1 != argc)
    return cli_usage (err, "session create: expected PROJECT");
  json_set_string (body, "project", argv[optind]);
  return print_json_answer (cli, "POST", "/v1/sessions", body, print_name, err);
}

static int
remote_session (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  static const struct option opts[] = { { "project", required_argument, NULL, 'p' },
                                        { "json", no_argument, NULL, 'J' },
                                        { NULL, 0, NULL, 0 } };
  const char *sub = argc > 1 ? argv[1] : NULL;
  _cleanup_free_ char *name = NULL, *path = NULL;
  const char *project = NULL;
  int c;

  if (sub == NULL)
    return cli_usage (err, "session: expected a subcommand");
  if (strcmp (sub, "create") == 0)
    return remote_session_create (cli, argc - 1, argv + 1, err);
  if (strcmp (sub, "list") == 0 || strcmp (sub, "ls") == 0)
    {
      argc--, argv++;
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
      if (project)
        {
          _cleanup_free_ char *p = escape (project);
          path = xasprintf ("/v1/sessions?project=%s", p);
        }
      return print_json_answer (cli, "GET", path ? path : "/v1/sessions", NULL, cli_print_sessions,
                                err);
    }
  if (strcmp (sub, "inspect") != 0 && strcmp (sub, "path") != 0)
    return cli_usage (err, "session: unknown subcommand `%s`", sub);
  if (argc < 3 || argv[2][0] == '-')
    return cli_usage (err, "session %s: expected a session name", sub);
  name = escape (argv[2]);
  if (strcmp (sub, "path") == 0)
    {
      path = xasprintf ("/v1/sessions/%s/path", name);
      return print_json_answer (cli, "GET", path, NULL, print_path, err);
    }
  path = xasprintf ("/v1/sessions/%s", name);
  return print_json_answer (cli, "GET", path, NULL, print_always_json, err);
}

static int
remote_blame (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  _cleanup_free_ char *p = NULL, *f = NULL, *path = NULL;

  if (argc != 3)
    return cli_usage (err, "blame: expected PROJECT PATH");
  p = escape (argv[1]);
  f = escape (argv[2]);
  path = xasprintf ("/v1/projects/%s/blame?path=%s", p, f);
  return print_json_answer (cli, "GET", path, NULL, cli_print_blame, err);
}

static int
remote_diff (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  static const struct option opts[] = { { "json", no_argument, NULL, 'J' },
                                        { "patch", no_argument, NULL, 'p' },
                                        { NULL, 0, NULL, 0 } };
  _cleanup_free_ char *name = NULL, *path = NULL;
  bool patch = false;
  int c;

  while ((c = getopt_long (argc, argv, "p", opts, NULL)) != -1)
    {
      if (c == 'p')
        patch = true;
      else if (c != 'J')
        return cli_usage (err, "diff: unknown option `%s`", argv[optind - 1]);
    }
  if (optind + 1 != argc)
    return cli_usage (err, "diff: expected a session name");
  if (patch && cli->json)
    return cli_usage (err, "diff: --json and --patch exclude each other");
  name = escape (argv[optind]);
  if (patch)
    {
      struct response r = { 0 };

      path = xasprintf ("/v1/sessions/%s/diff?patch=1", name);
      if (call_raw (cli, path, &r, err) < 0)
        return -1;
      fwrite (r.body ? r.body : "", 1, r.len, stdout);
      response_free (&r);
      return 0;
    }
  path = xasprintf ("/v1/sessions/%s/diff", name);
  return print_json_answer (cli, "GET", path, NULL, cli_print_changes, err);
}

static int
remote_publish (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  static const struct option opts[] = { { "message", required_argument, NULL, 'm' },
                                        { "discard", no_argument, NULL, 'd' },
                                        { "json", no_argument, NULL, 'J' },
                                        { NULL, 0, NULL, 0 } };
  _cleanup_json_ json_t *body = json_new (JSON_OBJECT), *answer = NULL;
  _cleanup_free_ char *name = NULL, *path = NULL;
  int c;

  while ((c = getopt_long (argc, argv, "m:", opts, NULL)) != -1)
    {
      if (c == 'm')
        json_set_string (body, "message", optarg);
      else if (c == 'd')
        json_set (body, "discard", json_new_bool (true));
      else if (c != 'J')
        return cli_usage (err, "publish: unknown option `%s`", argv[optind - 1]);
    }
  if (optind + 1 != argc)
    return cli_usage (err, "publish: expected a session name");
  name = escape (argv[optind]);
  path = xasprintf ("/v1/sessions/%s/publish", name);
  if (call_json (cli, "POST", path, body, &answer, err) < 0)
    return -1;
  cli_print_published (cli, argv[optind], answer);
  return 0;
}

static int
remote_session_verb (struct esbx_cli *cli, int argc, char **argv, const char *method,
                     const char *suffix, void (*print) (struct esbx_cli *, const json_t *),
                     esbx_error_t *err)
{
  _cleanup_free_ char *name = NULL, *path = NULL;
  int k;

  for (k = 1; k < argc && argv[k][0] == '-'; k++)
    if (strcmp (argv[k], "--json") != 0)
      return cli_usage (err, "%s: unknown option `%s`", argv[0], argv[k]);
  if (k + 1 != argc)
    return cli_usage (err, "%s: expected a session name", argv[0]);
  name = escape (argv[k]);
  path = xasprintf ("/v1/sessions/%s%s", name, suffix);
  if (strcmp (method, "POST") == 0)
    {
      _cleanup_json_ json_t *body = json_new (JSON_OBJECT);
      return print_json_answer (cli, method, path, body, print, err);
    }
  return print_json_answer (cli, method, path, NULL, print, err);
}

static int
remote_export (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  static const struct option opts[] = { { "output", required_argument, NULL, 'o' },
                                        { "format", required_argument, NULL, 'f' },
                                        { "json", no_argument, NULL, 'J' },
                                        { NULL, 0, NULL, 0 } };
  _cleanup_free_ char *ref = NULL, *path = NULL, *dir = NULL;
  const char *file = NULL, *format = "tar";
  struct response r = { 0 };
  _cleanup_close_ int fd = -1;
  int c;

  while ((c = getopt_long (argc, argv, "o:f:", opts, NULL)) != -1)
    switch (c)
      {
      case 'o':
        file = optarg;
        break;
      case 'f':
        if (strcmp (optarg, "tar") != 0 && strcmp (optarg, "oci-layer") != 0)
          return cli_usage (err, "export: unknown format `%s`: expected tar or oci-layer", optarg);
        format = optarg;
        break;
      case 'J':
        break;
      default:
        return cli_usage (err, "export: unknown option `%s`", argv[optind - 1]);
      }
  if (optind + 1 != argc || file == NULL)
    return cli_usage (err, "export: expected a session or PROJECT[@LAYER] and -o FILE");
  ref = escape (argv[optind]);
  path = xasprintf ("/v1/export?ref=%s&format=%s", ref, format);
  if (call_raw (cli, path, &r, err) < 0)
    return -1;
  fd = open (file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0 || esbx_write_all (fd, r.body ? r.body : "", r.len) < 0)
    {
      response_free (&r);
      return esbx_make_error (err, errno, "export: write `%s`", file);
    }
  response_free (&r);
  return 0;
}

static int
remote_fsck (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  _cleanup_free_ char *path = NULL;

  if (argc > 2 || (argc == 2 && argv[1][0] == '-'))
    return cli_usage (err, "fsck: expected at most a project name");
  if (argc == 2)
    {
      _cleanup_free_ char *p = escape (argv[1]);
      path = xasprintf ("/v1/fsck?project=%s", p);
    }
  return print_json_answer (cli, "POST", path ? path : "/v1/fsck", NULL, print_report, err);
}

static int
remote_gc (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  if (argc != 1)
    return cli_usage (err, "gc: takes no argument");
  return print_json_answer (cli, "POST", "/v1/gc", NULL, print_report, err);
}

/* Output comes back as text, or as hex when it is not UTF-8.  */
static void
write_output (const json_t *j, const char *key, FILE *stream)
{
  _cleanup_free_ char *hexkey = xasprintf ("%s_hex", key);
  const char *s = json_get_string (j, key), *h = json_get_string (j, hexkey);
  size_t i;

  if (s)
    fputs (s, stream);
  for (i = 0; h && h[i] && h[i + 1]; i += 2)
    {
      char byte[3] = { h[i], h[i + 1], 0 };
      fputc ((int)strtoul (byte, NULL, 16), stream);
    }
  fflush (stream);
}

static int
remote_exec (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  static const struct option opts[] = {
    { "cwd", required_argument, NULL, 'C' },  { "env", required_argument, NULL, 'e' },
    { "user", required_argument, NULL, 'u' }, { "detach", no_argument, NULL, 'd' },
    { "json", no_argument, NULL, 'J' },       { NULL, 0, NULL, 0 },
  };
  _cleanup_json_ json_t *body = json_new (JSON_OBJECT), *answer = NULL;
  json_t *env = json_new (JSON_ARRAY), *args = json_new (JSON_ARRAY);
  _cleanup_free_ char *name = NULL, *path = NULL;
  int dashdash = -1, limit, c, i;
  char **cmd;
  int64_t status = 0;

  json_set (body, "env", env);
  json_set (body, "argv", args);
  for (i = 1; i < argc; i++)
    if (strcmp (argv[i], "--") == 0)
      {
        dashdash = i;
        break;
      }
  limit = dashdash >= 0 ? dashdash : argc;
  while ((c = getopt_long (limit, argv, dashdash >= 0 ? "e:u:d" : "+e:u:d", opts, NULL)) != -1)
    switch (c)
      {
      case 'C':
        json_set_string (body, "cwd", optarg);
        break;
      case 'e':
        json_append (env, json_new_string (optarg));
        break;
      case 'u':
        json_set_string (body, "user", optarg);
        break;
      case 'd':
        json_set (body, "detach", json_new_bool (true));
        break;
      case 'J':
        break;
      default:
        return cli_usage (err, "exec: unknown option `%s`", argv[optind - 1]);
      }
  if (optind >= limit)
    return cli_usage (err, "exec: expected a session");
  if (dashdash >= 0)
    {
      if (optind + 1 != limit)
        return cli_usage (err, "exec: unexpected `%s` before `--`", argv[optind + 1]);
      cmd = argv + dashdash + 1;
    }
  else
    cmd = argv + optind + 1;
  if (cmd[0] == NULL)
    return cli_usage (err, "exec: no command given");
  for (i = 0; cmd[i]; i++)
    json_append (args, json_new_string (cmd[i]));
  name = escape (argv[optind]);
  path = xasprintf ("/v1/sessions/%s/exec", name);
  if (call_json (cli, "POST", path, body, &answer, err) < 0)
    return -1;
  write_output (answer, "stdout", stdout);
  write_output (answer, "stderr", stderr);
  json_get_int (answer, "status", &status);
  return (int)status;
}

static int
remote_events (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  static const struct option opts[] = {
    { "json", no_argument, NULL, 'J' },
    { "follow", no_argument, NULL, 'f' },
    { NULL, 0, NULL, 0 },
  };
  _cleanup_free_ char *name = NULL;
  bool follow = false;
  int64_t offset = 0;
  int c;

  while ((c = getopt_long (argc, argv, "f", opts, NULL)) != -1)
    switch (c)
      {
      case 'J':
        break;
      case 'f':
        follow = true;
        break;
      default:
        return cli_usage (err, "events: unknown option `%s`", argv[optind - 1]);
      }
  if (optind + 1 != argc)
    return cli_usage (err, "events: expected one session");
  name = escape (argv[optind]);
  for (;;)
    {
      struct timespec ts = { 0, FOLLOW_INTERVAL_MS * 1000000L };
      _cleanup_free_ char *path
          = xasprintf ("/v1/sessions/%s/events?offset=%lld", name, (long long)offset);
      _cleanup_json_ json_t *j = NULL;
      const json_t *evs;
      size_t i;

      if (call_json (cli, "GET", path, NULL, &j, err) < 0)
        {
          /* The session went away while we followed it: that ends it.  */
          if (follow && offset > 0 && (*err)->code == ESBX_EXIT_ERROR)
            {
              esbx_error_free (err);
              return 0;
            }
          return -1;
        }
      evs = json_get (j, "events");
      for (i = 0; evs && evs->type == JSON_ARRAY && i < evs->n; i++)
        cli_print_event (cli->json, evs->items[i]);
      json_get_int (j, "offset", &offset);
      fflush (stdout);
      if (!follow)
        return 0;
      nanosleep (&ts, NULL);
    }
}

int
cli_remote (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  const char *verb = argv[0];

  if (strcmp (verb, "project") == 0)
    return remote_project (cli, argc, argv, err);
  if (strcmp (verb, "session") == 0)
    return remote_session (cli, argc, argv, err);
  if (strcmp (verb, "blame") == 0)
    return remote_blame (cli, argc, argv, err);
  if (strcmp (verb, "diff") == 0)
    return remote_diff (cli, argc, argv, err);
  if (strcmp (verb, "publish") == 0)
    return remote_publish (cli, argc, argv, err);
  if (strcmp (verb, "rebase") == 0)
    return remote_session_verb (cli, argc, argv, "POST", "/rebase", cli_print_rebased, err);
  if (strcmp (verb, "discard") == 0)
    return remote_session_verb (cli, argc, argv, "DELETE", "", print_nothing, err);
  if (strcmp (verb, "ps") == 0)
    return remote_session_verb (cli, argc, argv, "GET", "/ps", cli_print_ps, err);
  if (strcmp (verb, "export") == 0)
    return remote_export (cli, argc, argv, err);
  if (strcmp (verb, "fsck") == 0)
    return remote_fsck (cli, argc, argv, err);
  if (strcmp (verb, "gc") == 0)
    return remote_gc (cli, argc, argv, err);
  if (strcmp (verb, "exec") == 0)
    return remote_exec (cli, argc, argv, err);
  if (strcmp (verb, "events") == 0)
    return remote_events (cli, argc, argv, err);
  return esbx_make_error_code (err, ESBX_EXIT_USAGE, 0,
                               "%s: not available through the gateway; run it on the host", verb);
}
