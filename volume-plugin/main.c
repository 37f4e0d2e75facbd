/* esbxd: serves Docker's volume plugin protocol for an esbx store.  */
#include "driver.h"
#include "http.h"
#include "layerstore.h"
#include "log.h"
#include "utils.h"
#include "volumes.h"

#include <getopt.h>
#include <signal.h>
#include <string.h>

#define DEFAULT_PLUGIN_SOCKET "/run/docker/plugins/esbx.sock"

static void
usage (FILE *out)
{
  fprintf (out,
           "usage: esbxd [--root DIR] [--plugin-socket PATH]\n"
           "  --root DIR            store root (default $ESBX_ROOT or " ESBX_DEFAULT_ROOT ")\n"
           "  --plugin-socket PATH  Docker volume plugin socket (default " DEFAULT_PLUGIN_SOCKET
           ")\n");
}

static int
serve (const char *root, const char *socket_path, esbx_error_t *err)
{
  _cleanup_store_ esbx_store_t *store = NULL;
  struct esbx_volumes *vols = NULL;
  struct esbx_driver *driver = NULL;
  struct esbx_http_server *server = NULL;
  sigset_t set;
  int sig = 0, ret = -1;

  /* Block before any thread starts so that only sigwait sees them.  */
  sigemptyset (&set);
  sigaddset (&set, SIGINT);
  sigaddset (&set, SIGTERM);
  sigaddset (&set, SIGHUP);
  pthread_sigmask (SIG_BLOCK, &set, NULL);
  signal (SIGPIPE, SIG_IGN);

  if (esbx_store_open (root, &store, err) < 0)
    return -1;
  if (esbx_volumes_open (store, &vols, err) < 0)
    return -1;
  driver = esbx_driver_new (store, vols);
  if (esbx_http_start (socket_path, ESBX_PLUGIN_CONTENT_TYPE, esbx_driver_serve, driver, &server,
                       err)
      < 0)
    goto out;
  esbx_info ("serving store `%s` on `%s`", store->root, socket_path);

  for (;;)
    {
      if (sigwait (&set, &sig) != 0)
        continue;
      /* Nothing is cached: every request reads the store, so there is
         nothing to reload.  */
      if (sig != SIGHUP)
        break;
    }
  esbx_info ("signal %d: stopping", sig);
  esbx_http_stop (server);
  ret = 0;
out:
  esbx_driver_free (driver);
  esbx_volumes_close (vols);
  return ret;
}

int
main (int argc, char **argv)
{
  static const struct option long_options[] = {
    { "root", required_argument, NULL, 'r' },
    { "plugin-socket", required_argument, NULL, 's' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
  };
  const char *root = getenv ("ESBX_ROOT");
  const char *socket_path = DEFAULT_PLUGIN_SOCKET;
  esbx_error_t err = NULL;
  int c;

  esbx_log_set_prog ("esbxd");
  while ((c = getopt_long (argc, argv, "h", long_options, NULL)) != -1)
    switch (c)
      {
      case 'r':
        root = optarg;
        break;
      case 's':
        socket_path = optarg;
        break;
      case 'h':
        usage (stdout);
        return ESBX_EXIT_OK;
      default:
        usage (stderr);
        return ESBX_EXIT_USAGE;
      }
  if (optind < argc)
    {
      fprintf (stderr, "esbxd: unexpected argument `%s`\n", argv[optind]);
      usage (stderr);
      return ESBX_EXIT_USAGE;
    }
  if (socket_path[0] != '/')
    {
      fprintf (stderr, "esbxd: --plugin-socket `%s`: must be an absolute path\n", socket_path);
      return ESBX_EXIT_USAGE;
    }

  if (serve (root, socket_path, &err) < 0)
    return esbx_error_report (&err, stderr, "esbxd");
  return ESBX_EXIT_OK;
}
