/* esbx export S|PROJECT[@LAYER] -o FILE [--format tar|oci-layer] [--progress | --quiet] */
#include "cli.h"
#include "fs.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <string.h>
#include <unistd.h>

struct export_opts
{
  const char *ref;
  const char *file;
  enum esbx_export_format format;
  const char *format_name; /* as the gateway takes it */
};

static int
parse_export_opts (struct esbx_cli *cli, int argc, char **argv, struct export_opts *o,
                   esbx_error_t *err)
{
  static const struct option opts[] = { { "output", required_argument, NULL, 'o' },
                                        { "format", required_argument, NULL, 'f' },
                                        { "json", no_argument, NULL, 'J' },
                                        CLI_PROGRESS_OPTIONS,
                                        { NULL, 0, NULL, 0 } };
  int c;

  o->format = ESBX_EXPORT_TAR;
  o->format_name = "tar";
  while ((c = getopt_long (argc, argv, "o:f:", opts, NULL)) != -1)
    switch (c)
      {
      case 'o':
        o->file = optarg;
        break;
      case 'f':
        if (strcmp (optarg, "tar") == 0)
          o->format = ESBX_EXPORT_TAR;
        else if (strcmp (optarg, "oci-layer") == 0)
          o->format = ESBX_EXPORT_OCI_LAYER;
        else
          return cli_usage (err, "export: unknown format `%s`: expected tar or oci-layer", optarg);
        o->format_name = optarg;
        break;
      case 'J':
        break;
      default:
        if (cli_progress_option (cli, c))
          break;
        return cli_usage (err, "export: unknown option `%s`", argv[optind - 1]);
      }
  if (optind + 1 != argc || o->file == NULL)
    return cli_usage (err, "export: expected a session or PROJECT[@LAYER] and -o FILE");
  o->ref = argv[optind];
  return 0;
}

/* Through the gateway: with progress shown, the gateway streams its
   reports before the archive (?progress=1).  */
static int
export_remote (struct esbx_cli *cli, const struct export_opts *o, esbx_error_t *err)
{
  _cleanup_free_ char *archive = NULL;
  _cleanup_json_ json_t *result = NULL;
  _cleanup_close_ int fd = -1;
  bool to_stdout = strcmp (o->file, "-") == 0;
  size_t len;

  cli_progress_start (cli, to_stdout);
  if (esbx_progress_get ())
    return cli_gateway_progress (cli, "GET", o->file, &result, err,
                                 "/v1/export?ref=%s&format=%s&progress=1", o->ref, o->format_name);
  if (cli_gateway_raw (cli, &archive, &len, err, "/v1/export?ref=%s&format=%s", o->ref,
                       o->format_name)
      < 0)
    return -1;
  if (!to_stdout)
    fd = open (o->file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if ((!to_stdout && fd < 0) || esbx_write_all (to_stdout ? STDOUT_FILENO : fd, archive, len) < 0)
    return esbx_make_error (err, errno, "export: write `%s`", o->file);
  return 0;
}

int
cmd_export (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  struct export_opts o = { 0 };
  esbx_store_t *store;

  if (parse_export_opts (cli, argc, argv, &o, err) < 0)
    return -1;
  if (cli_gateway_mode (cli))
    return export_remote (cli, &o, err);
  /* -o - writes the archive to stdout.  */
  cli_progress_start (cli, strcmp (o.file, "-") == 0);
  store = cli_store (cli, err);
  if (store == NULL || esbx_export (store, o.ref, o.file, o.format, err) < 0)
    return -1;
  return 0;
}
