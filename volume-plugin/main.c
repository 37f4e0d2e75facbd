/* esbxd: serves Docker's volume plugin protocol for an esbx store.  */
#include "config.h"
#include "docker/driver.h"
#include "docker/plugin.h"
#include "docker/volumes.h"
#include "expiry.h"
#include "fs.h"
#include "gateway/audit.h"
#include "gateway/gateway.h"
#include "layerstore.h"
#include "listen.h"
#include "log.h"
#include "metrics.h"
#include "prefetch.h"
#include "queue_worker.h"
#include "samples.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

enum
{
  OPT_TLS_CERT = 0x100,
  OPT_TLS_KEY,
  OPT_TCP_INSECURE,
};

#define DEFAULT_PLUGIN_SOCKET "/run/docker/plugins/esbx.sock"
#define DEFAULT_METRICS       "127.0.0.1:9595"

/* The gateway and metrics listeners (gateway.h, metrics.h).  A default
   address that is taken only warns, so that a second esbxd serving another
   store still starts; an address given explicitly must work.  */
struct listeners
{
  struct esbx_gateway_config gateway;
  bool gateway_explicit;
  const char *metrics;
  bool metrics_explicit;
};

/* The configuration file and what the command line fixes regardless of
   it.  */
struct settings
{
  const char *config_path;
  bool config_explicit;        /* --config: the file must exist */
  const char *default_project; /* --default-project, NULL: the file's */
  const char *registry;        /* --registry, --etcd: NULL: the file's */
  const char *etcd;
  /* The file's gateway-tls-cert and -key as read at start (owned): the
     listener keeps them until esbxd restarts.  */
  char *file_tls_cert, *file_tls_key;
};

static void
usage (FILE *out)
{
  fprintf (
      out,
      "usage: esbxd [--root DIR] [--plugin-socket PATH] [--gateway-socket PATH|none]\n"
      "             [--config FILE] [--default-project NAME] [--registry URL] [--etcd URL]\n"
      "             [--gateway-group GROUP] [--gateway-tcp ADDR:PORT] [--metrics "
      "ADDR:PORT|none]\n"
      "             [--gateway-tls-cert FILE --gateway-tls-key FILE | --gateway-tcp-insecure]\n"
      "  --root DIR            store root (default $ESBX_ROOT or " ESBX_DEFAULT_ROOT ")\n"
      "  --config FILE         settings read at start and on SIGHUP "
      "(default " ESBX_CONFIG_DEFAULT_PATH ", if present)\n"
      "  --default-project NAME  project of Docker volumes created without -o project=\n"
      "                        (overrides default-project of the config file)\n"
      "  --registry URL        the store's remote: OCI registry, and\n"
      "  --etcd URL            etcd (over $ESBX_REGISTRY/$ESBX_ETCD and ROOT/remote.json;\n"
      "                        override registry/etcd of the config file); the heads of\n"
      "                        shared projects are watched and new layers prefetched\n"
      "  --plugin-socket PATH  Docker volume plugin socket (default " DEFAULT_PLUGIN_SOCKET ")\n"
      "  --gateway-socket PATH authenticated gateway socket (default " ESBX_GATEWAY_DEFAULT_SOCKET
      ")\n"
      "  --gateway-group GROUP group owning the gateway socket (mode 0660)\n"
      "  --gateway-tcp ADDR:PORT  also serve the gateway on a loopback TCP port, with TLS:\n"
      "  --gateway-tls-cert FILE  its certificate chain (PEM; or gateway-tls-cert in the\n"
      "                        config file), and\n"
      "  --gateway-tls-key FILE   its private key (PEM; or gateway-tls-key)\n"
      "  --gateway-tcp-insecure   serve --gateway-tcp without TLS: whoever reads loopback\n"
      "                        traffic reads the tokens sent there\n"
      "  --metrics ADDR:PORT   /healthz and /metrics, loopback only (default " DEFAULT_METRICS ")\n"
      "  --gateway-max-connections N  per gateway listener: connections waiting for their\n"
      "                               request head, and again connections served (default %u)\n"
      "  --gateway-max-waiting N      connections of one client process on the gateway socket\n"
      "                               waiting for their request head (default %u)\n"
      "  --gateway-head-timeout SECONDS  time to send a request head after connecting, and\n"
      "                               between two requests (default %u)\n"
      "  --exec-log-limit BYTES       what a gateway exec keeps of each stream in the\n"
      "                               session's logs, e.g. 1M (default: esbx exec's, 16M)\n",
      ESBX_GATEWAY_DEFAULT_CONNECTIONS, ESBX_GATEWAY_DEFAULT_WAITING,
      ESBX_GATEWAY_DEFAULT_HEAD_TIMEOUT);
}

