/* esbx: the command-line front-end.  Embedded mode: every verb works on the
   store directly, no daemon needed; with --host, on the gateway of an esbxd
   (remote.c).  */
#include "cli.h"
#include "log.h"
#include "utils.h"

#include <getopt.h>
#include <stdarg.h>
#include <string.h>

struct verb
{
  const char *name;
  esbx_cmd_fn fn;
  const char *usage;
};

/* USAGE: one line per form, each without the leading "esbx ".  */
static const struct verb verbs[] = {
  { "project", cmd_project,
    "project create NAME [--from SRC | --from-git REPO [--ref REF]] [--progress | --quiet]\n"
    "project list\n"
    "project log NAME\n"
    "project rm NAME\n"
    "project lifetime NAME [--ttl DURATION] [--idle-ttl DURATION] [--on-expiry discard|snapshot]\n"
    "project network NAME [--network none|host|egress]\n"
    "    [--allow HOST[:PORT]|*.DOMAIN[:PORT]|CIDR[:PORT]]...\n"
    "project disk NAME [--disk SIZE|none|default]\n"
    "project gate NAME [--mode auto|checks|review] [--check CMD]... [--check-timeout DURATION]\n"
    "    [--approvals N] [--parallel N] [--secret NAME]...\n"
    "project squash NAME\n"
    "project push NAME\n"
    "project pull NAME\n"
    "project git-dir NAME\n"
    "project push-git NAME REMOTE [--branch B] [--secret NAME]\n"
    "project pull-git NAME [REMOTE] [--ref REF] [--secret NAME]" },
  { "remote", cmd_remote,
    "remote set --registry URL --etcd URL [--ca FILE] [--cert FILE --key FILE] [--token-file "
    "FILE] [--compression gzip|none]\nremote show" },
  { "session", cmd_session,
    "session create PROJECT [--name N] [--base L] [--label K=V]... [--network none|host|egress]\n"
    "    [--allow HOST[:PORT]|*.DOMAIN[:PORT]|CIDR[:PORT]]...\n"
    "    [--workspace PATH] [--memory SIZE] [--pids N] [--cpus N] [--rootfs DIR|IMAGE.tar]\n"
    "    [--tmpfs-size SIZE] [--shm-size SIZE]\n"
    "    [--env K=V]... [--env-file FILE]... [--secret "
    "NAME[,inject][,env=VAR][,file=/run/secrets/F]]...\n"
    "    [--from-snapshot SNAP] [--ttl DURATION] [--idle-ttl DURATION]\n"
    "    [--on-expiry discard|snapshot] [--disk SIZE|none]\n"
    "session snapshot S [--name SNAP]\n"
    "session fork S [--name N] [--label K=V]... [--ttl DURATION] [--idle-ttl DURATION] ...\n"
    "session list [--project P]\n"
    "session inspect S\n"
    "session path S\n"
    "session stop S" },
  { "blame", cmd_blame, "blame PROJECT PATH" },
  { "diff", cmd_diff,
    "diff S [--json | --patch] [--ignored | --include-ignored] [--progress | --quiet]" },
  { "publish", cmd_publish,
    "publish S [-m|--message MESSAGE] [--discard] [--include-ignored] [--allow-secret NAME]...\n"
    "    [--wait]" },
  { "queue", cmd_queue,
    "queue list [--project P] [--all]\n"
    "queue show ID [--log]\n"
    "queue run PROJECT\n"
    "queue cancel ID" },
  { "review", cmd_review,
    "review list [--project P]\n"
    "review show ID [--log]\n"
    "review approve ID [-m|--message TEXT]\n"
    "review reject ID [-m|--message TEXT]" },
  { "rebase", cmd_rebase,
    "rebase S [--restart]\n"
    "rebase --show S PATH --base|--ours|--theirs\n"
    "rebase --resolved S PATH..." },
  { "discard", cmd_discard, "discard S [--force]" },
  { "wait", cmd_wait, "wait PROJECT [--after LAYER] [--timeout DURATION] [--json]" },
  { "show", cmd_show, "show PROJECT[@LAYER]:PATH" },
  { "export", cmd_export,
    "export S|PROJECT[@LAYER] -o|--output FILE [--format tar|oci-layer] [--progress | --quiet]" },
  { "fsck", cmd_fsck, "fsck [PROJECT]" },
  { "gc", cmd_gc, "gc [--snapshots] [--cache] [--progress | --quiet]" },
  { "snapshot", cmd_snapshot, "snapshot list [--project P] | inspect SNAP | rm SNAP" },
  { "trash", cmd_trash,
    "trash list | restore ENTRY [--name S] | purge ENTRY|--all | ttl [DURATION]" },
  { "exec", cmd_exec,
    "exec S [--cwd DIR] [--env K=V]... [--user UID[:GID]] [--detach] [-t|--tty]\n"
    "    [--log-limit SIZE] -- CMD [ARG...]" },
  { "ps", cmd_ps, "ps S" },
  { "mcp", cmd_mcp, "mcp [--project P] [--session S] [--scope SCOPE[,SCOPE]]" },
  { "events", cmd_events, "events S [--json] [--follow]" },
  { "egress", cmd_egress, "egress check S URL [--method M] [--json]" },
  { "secret", cmd_secret,
    "secret create NAME [--project P] [--from-file PATH]   (the value on stdin otherwise)\n"
    "    [--for HOST]... [--header 'NAME: TEXT{}' | --basic USER | --query PARAM]\n"
    "secret list [--project P]\n"
    "secret rm NAME [--project P]" },
  { "token", cmd_token,
    "token create --scope SCOPE[,SCOPE] [--project P] [--session S] [--ttl DURATION]\n"
    "             [--max-sessions N] [--max-egress N]\n"
    "token list\n"
    "token revoke ID" },
};

