/* What the verbs print, from the JSON views that `--json` shows.  Embedded
   mode builds the views from the store, gateway mode receives them from the
   gateway; both print through these functions so that scripts see the same
   bytes either way.  */
#include "cli.h"
#include "text.h"
#include "utils.h"

#include <inttypes.h>
#include <string.h>

const char *
cli_str_or (const json_t *o, const char *key, const char *dflt)
{
  const char *s = json_get_string (o, key);
  return s ? s : dflt;
}

int64_t
cli_int_of (const json_t *o, const char *key)
{
  int64_t v = 0;
  json_get_int (o, key, &v);
  return v;
}

/* "45s", "12m", "5h", "3d": coarse, for a table.  */
static char *
duration (int64_t s)
{
  if (s < 120)
    return xasprintf ("%" PRId64 "s", s);
  if (s < 120 * 60)
    return xasprintf ("%" PRId64 "m", s / 60);
  if (s < 48 * 3600)
    return xasprintf ("%" PRId64 "h", s / 3600);
  return xasprintf ("%" PRId64 "d", s / 86400);
}

void
cli_print_projects (struct esbx_cli *cli, const json_t *arr)
{
  const json_t *p;
  size_t i;

  if (cli->json)
    {
      cli_print_json (arr);
      return;
    }
  printf ("NAME\tLAYERS\tHEAD\n");
  json_array_foreach (arr, i, p)
    printf ("%s\t%" PRId64 "\t%s\n", cli_str_or (p, "name", ""), cli_int_of (p, "layers"),
            cli_str_or (p, "head", ""));
}

void
cli_print_log (struct esbx_cli *cli, const json_t *arr)
{
  const json_t *l;
  size_t i;

  if (cli->json)
    {
      cli_print_json (arr);
      return;
    }
  /* The columns of the lines below, for layer indexes under 1000, times
     with nanoseconds and fewer than 10 changes.  */
  printf ("%-16s %3s %-30s %-20s %-9s  %s\n", "LAYER", "#", "CREATED", "SESSION", "CHANGES",
          "MESSAGE");
  json_array_foreach (arr, i, l)
    {
      int64_t n = cli_int_of (l, "changes");

      printf ("%s %3" PRId64 " %s %-20s %" PRId64 " change%s  %s\n", cli_str_or (l, "id", ""),
              cli_int_of (l, "index"), cli_str_or (l, "created", ""),
              cli_str_or (l, "session", "-"), n, n == 1 ? " " : "s", cli_str_or (l, "message", ""));
    }
}

void
cli_print_blame (struct esbx_cli *cli, const json_t *l)
{
  const json_t *labels = json_get (l, "labels");
  const json_t *value;
  const char *key;
  size_t i;

  if (cli->json)
    {
      cli_print_json (l);
      return;
    }
  printf ("layer:   %s (%" PRId64 ")\n", cli_str_or (l, "id", ""), cli_int_of (l, "index"));
  printf ("session: %s\n", cli_str_or (l, "session", "-"));
  printf ("labels: ");
  json_object_foreach (labels, i, key, value)
    printf (" %s=%s", key, value->type == JSON_STRING ? value->text : "");
  printf ("\nmessage: %s\n", cli_str_or (l, "message", ""));
  printf ("time:    %s\n", cli_str_or (l, "created", ""));
  /* Landed through the merge queue: its request and who approved it.  */
  if (json_get (l, "gate"))
    {
      const json_t *g = json_get (l, "gate"), *a;

      printf ("request: %s\n", cli_str_or (g, "request", ""));
      json_array_foreach (json_get (g, "approvals"), i, a)
        printf ("approved: %s at %s\n", cli_str_or (a, "by", ""), cli_str_or (a, "at", ""));
    }
}

void
cli_print_sessions (struct esbx_cli *cli, const json_t *arr)
{
  const json_t *s;
  size_t i;

  if (cli->json)
    {
      cli_print_json (arr);
      return;
    }
  printf ("NAME\tPROJECT\tBASE\tSTATE\tAGE\tIDLE\tEXPIRES\n");
  json_array_foreach (arr, i, s)
    {
      const json_t *l = json_get (s, "lifetime");
      _cleanup_free_ char *age = duration (cli_int_of (l, "age"));
      _cleanup_free_ char *idle = duration (cli_int_of (l, "idle"));
      _cleanup_free_ char *expires = NULL;
      int64_t in;

      if (json_get_int (l, "expires_in", &in))
        {
          _cleanup_free_ char *left = duration (in > 0 ? in : 0);
          expires = xasprintf ("in %s (%s)", left, cli_str_or (l, "expires_by", ""));
        }
      printf ("%s\t%s\t%s\t%s\t%s\t%s\t%s\n", cli_str_or (s, "name", ""),
              cli_str_or (s, "project", ""), cli_str_or (s, "base", ""),
              json_get_bool (s, "mounted", false) ? "mounted" : "unmounted", age, idle,
              expires ? expires : "-");
    }
}

