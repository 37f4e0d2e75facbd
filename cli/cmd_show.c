/* esbx show PROJECT[@LAYER]:PATH: a path at a layer, without a session.  */
#include "cli.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

int
cmd_show (struct esbx_cli *cli, int argc, char **argv, esbx_error_t *err)
{
  _cleanup_free_ char *project = NULL;
  const char *colon, *at, *path, *layer = NULL;
  esbx_store_t *store;

  if (argc != 2 || (colon = strchr (argv[1], ':')) == NULL)
    return cli_usage (err, "show: expected PROJECT[@LAYER]:PATH");
  path = colon + 1;
  project = xstrndup (argv[1], (size_t)(colon - argv[1]));
  at = strchr (project, '@');
  if (at)
    {
      project[at - project] = '\0';
      layer = at + 1;
    }
  if (cli_gateway_mode (cli))
    {
      _cleanup_free_ char *data = NULL;
      size_t len;

      if (cli_gateway_raw (cli, &data, &len, err, "/v1/projects/%s/show?path=%s&layer=%s", project,
                           path, layer ? layer : "head")
          < 0)
        return -1;
      return fwrite (data, 1, len, stdout) == len ? 0 : esbx_make_error (err, errno, "write");
    }
  store = cli_store (cli, err);
  if (store == NULL)
    return -1;
  return esbx_show (store, project, layer, path, STDOUT_FILENO, err);
}