/* A positive count for option OPT, at most MAX.  */
static int
parse_count (const char *opt, const char *s, unsigned max, unsigned *out, esbx_error_t *err)
{
  unsigned long v;
  char *end;

  errno = 0;
  v = strtoul (s, &end, 10);
  if (*s < '0' || *s > '9' || *end != '\0' || errno || v == 0 || v > max)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "%s `%s`: expected a number from 1 to %u",
                                 opt, s, max);
  *out = (unsigned)v;
  return 0;
}

/* A size of at least one byte for option OPT ("1048576", "512k", "1M").  */
static int
parse_bytes (const char *opt, const char *s, uint64_t *out, esbx_error_t *err)
{
  esbx_error_t e = NULL;

  if (esbx_parse_size (s, out, &e) == 0 && *out > 0)
    return 0;
  esbx_error_free (&e);
  return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                               "%s `%s`: expected a size of at least 1 byte, e.g. 1M", opt, s);
}

/* Every listener holds its connections' descriptors: start with the soft
   limit at the hard one (systemd's soft default, 1,024, is below what the
   listeners may hold together) and say so when even that is short.  */
static void
raise_fd_limit (const struct listeners *l)
{
  unsigned per_gateway
      = l->gateway.max_connections ? l->gateway.max_connections : ESBX_GATEWAY_DEFAULT_CONNECTIONS;
  rlim_t need = 256 + (ESBX_PLUGIN_MAX_CONNECTIONS + ESBX_METRICS_MAX_CONNECTIONS) * 3 / 2;
  struct rlimit rl;

  need += (rlim_t)per_gateway * 3 / 2
          * ((l->gateway.socket_path != NULL) + (l->gateway.tcp != NULL));
  if (getrlimit (RLIMIT_NOFILE, &rl) < 0)
    return;
  if (rl.rlim_cur < rl.rlim_max)
    {
      rl.rlim_cur = rl.rlim_max;
      if (setrlimit (RLIMIT_NOFILE, &rl) < 0)
        getrlimit (RLIMIT_NOFILE, &rl);
    }
  if (rl.rlim_cur < need)
    esbx_warn ("the descriptor limit (%llu) is below what the listeners may hold at once (%llu): "
               "raise it (LimitNOFILE= in the systemd unit)",
               (unsigned long long)rl.rlim_cur, (unsigned long long)need);
}

static int
start_listeners (esbx_store_t *store, const struct listeners *l, struct esbx_metrics *metrics,
                 struct esbx_audit *audit, struct esbx_gateway **gw, esbx_error_t *err)
{
  esbx_error_t e = NULL;

  if (l->metrics && esbx_metrics_serve (metrics, l->metrics, &e) < 0)
    {
      if (l->metrics_explicit)
        {
          *err = e;
          return -1;
        }
      esbx_warn ("metrics disabled: %s", e->msg);
      esbx_error_free (&e);
    }
  else if (l->metrics)
    esbx_info ("metrics on http://%s/metrics", l->metrics);
  if (l->gateway.socket_path == NULL && l->gateway.tcp == NULL)
    return 0;
  if (esbx_gateway_start (store, metrics, audit, &l->gateway, gw, &e) < 0)
    {
      if (l->gateway_explicit)
        {
          *err = e;
          return -1;
        }
      esbx_warn ("gateway disabled: %s", e->msg);
      esbx_error_free (&e);
      return 0;
    }
  esbx_info ("gateway on `%s`%s%s%s", l->gateway.socket_path ? l->gateway.socket_path : "-",
             l->gateway.tcp ? " and " : "", l->gateway.tcp ? l->gateway.tcp : "",
             l->gateway.tcp ? (l->gateway.tls_cert ? " (TLS)" : " (in clear)") : "");
  return 0;
}