static const char global_usage[]
    = "esbx [--root DIR] [--host unix:///PATH|https://HOST:PORT|tcp://HOST:PORT] [--ca FILE]\n"
      "     [--json] [--progress | --quiet] COMMAND ...";

esbx_store_t *
cli_store (struct esbx_cli *cli, esbx_error_t *err)
{
  if (cli->store == NULL)
    {
      if (esbx_store_open (cli->root, &cli->store, err) < 0)
        return NULL;
      /* A verb does not wait for the files of a discarded session.  */
      esbx_store_detach_removals (cli->store);
    }
  return cli->store;
}

int
cli_usage (esbx_error_t *err, const char *fmt, ...)
{
  _cleanup_free_ char *msg = NULL;
  va_list ap;

  va_start (ap, fmt);
  msg = xvasprintf (fmt, ap);
  va_end (ap);
  return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "%s", msg);
}

int
cli_parse_session (int argc, char **argv, const char *expected, const char **session,
                   esbx_error_t *err)
{
  int k;

  for (k = 1; k < argc && argv[k][0] == '-'; k++)
    if (strcmp (argv[k], "--json") != 0)
      return cli_usage (err, "%s: unknown option `%s`", argv[0], argv[k]);
  if (k + 1 != argc)
    return cli_usage (err, "%s: %s", argv[0], expected);
  *session = argv[k];
  return 0;
}

void
cli_print_json (const json_t *j)
{
  _cleanup_free_ char *s = json_serialize (j, true, NULL);
  printf ("%s\n", s);
}

/* The forms of VERB, the first after FIRST ("usage: " or "  "), the others
   aligned beneath it; continuation lines (starting with a space) further
   in.  */
static void
print_forms (FILE *out, const struct verb *verb, const char *first)
{
  const char *line = verb->usage, *nl;
  size_t indent = strlen (first);

  for (; line; line = nl ? nl + 1 : NULL)
    {
      nl = strchr (line, '\n');
      fprintf (out, "%*s%s%.*s\n", (int)(line == verb->usage ? 0 : indent),
               line == verb->usage ? first : "", line[0] == ' ' ? "     " : "esbx ",
               nl ? (int)(nl - line) : (int)strlen (line), line);
    }
}

static void
usage (FILE *out)
{
  size_t i;

  fprintf (out, "usage: %s\n", global_usage);
  fprintf (out, "  esbx help [COMMAND]\n");
  for (i = 0; i < ARRAY_SIZE (verbs); i++)
    print_forms (out, &verbs[i], "  ");
}

/* `esbx VERB --help` (or -h): among the verb's options, before a `--`;
   for exec only before its session name, so that the command's own
   --help is left to it.  */
static bool
help_asked (const struct verb *verb, int argc, char **argv)
{
  int k;

  for (k = 1; k < argc && strcmp (argv[k], "--") != 0; k++)
    {
      if (strcmp (argv[k], "--help") == 0 || strcmp (argv[k], "-h") == 0)
        return true;
      if (verb->fn == cmd_exec && argv[k][0] != '-')
        break;
    }
  return false;
}

