/* What the verbs print, from the JSON views that `--json` shows.  Embedded
   mode builds the views from the store, remote mode receives them from the
   gateway; both print through these functions so that scripts see the same
   bytes either way.  */
#include "cli.h"
#include "text.h"
#include "utils.h"

#include <inttypes.h>
#include <string.h>

static const char *
str_or (const json_t *o, const char *key, const char *dflt)
{
  const char *s = json_get_string (o, key);
  return s ? s : dflt;
}

static int64_t
int_of (const json_t *o, const char *key)
{
  int64_t v = 0;
  json_get_int (o, key, &v);
  return v;
}

void
cli_print_projects (struct esbx_cli *cli, const json_t *arr)
{
  size_t i;

  if (cli->json)
    {
      cli_print_json (arr);
      return;
    }
  for (i = 0; i < arr->n; i++)
    printf ("%s\t%" PRId64 "\t%s\n", str_or (arr->items[i], "name", ""),
            int_of (arr->items[i], "layers"), str_or (arr->items[i], "head", ""));
}

void
cli_print_log (struct esbx_cli *cli, const json_t *arr)
{
  size_t i;

  if (cli->json)
    {
      cli_print_json (arr);
      return;
    }
  for (i = 0; i < arr->n; i++)
    {
      const json_t *l = arr->items[i];
      int64_t n = int_of (l, "changes");

      printf ("%s %3" PRId64 " %s %-20s %" PRId64 " change%s  %s\n", str_or (l, "id", ""),
              int_of (l, "index"), str_or (l, "created", ""), str_or (l, "session", "-"), n,
              n == 1 ? " " : "s", str_or (l, "message", ""));
    }
}

void
cli_print_blame (struct esbx_cli *cli, const json_t *l)
{
  const json_t *labels = json_get (l, "labels");
  size_t i;

  if (cli->json)
    {
      cli_print_json (l);
      return;
    }
  printf ("layer:   %s (%" PRId64 ")\n", str_or (l, "id", ""), int_of (l, "index"));
  printf ("session: %s\n", str_or (l, "session", "-"));
  printf ("labels: ");
  for (i = 0; labels && i < labels->n; i++)
    printf (" %s=%s", labels->keys[i],
            labels->items[i]->type == JSON_STRING ? labels->items[i]->text : "");
  printf ("\nmessage: %s\n", str_or (l, "message", ""));
  printf ("time:    %s\n", str_or (l, "created", ""));
}

void
cli_print_sessions (struct esbx_cli *cli, const json_t *arr)
{
  size_t i;

  if (cli->json)
    {
      cli_print_json (arr);
      return;
    }
  for (i = 0; i < arr->n; i++)
    printf ("%s\t%s\t%s\t%s\n", str_or (arr->items[i], "name", ""),
            str_or (arr->items[i], "project", ""), str_or (arr->items[i], "base", ""),
            json_get_bool (arr->items[i], "mounted", false) ? "mounted" : "unmounted");
}

void
cli_print_changes (struct esbx_cli *cli, const json_t *arr)
{
  size_t i;

  if (cli->json)
    {
      cli_print_json (arr);
      return;
    }
  for (i = 0; i < arr->n; i++)
    {
      const char *kind = str_or (arr->items[i], "kind", "");
      _cleanup_free_ char *shown = esbx_quote_path (str_or (arr->items[i], "path", ""));
      char letter = strcmp (kind, "added") == 0 ? 'A' : strcmp (kind, "deleted") == 0 ? 'D' : 'M';

      printf ("%c %s%s\n", letter, shown,
              json_get_bool (arr->items[i], "stripped", false) ? "  (setuid/setgid stripped)" : "");
    }
}

void
cli_print_published (struct esbx_cli *cli, const char *session, const json_t *o)
{
  const char *layer = json_get_string (o, "layer");

  if (cli->json)
    cli_print_json (o);
  else if (layer)
    printf ("%s\n", layer);
  else
    fprintf (stderr, "esbx: publish `%s`: nothing to publish\n", session);
}

void
cli_print_conflicts (struct esbx_cli *cli, const json_t *conflicts)
{
  size_t i;

  if (cli->json)
    {
      /* {"conflicts": CONFLICTS}, borrowing them: only serialised, never
         freed.  */
      char *key = "conflicts";
      json_t *item = (json_t *)conflicts;
      const json_t o = { .type = JSON_OBJECT, .n = 1, .keys = &key, .items = &item };

      cli_print_json (&o);
      return;
    }
  for (i = 0; i < conflicts->n; i++)
    fprintf (stderr, "conflict: %s (layer %s, session %s)\n",
             str_or (conflicts->items[i], "path", ""), str_or (conflicts->items[i], "layer", ""),
             str_or (conflicts->items[i], "session", "-"));
}

int
cli_publish_failed (struct esbx_cli *cli, struct esbx_publish_result *r)
{
  if (r->n_conflicts)
    {
      _cleanup_json_ json_t *conflicts = esbx_conflicts_json (r);
      cli_print_conflicts (cli, conflicts);
    }
  esbx_publish_result_free (r);
  return -1;
}

void
cli_print_rebased (struct esbx_cli *cli, const json_t *o)
{
  if (cli->json)
    cli_print_json (o);
  else
    printf ("%s\n", str_or (o, "base", ""));
}

void
cli_print_ps (struct esbx_cli *cli, const json_t *arr)
{
  size_t i;

  if (cli->json)
    {
      cli_print_json (arr);
      return;
    }
  printf ("%7s %7s %s\n", "PID", "HOSTPID", "COMMAND");
  for (i = 0; i < arr->n; i++)
    printf ("%7d %7d %s\n", (int)int_of (arr->items[i], "pid"),
            (int)int_of (arr->items[i], "host_pid"), str_or (arr->items[i], "command", ""));
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

  for (i = 0; argv && argv->type == JSON_ARRAY && i < argv->n; i++)
    {
      if (i)
        putchar (' ');
      print_value (argv->items[i]);
    }
}

void
cli_print_event (bool json, const json_t *ev)
{
  const char *type = json_get_string (ev, "type");
  size_t i;

  if (json)
    {
      _cleanup_free_ char *s = json_serialize (ev, false, NULL);
      printf ("%s\n", s);
      return;
    }
  printf ("%s %s", json_get_string (ev, "time") ? json_get_string (ev, "time") : "-",
          type ? type : "-");
  for (i = 0; i < ev->n; i++)
    {
      const char *k = ev->keys[i];

      if (strcmp (k, "time") == 0 || strcmp (k, "type") == 0 || strcmp (k, "argv") == 0)
        continue;
      printf (" %s=", k);
      print_value (ev->items[i]);
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
  fputs (str_or (o, "report", ""), stdout);
}