static bool
same_path (const char *a, const char *b)
{
  return a == b || (a && b && strcmp (a, b) == 0);
}

/* The TLS files of the config file: kept at START, compared later.  */
static void
note_tls_files (struct settings *set, const struct esbx_config *c, bool start)
{
  if (start)
    {
      set->file_tls_cert = c->tls_cert ? xstrdup (c->tls_cert) : NULL;
      set->file_tls_key = c->tls_key ? xstrdup (c->tls_key) : NULL;
    }
  else if (!same_path (c->tls_cert, set->file_tls_cert)
           || !same_path (c->tls_key, set->file_tls_key))
    esbx_warn ("%s: gateway-tls-cert and gateway-tls-key are read at start only: restart esbxd "
               "for the change",
               set->config_path);
}

/* Read the config file and hand the driver what it says, the command line
   winning.  At start a bad file is an error; on SIGHUP it is logged and the
   settings in force stay.  */
static int
apply_settings (struct esbx_driver *driver, struct settings *set, bool start, esbx_error_t *err)
{
  struct esbx_config c = { 0 };
  const char *project;

  if (esbx_config_load (set->config_path, set->config_explicit, &c, err) < 0)
    return -1;
  note_tls_files (set, &c, start);
  project = set->default_project ? set->default_project : c.default_project;
  esbx_driver_set_default_project (driver, project);
  if (project)
    esbx_info ("default project `%s`", project);
  esbx_remote_override (set->registry ? set->registry : c.registry, set->etcd ? set->etcd : c.etcd);
  esbx_config_clear (&c);
  return 0;
}

static int
serve (const char *root, const char *socket_path, const struct listeners *cmdline,
       struct settings *set, esbx_error_t *err)
{
  struct listeners lis = *cmdline, *l = &lis;
  struct esbx_metrics *metrics = NULL;
  struct esbx_audit *audit = NULL;
  struct esbx_gateway *gw = NULL;
  _cleanup_store_ esbx_store_t *store = NULL;
  struct esbx_volumes *vols = NULL;
  struct esbx_driver *driver = NULL;
  struct esbx_plugin *plugin = NULL;
  struct esbx_expiry *expiry = NULL;
  struct esbx_prefetch *prefetch = NULL;
  struct esbx_queue_worker *queue = NULL;
  struct esbx_samples *samples = NULL;
  const char *sample_interval = getenv ("ESBXD_SAMPLE_INTERVAL_MS");
  const char *interval = getenv ("ESBXD_EXPIRY_INTERVAL_MS");
  sigset_t sigs;
  int sig = 0, ret = -1;

  /* Block before any thread starts so that only sigwait sees them.  */
  sigemptyset (&sigs);
  sigaddset (&sigs, SIGINT);
  sigaddset (&sigs, SIGTERM);
  sigaddset (&sigs, SIGHUP);
  pthread_sigmask (SIG_BLOCK, &sigs, NULL);
  signal (SIGPIPE, SIG_IGN);