static void
verb_help (const struct verb *verb)
{
  print_forms (stdout, verb, "usage: ");
  printf ("global options: --root DIR, --host URL, --ca FILE (before COMMAND), --json (before or "
          "after it),\n"
          "  --progress | --quiet (progress of long work on stderr: forced | never; by default\n"
          "  when stderr is a terminal)\n");
}

int
main (int argc, char **argv)
{
  struct esbx_cli cli = { 0 };
  esbx_error_t err = NULL;
  int i, ret;

  esbx_log_set_prog ("esbx");
  cli.root = getenv ("ESBX_ROOT");
  cli.host = getenv ("ESBX_HOST");
  cli.ca = getenv ("ESBX_CA");

  /* Global options come before the verb.  */
  for (i = 1; i < argc && argv[i][0] == '-'; i++)
    {
      if (strcmp (argv[i], "--root") == 0 && i + 1 < argc)
        cli.root = argv[++i];
      else if (strncmp (argv[i], "--root=", 7) == 0)
        cli.root = argv[i] + 7;
      else if (strcmp (argv[i], "--host") == 0 && i + 1 < argc)
        cli.host = argv[++i];
      else if (strncmp (argv[i], "--host=", 7) == 0)
        cli.host = argv[i] + 7;
      else if (strcmp (argv[i], "--ca") == 0 && i + 1 < argc)
        cli.ca = argv[++i];
      else if (strncmp (argv[i], "--ca=", 5) == 0)
        cli.ca = argv[i] + 5;
      else if (strcmp (argv[i], "--json") == 0)
        cli.json = true;
      else if (strcmp (argv[i], "--progress") == 0)
        cli.progress = CLI_PROGRESS_ON;
      else if (strcmp (argv[i], "--quiet") == 0)
        cli.progress = CLI_PROGRESS_OFF;
      else if (strcmp (argv[i], "--help") == 0 || strcmp (argv[i], "-h") == 0)
        {
          usage (stdout);
          return ESBX_EXIT_OK;
        }
      else if (strcmp (argv[i], "--version") == 0)
        {
          printf ("esbx 0.1.0\n");
          return ESBX_EXIT_OK;
        }
      else
        {
          fprintf (stderr, "esbx: unknown global option `%s`\n", argv[i]);
          usage (stderr);
          return ESBX_EXIT_USAGE;
        }
    }
  if (i >= argc)
    {
      usage (stderr);
      return ESBX_EXIT_USAGE;
    }

  /* `esbx help [VERB]`: as `esbx --help`, `esbx VERB --help`.  */
  if (strcmp (argv[i], "help") == 0)
    {
      if (i + 1 >= argc)
        {
          usage (stdout);
          return ESBX_EXIT_OK;
        }
      for (size_t v = 0; v < ARRAY_SIZE (verbs); v++)
        if (strcmp (verbs[v].name, argv[i + 1]) == 0)
          {
            verb_help (&verbs[v]);
            return ESBX_EXIT_OK;
          }
      fprintf (stderr, "esbx: help: unknown command `%s`\n", argv[i + 1]);
      usage (stderr);
      return ESBX_EXIT_USAGE;
    }
  for (size_t v = 0; v < ARRAY_SIZE (verbs); v++)
    {
      if (strcmp (verbs[v].name, argv[i]) != 0)
        continue;
      if (help_asked (&verbs[v], argc - i, argv + i))
        {
          verb_help (&verbs[v]);
          return ESBX_EXIT_OK;
        }
      /* Verbs accept --json after their own name too.  */
      for (int k = i + 1; k < argc; k++)
        {
          if (strcmp (argv[k], "--") == 0)
            break;
          if (strcmp (argv[k], "--json") == 0)
            cli.json = true;
        }
      opterr = 0; /* verbs report bad options themselves, on one line */
      optind = 0; /* glibc: full re-initialisation for each verb */
      ret = verbs[v].fn (&cli, argc - i, argv + i, &err);
      cli_progress_stop ();
      if (ret < 0)
        {
          if (err && err->kind == ESBX_ERR_USAGE)
            {
              ret = esbx_error_report (&err, stderr, "esbx");
              print_forms (stderr, &verbs[v], "usage: ");
            }
          else
            ret = esbx_error_report (&err, stderr, "esbx");
        }
      esbx_store_close (cli.store);
      fflush (stdout);
      return ret;
    }
  fprintf (stderr, "esbx: unknown command `%s`\n", argv[i]);
  usage (stderr);
  return ESBX_EXIT_USAGE;
}
