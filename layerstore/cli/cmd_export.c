/* esbx export S|PROJECT[@LAYER] -o FILE [--format tar|oci-layer] */
#include "cli.h"

#include <getopt.h>
#include <string.h>

int
cmd_export (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  static const struct option opts[] = { { "output", required_argument, NULL, 'o' },
                                        { "format", required_argument, NULL, 'f' },
                                        { "json", no_argument, NULL, 'J' },
                                        { NULL, 0, NULL, 0 } };
  enum esbx_export_format format = ESBX_EXPORT_TAR;
  const char *file = NULL;
  esbx_store_t *store;
  int c;

  while ((c = getopt_long (argc, argv, "o:f:", opts, NULL)) != -1)
    switch (c)
      {
      case 'o':
        file = optarg;
        break;
      case 'f':
        if (strcmp (optarg, "tar") == 0)
          format = ESBX_EXPORT_TAR;
        else if (strcmp (optarg, "oci-layer") == 0)
          format = ESBX_EXPORT_OCI_LAYER;
        else
          return cli_usage (err, "export: unknown format `%s`: expected tar or oci-layer", optarg);
        break;
      case 'J':
        break;
      default:
        return cli_usage (err, "export: unknown option `%s`", argv[optind - 1]);
      }
  if (optind + 1 != argc || file == NULL)
    return cli_usage (err, "export: expected a session or PROJECT[@LAYER] and -o FILE");
  store = cli_store (cli, err);
  if (store == NULL || esbx_export (store, argv[optind], file, format, err) < 0)
    return -1;
  return 0;
}
