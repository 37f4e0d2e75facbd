/* What the merge queue's verbs print (queue, review, project gate, publish
   --wait), from the records `--json` shows, in both modes.  */
#include "cli.h"
#include "text.h"
#include "utils.h"

#include <inttypes.h>
#include <string.h>

bool
cli_request_final (const json_t *rec)
{
  const char *s = json_get_string (rec, "state");

  return s
         && (strcmp (s, "landed") == 0 || strcmp (s, "rejected") == 0
             || strcmp (s, "cancelled") == 0);
}

int
cli_request_outcome (struct esbx_cli *cli, const char *session, const json_t *rec,
                     esbx_error_t *err)
{
  const char *state = cli_str_or (rec, "state", ""), *id = cli_str_or (rec, "id", "");
  const json_t *why = json_get (rec, "rejected");
  const char *kind = cli_str_or (why, "kind", "");
  enum esbx_error_kind k = ESBX_ERR_FAILED;

  if (cli->json)
    cli_print_json (rec);
  if (strcmp (state, "landed") == 0)
    {
      if (!cli->json && json_get_string (rec, "layer"))
        printf ("%s\n", json_get_string (rec, "layer"));
      else if (!cli->json)
        fprintf (stderr, "esbx: publish `%s`: request `%s`: nothing to land (upstream has it)\n",
                 session, id);
      return 0;
    }
  if (strcmp (kind, "unmerged") == 0)
    k = ESBX_ERR_UNMERGED;
  else if (strcmp (kind, "conflict") == 0)
    k = ESBX_ERR_CONFLICT;
  return esbx_make_error_kind (err, k, 0, "publish `%s`: request `%s` %s: %s (%s)", session, id,
                               state, cli_str_or (why, "message", "withdrawn"),
                               strcmp (kind, "check") == 0 || strcmp (kind, "timeout") == 0
                                   ? "the check's log: esbx queue show ID --log"
                               : k == ESBX_ERR_UNMERGED || k == ESBX_ERR_CONFLICT
                                   ? "the session keeps its work: rebase it, then publish again"
                                   : "the session keeps its work");
}

static size_t
approvals (const json_t *rec)
{
  return json_len (json_get (rec, "approvals"));
}

void
cli_print_requests (struct esbx_cli *cli, const json_t *arr)
{
  const json_t *r;
  size_t i;

  if (cli->json)
    {
      cli_print_json (arr);
      return;
    }
  printf ("ID\tPROJECT\tSESSION\tSTATE\tAPPROVALS\tRUNS\tFILED\tMESSAGE\n");
  json_array_foreach (arr, i, r)
    {
      _cleanup_free_ char *msg = esbx_escape_line (cli_str_or (r, "message", ""));
      printf ("%s\t%s\t%s\t%s\t%zu/%" PRId64 "\t%" PRId64 "\t%s\t%s\n", cli_str_or (r, "id", ""),
              cli_str_or (r, "project", ""), cli_str_or (r, "session", ""),
              cli_str_or (r, "state", ""), approvals (r), cli_int_of (r, "approvals_needed"),
              cli_int_of (r, "runs"), cli_str_or (r, "filed", ""), msg);
    }
}

void
cli_print_request (struct esbx_cli *cli, const json_t *rec)
{
  const json_t *x;
  size_t i;

  if (cli->json)
    {
      cli_print_json (rec);
      return;
    }
  {
    _cleanup_free_ char *msg = esbx_escape_line (cli_str_or (rec, "message", ""));
    printf ("request:   %s (project %s, session %s)\n", cli_str_or (rec, "id", ""),
            cli_str_or (rec, "project", ""), cli_str_or (rec, "session", ""));
    printf ("state:     %s\n", cli_str_or (rec, "state", ""));
    printf ("message:   %s\n", msg);
    printf ("filed:     %s by %s\n", cli_str_or (rec, "filed", ""),
            cli_str_or (rec, "filed_by", ""));
  }
  json_array_foreach (json_get (rec, "approvals"), i, x)
    printf ("approved:  %s at %s\n", cli_str_or (x, "by", ""), cli_str_or (x, "at", ""));
  json_array_foreach (json_get (rec, "checks"), i, x)
    {
      _cleanup_free_ char *c = esbx_escape_line (cli_str_or (x, "command", ""));
      printf ("check:     %s: exit %" PRId64 " in %s s%s\n", c, cli_int_of (x, "status"),
              cli_str_or (x, "seconds", "?"),
              json_get_bool (x, "timed_out", false) ? " (timed out)" : "");
    }
  if (json_get_string (rec, "layer"))
    printf ("layer:     %s\n", json_get_string (rec, "layer"));
  if (json_get (rec, "rejected"))
    {
      _cleanup_free_ char *m
          = esbx_escape_line (cli_str_or (json_get (rec, "rejected"), "message", ""));
      printf ("rejected:  %s (%s)\n", m, cli_str_or (json_get (rec, "rejected"), "kind", ""));
    }
  json_array_foreach (json_get (rec, "changes"), i, x)
    {
      const char *k = cli_str_or (x, "kind", "");
      _cleanup_free_ char *p = esbx_escape_line (cli_str_or (x, "path", ""));
      printf ("%c %s\n",
              strcmp (k, "added") == 0     ? 'A'
              : strcmp (k, "deleted") == 0 ? 'D'
                                           : 'M',
              p);
    }
}

void
cli_print_gate (struct esbx_cli *cli, const json_t *g)
{
  const json_t *c;
  size_t i;

  if (cli->json)
    {
      cli_print_json (g);
      return;
    }
  printf ("mode:      %s\n", cli_str_or (g, "mode", "auto"));
  json_array_foreach (json_get (g, "checks"), i, c)
    printf ("check:     %s\n", c->type == JSON_STRING ? c->text : "");
  printf ("timeout:   %" PRId64 " s\n", cli_int_of (g, "check_timeout"));
  printf ("approvals: %" PRId64 "\n", cli_int_of (g, "approvals"));
  if (cli_int_of (g, "parallel"))
    printf ("parallel:  %" PRId64 "\n", cli_int_of (g, "parallel"));
  json_array_foreach (json_get (g, "secrets"), i, c)
    printf ("secret:    %s\n", c->type == JSON_STRING ? c->text : "");
}