  raise_fd_limit (l);
  if (esbx_store_open (root, &store, err) < 0)
    return -1;
  if (esbx_volumes_open (store, &vols, err) < 0)
    return -1;
  driver = esbx_driver_new (store, vols);
  if (apply_settings (driver, set, true, err) < 0)
    goto out;
  /* The command line's pair, else the file's; refused before anything
     listens.  */
  if (l->gateway.tls_cert == NULL && l->gateway.tls_key == NULL)
    {
      l->gateway.tls_cert = set->file_tls_cert;
      l->gateway.tls_key = set->file_tls_key;
    }
  if (esbx_gateway_check_tcp (&l->gateway, err) < 0)
    goto out;
  if (esbx_plugin_start (socket_path, driver, &plugin, err) < 0)
    goto out;
  esbx_info ("serving store `%s` on `%s`", store->root, socket_path);
  metrics = esbx_metrics_new (store);
  if (esbx_samples_start (store, sample_interval ? atol (sample_interval) : 2000, &samples, err)
      < 0)
    {
      esbx_plugin_stop (plugin);
      goto out;
    }
  l->gateway.samples = samples;
  if (esbx_audit_open (store, &audit, err) < 0
      || start_listeners (store, l, metrics, audit, &gw, err) < 0)
    {
      esbx_plugin_stop (plugin);
      goto out;
    }
  esbx_listen_adopted_leftovers ();
  /* Sessions past their lifetime are retired by the daemon while it runs
     (by `esbx gc` otherwise).  */
  if (esbx_expiry_start (store, metrics, interval ? atol (interval) : 1000, &expiry, err) < 0
      || esbx_prefetch_start (store, metrics, &prefetch, err) < 0
      || esbx_queue_worker_start (store, 500, &queue, err) < 0)
    {
      esbx_prefetch_stop (prefetch);
      esbx_expiry_stop (expiry);
      esbx_plugin_stop (plugin);
      esbx_gateway_stop (gw);
      goto out;
    }

  for (;;)
    {
      esbx_error_t herr = NULL;

      if (sigwait (&sigs, &sig) != 0)
        continue;
      if (sig != SIGHUP)
        break;
      /* Nothing of the store is cached: every request reads it.  The
         config file is read again.  */
      esbx_info ("SIGHUP: reading `%s` again", set->config_path);
      if (apply_settings (driver, set, false, &herr) < 0)
        {
          esbx_warn ("%s; the settings in force stay", herr->msg);
          esbx_error_free (&herr);
        }
      else
        esbx_prefetch_reload (prefetch);
    }
  esbx_info ("signal %d: stopping", sig);
  esbx_queue_worker_stop (queue);
  esbx_prefetch_stop (prefetch);
  esbx_expiry_stop (expiry);
  esbx_plugin_stop (plugin);
  esbx_gateway_stop (gw);
  ret = 0;
out:
  esbx_samples_stop (samples);
  esbx_metrics_free (metrics);
  esbx_audit_close (audit);
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
    { "gateway-socket", required_argument, NULL, 'g' },
    { "gateway-group", required_argument, NULL, 'G' },
    { "gateway-tcp", required_argument, NULL, 'T' },
    { "metrics", required_argument, NULL, 'm' },
    { "gateway-max-connections", required_argument, NULL, 'C' },
    { "gateway-max-waiting", required_argument, NULL, 'W' },
    { "gateway-head-timeout", required_argument, NULL, 'H' },
    { "exec-log-limit", required_argument, NULL, 'L' },
    { "gateway-tls-cert", required_argument, NULL, OPT_TLS_CERT },
    { "gateway-tls-key", required_argument, NULL, OPT_TLS_KEY },
    { "gateway-tcp-insecure", no_argument, NULL, OPT_TCP_INSECURE },
    { "config", required_argument, NULL, 'c' },
    { "default-project", required_argument, NULL, 'P' },
    { "registry", required_argument, NULL, 'R' },
    { "etcd", required_argument, NULL, 'E' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
  };
  const char *root = getenv ("ESBX_ROOT");
  const char *socket_path = DEFAULT_PLUGIN_SOCKET;
  struct listeners l
      = { .gateway = { .socket_path = ESBX_GATEWAY_DEFAULT_SOCKET }, .metrics = DEFAULT_METRICS };
  struct settings set = { .config_path = ESBX_CONFIG_DEFAULT_PATH };
  esbx_error_t err = NULL;
  int c, passed, ret;

