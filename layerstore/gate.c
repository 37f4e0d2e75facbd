/* A project's publish policy (README, "The gate"), ROOT/projects/P/gate.json:
 * {"mode", "checks", "check_timeout", "approvals", "parallel", "secrets"}.
 * No file: auto, a publish lands at once as it always did.  The policy is
 * the project's: the CLI, the gateway and Docker volumes all publish
 * through it, none can choose another.  */
#include "internal.h"
#include "fs.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#define GATE_FILE         "gate.json"
#define GATE_MAX_COMMAND  4096
#define GATE_MAX_APPROVAL 16
#define GATE_MAX_PARALLEL 64
#define GATE_MAX_TIMEOUT  (7 * 24 * 3600)

void
esbx_gate_clear (struct esbx_gate *g)
{
  free (g->mode);
  cleanup_strvp (&g->checks);
  cleanup_strvp (&g->secrets);
  memset (g, 0, sizeof *g);
}

bool
esbx_gate_is_auto (const struct esbx_gate *g)
{
  return g->mode == NULL || strcmp (g->mode, "auto") == 0;
}

static char **
strings_of (const json_t *arr)
{
  struct strv v = { 0 };
  const json_t *x;
  size_t i;

  json_array_foreach (arr, i, x)
    if (x->type == JSON_STRING)
      strv_push (&v, xstrdup (x->text));
  return v.v ? v.v : xmalloc0 (sizeof (char *));
}

int
esbx_gate_load (esbx_store_t *store, const char *project, struct esbx_gate *g, esbx_error_t *err)
{
  _cleanup_free_ char *rel = NULL;
  _cleanup_json_ json_t *j = NULL;
  int64_t v;

  memset (g, 0, sizeof *g);
  if (esbx_project_check (store, project, err) < 0)
    return -1;
  g->check_timeout = ESBX_GATE_DEFAULT_TIMEOUT;
  rel = esbx_project_file (project, GATE_FILE);
  if (!esbx_exists_at (store->rootfd, rel))
    {
      g->mode = xstrdup ("auto");
      g->checks = xmalloc0 (sizeof (char *));
      g->secrets = xmalloc0 (sizeof (char *));
      return 0;
    }
  j = json_parse_file_at (store->rootfd, rel, err);
  if (j == NULL)
    return esbx_error_wrap (err, "project `%s`: its gate", project);
  g->mode = xstrdup (json_get_string (j, "mode") ? json_get_string (j, "mode") : "auto");
  g->checks = strings_of (json_get (j, "checks"));
  g->secrets = strings_of (json_get (j, "secrets"));
  if (json_get_int (j, "check_timeout", &v) && v > 0)
    g->check_timeout = v;
  if (json_get_int (j, "approvals", &v) && v > 0 && v <= GATE_MAX_APPROVAL)
    g->approvals = (unsigned)v;
  if (json_get_int (j, "parallel", &v) && v > 0 && v <= GATE_MAX_PARALLEL)
    g->parallel = (unsigned)v;
  return 0;
}

json_t *
esbx_gate_json (const struct esbx_gate *g)
{
  json_t *o = json_new (JSON_OBJECT);

  json_set_string (o, "mode", g->mode ? g->mode : "auto");
  json_set (o, "checks", json_new_strings (g->checks));
  json_set_int (o, "check_timeout", g->check_timeout);
  json_set_int (o, "approvals", g->approvals);
  json_set_int (o, "parallel", g->parallel);
  json_set (o, "secrets", json_new_strings (g->secrets));
  return o;
}

static int
check_gate (const char *project, const struct esbx_gate *g, esbx_error_t *err)
{
  const char *mode = g->mode ? g->mode : "auto";
  size_t n = strv_len (g->checks);

  if (strcmp (mode, "auto") != 0 && strcmp (mode, "checks") != 0 && strcmp (mode, "review") != 0)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "project `%s`: invalid gate mode `%s`: expected auto, checks or "
                                 "review",
                                 project, mode);
  if (strcmp (mode, "auto") == 0 && (n > 0 || g->approvals > 0 || strv_len (g->secrets) > 0))
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "project `%s`: --check, --approvals and --secret go with --mode "
                                 "checks or review",
                                 project);
  if (strcmp (mode, "checks") == 0 && n == 0)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "project `%s`: --mode checks needs at least one --check CMD",
                                 project);
  if (n > ESBX_GATE_MAX_CHECKS)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "project `%s`: at most %d checks", project,
                                 ESBX_GATE_MAX_CHECKS);
  for (size_t i = 0; i < n; i++)
    {
      size_t len = strlen (g->checks[i]);
      if (len == 0 || len > GATE_MAX_COMMAND || !esbx_utf8_valid (g->checks[i], len))
        return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                     "project `%s`: check %zu: a command is UTF-8 text of 1 to "
                                     "%d bytes",
                                     project, i + 1, GATE_MAX_COMMAND);
    }
  if (g->approvals > GATE_MAX_APPROVAL)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "project `%s`: --approvals %u: at most %d",
                                 project, g->approvals, GATE_MAX_APPROVAL);
  if (g->parallel > GATE_MAX_PARALLEL)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "project `%s`: --parallel %u: at most %d",
                                 project, g->parallel, GATE_MAX_PARALLEL);
  if (g->check_timeout <= 0 || g->check_timeout > GATE_MAX_TIMEOUT)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "project `%s`: --check-timeout: from 1 second to 7 days", project);
  for (char **s = g->secrets; s && *s; s++)
    if (esbx_check_name ("secret", *s, err) < 0)
      return esbx_error_wrap (err, "project `%s`: --secret", project);
  return 0;
}

int
esbx_gate_set (esbx_store_t *store, const char *project, const struct esbx_gate *g,
               esbx_error_t *err)
{
  _cleanup_free_ char *dir = NULL, *text = NULL;
  _cleanup_json_ json_t *j = NULL;
  _cleanup_close_ int dfd = -1;
  struct esbx_gate set = *g;
  size_t len;

  if (esbx_check_name ("project", project, err) < 0 || check_gate (project, g, err) < 0)
    return -1;
  if (!esbx_project_exists (store, project))
    return esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0, "project `%s` does not exist",
                                 project);
  if (!esbx_gate_is_auto (g) && esbx_project_is_shared (store, project))
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "project `%s` is shared through a remote: its gate can only be "
                                 "auto (not done yet)",
                                 project);
  dir = esbx_project_rel (project);
  dfd = esbx_open_dir_at (store->rootfd, dir, err);
  if (dfd < 0)
    return -1;
  if (esbx_gate_is_auto (g))
    {
      if (unlinkat (dfd, GATE_FILE, 0) < 0 && errno != ENOENT)
        return esbx_make_error (err, errno, "project `%s`: remove `%s`", project, GATE_FILE);
      return 0;
    }
  /* review asks for one approval at least.  */
  if (strcmp (g->mode, "review") == 0 && set.approvals == 0)
    set.approvals = 1;
  j = esbx_gate_json (&set);
  text = json_serialize (j, true, &len);
  return esbx_write_file_atomic_at (dfd, GATE_FILE, text, len, 0644, err);
}