void
cli_print_snapshots (struct esbx_cli *cli, const json_t *arr)
{
  const json_t *t;
  size_t i;

  if (cli->json)
    {
      cli_print_json (arr);
      return;
    }
  printf ("NAME\tPROJECT\tBASE\tSESSION\tBYTES\tSESSIONS\tCREATED\n");
  json_array_foreach (arr, i, t)
    {
      const json_t *users = json_get (t, "sessions");
      printf ("%s\t%s\t%.12s\t%s\t%" PRId64 "\t%zu\t%s\n", cli_str_or (t, "name", ""),
              cli_str_or (t, "project", ""), cli_str_or (t, "base", ""),
              cli_str_or (t, "session", ""), cli_int_of (t, "bytes"), json_len (users),
              cli_str_or (t, "created", ""));
    }
}

void
cli_print_changes (struct esbx_cli *cli, const json_t *arr)
{
  const json_t *c;
  size_t i;

  if (cli->json)
    {
      cli_print_json (arr);
      return;
    }
  json_array_foreach (arr, i, c)
    {
      const char *kind = cli_str_or (c, "kind", "");
      _cleanup_free_ char *shown = esbx_quote_path (cli_str_or (c, "path", ""));
      char letter = strcmp (kind, "added") == 0 ? 'A' : strcmp (kind, "deleted") == 0 ? 'D' : 'M';

      printf ("%c %s%s\n", letter, shown,
              json_get_bool (c, "stripped", false) ? "  (setuid/setgid stripped)" : "");
    }
}

void
cli_print_published (struct esbx_cli *cli, const char *session, const json_t *o)
{
  const char *layer = json_get_string (o, "layer");
  const json_t *ign = json_get (o, "ignored"), *p;
  size_t i;

  if (cli->json)
    {
      cli_print_json (o);
      return;
    }
  if (json_get_string (o, "request"))
    {
      printf ("%s\n", json_get_string (o, "request"));
      fprintf (stderr,
               "esbx: publish `%s`: queued as request `%s` (%s); `esbx publish --wait` "
               "or `esbx queue show %s` follows it\n",
               session, json_get_string (o, "request"), cli_str_or (o, "state", "queued"),
               json_get_string (o, "request"));
    }
  else if (layer)
    printf ("%s\n", layer);
  else
    fprintf (stderr, "esbx: publish `%s`: nothing to publish\n", session);
  if (ign)
    {
      int64_t n = cli_int_of (ign, "count");

      fprintf (stderr, "esbx: publish `%s`: %" PRId64 " ignored path%s left out (", session, n,
               n == 1 ? "" : "s");
      json_array_foreach (json_get (ign, "first"), i, p)
        fprintf (stderr, "%s%s", i ? ", " : "", p->type == JSON_STRING ? p->text : "");
      fprintf (stderr, "%s); --include-ignored publishes them\n",
               (size_t)n > json_len (json_get (ign, "first")) ? ", ..." : "");
    }
}

/* One conflict of a publish or rebase, on stderr.  */
static void
print_conflict (const json_t *c)
{
  const char *kind = cli_str_or (c, "kind", "content");
  const char *renamed = json_get_string (c, "renamed");

  fprintf (stderr, "conflict: %s (layer %s, session %s)", cli_str_or (c, "path", ""),
           cli_str_or (c, "layer", ""), cli_str_or (c, "session", "-"));
  if (json_get_bool (c, "markers", false))
    fprintf (stderr, ": merged with conflict markers");
  else if (renamed)
    fprintf (stderr, ": renamed, %s %s",
             json_get_bool (c, "blocking", false) ? "not merged into" : "merged into", renamed);
  else if (json_get_bool (c, "blocking", false))
    fprintf (stderr, ": %s, rebase cannot merge it", kind);
  fputc ('\n', stderr);
}

/* One path a rebase left for a person, on stderr.  */
static void
print_unmerged (const json_t *u)
{
  static const char *const sides[] = { "base", "ours", "theirs" };
  const char *kind = cli_str_or (u, "kind", "content");
  bool any = false;

  fprintf (stderr, "unmerged: %s (%s", cli_str_or (u, "path", ""),
           strcmp (kind, "content") == 0 ? "conflict markers" : kind);
  for (size_t i = 0; i < 3; i++)
    if (json_get_string (u, sides[i]))
      {
        fprintf (stderr, "%s--%s", any ? "|" : "; versions: ", sides[i]);
        any = true;
      }
  fprintf (stderr, ")\n");
}