  esbx_log_set_prog ("esbxd");
  /* Sockets passed by systemd (esbxd.socket) are kept; every other
     inherited descriptor goes: a daemon started from a shell or a test
     harness inherits its pipes, and held open they keep the starter
     waiting for an EOF that never comes.  */
  passed = esbx_listen_adopt (&err);
  if (passed < 0)
    return esbx_error_report (&err, stderr, "esbxd");
  esbx_close_fds_from (3 + passed);
  while ((c = getopt_long (argc, argv, "h", long_options, NULL)) != -1)
    switch (c)
      {
      case 'r':
        root = optarg;
        break;
      case 's':
        socket_path = optarg;
        break;
      case 'g':
        l.gateway.socket_path = strcmp (optarg, "none") == 0 ? NULL : optarg;
        l.gateway_explicit = true;
        break;
      case 'G':
        l.gateway.group = optarg;
        break;
      case 'T':
        l.gateway.tcp = optarg;
        l.gateway_explicit = true;
        break;
      case 'm':
        l.metrics = strcmp (optarg, "none") == 0 ? NULL : optarg;
        l.metrics_explicit = true;
        break;
      case 'C':
        if (parse_count ("--gateway-max-connections", optarg, 65536, &l.gateway.max_connections,
                         &err)
            < 0)
          return esbx_error_report (&err, stderr, "esbxd");
        break;
      case 'W':
        if (parse_count ("--gateway-max-waiting", optarg, 65536, &l.gateway.max_waiting_per_client,
                         &err)
            < 0)
          return esbx_error_report (&err, stderr, "esbxd");
        break;
      case 'H':
        if (parse_count ("--gateway-head-timeout", optarg, 3600, &l.gateway.head_timeout, &err) < 0)
          return esbx_error_report (&err, stderr, "esbxd");
        break;
      case 'L':
        if (parse_bytes ("--exec-log-limit", optarg, &l.gateway.exec_log_limit, &err) < 0)
          return esbx_error_report (&err, stderr, "esbxd");
        break;
      case OPT_TLS_CERT:
        l.gateway.tls_cert = optarg;
        break;
      case OPT_TLS_KEY:
        l.gateway.tls_key = optarg;
        break;
      case OPT_TCP_INSECURE:
        l.gateway.tcp_insecure = true;
        break;
      case 'c':
        set.config_path = optarg;
        set.config_explicit = true;
        break;
      case 'P':
        if (esbx_check_name ("project", optarg, &err) < 0)
          return esbx_error_report (&err, stderr, "esbxd: --default-project");
        set.default_project = optarg;
        break;
      case 'R':
      case 'E':
        if (esbx_remote_check_url (c == 'R' ? "--registry" : "--etcd", optarg, &err) < 0)
          return esbx_error_report (&err, stderr, "esbxd");
        *(c == 'R' ? &set.registry : &set.etcd) = optarg;
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

  if (l.gateway.socket_path && l.gateway.socket_path[0] != '/')
    {
      fprintf (stderr, "esbxd: --gateway-socket `%s`: must be an absolute path\n",
               l.gateway.socket_path);
      return ESBX_EXIT_USAGE;
    }
  /* Unauthenticated listeners never leave the host: refuse before anything
     starts.  The gateway's TCP listener is loopback-only too, TLS or not:
     TLS keeps tokens from whoever reads loopback traffic, it does not make
     the gateway an internet service.  */
  if ((l.metrics && esbx_loopback_check ("--metrics", l.metrics, &err) < 0)
      || (l.gateway.tcp && esbx_loopback_check ("--gateway-tcp", l.gateway.tcp, &err) < 0))
    return esbx_error_report (&err, stderr, "esbxd");

  ret = serve (root, socket_path, &l, &set, &err);
  free (set.file_tls_cert);
  free (set.file_tls_key);
  if (ret < 0)
    return esbx_error_report (&err, stderr, "esbxd");
  return ESBX_EXIT_OK;
}