void
cli_print_refused (struct esbx_cli *cli, const json_t *o)
{
  const json_t *p;
  size_t i;

  if (json_get (o, "base"))
    {
      cli_print_rebased (cli, o);
      return;
    }
  if (cli->json)
    {
      _cleanup_json_ json_t *view = json_new (JSON_OBJECT);

      if (json_get (o, "conflicts"))
        json_set (view, "conflicts", json_copy (json_get (o, "conflicts")));
      if (json_get (o, "unmerged"))
        json_set (view, "unmerged", json_copy (json_get (o, "unmerged")));
      cli_print_json (view);
      return;
    }
  json_array_foreach (json_get (o, "conflicts"), i, p)
    print_conflict (p);
  json_array_foreach (json_get (o, "unmerged"), i, p)
    print_unmerged (p);
}

int
cli_publish_failed (struct esbx_cli *cli, struct esbx_publish_result *r)
{
  _cleanup_json_ json_t *o = esbx_refused_json (r);

  if (o)
    cli_print_refused (cli, o);
  esbx_publish_result_free (r);
  return -1;
}

void
cli_print_rebased (struct esbx_cli *cli, const json_t *o)
{
  const json_t *p;
  size_t i;

  if (cli->json)
    {
      /* The whole view, without an error answer's "error" and "code".  */
      _cleanup_json_ json_t *view = json_copy (o);
      json_remove (view, "error");
      json_remove (view, "code");
      json_remove (view, "kind");
      cli_print_json (view);
      return;
    }
  if (json_get_string (o, "base"))
    printf ("%s\n", json_get_string (o, "base"));
  json_array_foreach (json_get (o, "merged"), i, p)
    fprintf (stderr, "merged: %s\n", p->type == JSON_STRING ? p->text : "");
  json_array_foreach (json_get (o, "conflicts"), i, p)
    if (json_get_string (p, "renamed") && !json_get_bool (p, "blocking", false))
      fprintf (stderr, "renamed: %s -> %s\n", cli_str_or (p, "path", ""),
               cli_str_or (p, "renamed", ""));
  json_array_foreach (json_get (o, "conflicts"), i, p)
    if (json_get_bool (p, "blocking", false))
      print_conflict (p);
  json_array_foreach (json_get (o, "unmerged"), i, p)
    print_unmerged (p);
}

void
cli_print_ps (struct esbx_cli *cli, const json_t *arr)
{
  const json_t *p;
  size_t i;

  if (cli->json)
    {
      cli_print_json (arr);
      return;
    }
  printf ("%7s %7s %s\n", "PID", "HOSTPID", "COMMAND");
  json_array_foreach (arr, i, p)
    printf ("%7d %7d %s\n", (int)cli_int_of (p, "pid"), (int)cli_int_of (p, "host_pid"),
            cli_str_or (p, "command", ""));
}

static void
print_value (const json_t *v)
{
  _cleanup_free_ char *s = NULL;

  if (v->type == JSON_STRING)
    fputs (v->text, stdout);
  else
    {
      s = json_serialize (v, false, NULL);
      fputs (s, stdout);
    }
}

static void
print_argv (const json_t *argv)
{
  size_t i;

  for (i = 0; argv && argv->type == JSON_ARRAY && i < json_len (argv); i++)
    {
      if (i)
        putchar (' ');
      print_value (json_at (argv, i));
    }
}

void
cli_print_event (bool json, const json_t *ev)
{
  const char *type = json_get_string (ev, "type");
  const json_t *value;
  const char *k;
  size_t i;

  if (json)
    {
      _cleanup_free_ char *s = json_serialize (ev, false, NULL);
      printf ("%s\n", s);
      return;
    }
  printf ("%s %s", json_get_string (ev, "time") ? json_get_string (ev, "time") : "-",
          type ? type : "-");
  json_object_foreach (ev, i, k, value)
    {
      if (strcmp (k, "time") == 0 || strcmp (k, "type") == 0 || strcmp (k, "argv") == 0)
        continue;
      printf (" %s=", k);
      print_value (value);
    }
  if (json_get (ev, "argv"))
    {
      fputs (" -- ", stdout);
      print_argv (json_get (ev, "argv"));
    }
  putchar ('\n');
}

void
cli_print_report (struct esbx_cli *cli, const json_t *o)
{
  fputs (cli_str_or (o, "report", ""), stdout);
}

void
cli_print_trash (struct esbx_cli *cli, const json_t *arr)
{
  const json_t *t;
  size_t i;

  if (cli->json)
    {
      cli_print_json (arr);
      return;
    }
  json_array_foreach (arr, i, t)
    {
      int64_t n = cli_int_of (t, "changes");
      _cleanup_free_ char *changes = n < 0 ? xstrdup ("?") : xasprintf ("%" PRId64, n);

      printf ("%s\t%s\t%s\t%.12s\t%s\t%" PRId64 "\t%s\t%s\n", cli_str_or (t, "entry", ""),
              cli_str_or (t, "session", ""), cli_str_or (t, "project", ""),
              cli_str_or (t, "base", ""), changes, cli_int_of (t, "size"),
              cli_str_or (t, "deleted", ""), cli_str_or (t, "expires", ""));
    }
}
