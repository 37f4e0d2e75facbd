/* A project's network defaults (README, "Network allow-lists"): the
 * network of new sessions that name none and, for egress, the allow-list
 * of those that name none, in ROOT/projects/P/network.json
 * ({"network": "egress", "allow": [...]}).  No file: "none", as before.
 * Read once per session create; the session's record keeps what it got,
 * so a later change of the defaults leaves existing sessions alone.  */
#include "internal.h"
#include "fs.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#define DEFAULTS_FILE "network.json"

static int
check_network (const char *network, esbx_error_t *err)
{
  if (strcmp (network, "none") != 0 && strcmp (network, "host") != 0
      && strcmp (network, "egress") != 0)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "invalid network `%s`: expected none, host or egress", network);
  return 0;
}

/* The defaults of PROJECT, {} when it has none.  */
static json_t *
read_defaults (esbx_store_t *store, const char *project, esbx_error_t *err)
{
  _cleanup_free_ char *rel = esbx_project_file (project, "%s", DEFAULTS_FILE);
  json_t *j;

  if (!esbx_exists_at (store->rootfd, rel))
    return json_new (JSON_OBJECT);
  j = json_parse_file_at (store->rootfd, rel, err);
  if (j == NULL)
    return esbx_error_wrap (err, "project `%s`: network defaults", project), NULL;
  return j;
}

int
esbx_project_network_set (esbx_store_t *store, const char *project, const char *network,
                          char *const *allow, esbx_error_t *err)
{
  _cleanup_free_ char *dir = esbx_project_rel (project), *text = NULL;
  _cleanup_json_ json_t *j = json_new (JSON_OBJECT), *list = NULL;
  _cleanup_close_ int dfd = -1;
  bool has_allow = allow && allow[0];
  size_t len;

  if (network == NULL)
    network = has_allow ? "egress" : "none";
  if (check_network (network, err) < 0)
    return esbx_error_wrap (err, "project `%s`", project);
  if (has_allow && strcmp (network, "egress") != 0)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "project `%s`: --allow `%s`: only the egress network has an "
                                 "allow-list",
                                 project, allow[0]);
  if (esbx_egress_allow_parse (allow, &list, err) < 0)
    return esbx_error_wrap (err, "project `%s`", project);
  if (esbx_project_check (store, project, err) < 0)
    return -1;
  dfd = esbx_open_dir_at (store->rootfd, dir, err);
  if (dfd < 0)
    return -1;
  if (strcmp (network, "none") == 0)
    {
      if (unlinkat (dfd, DEFAULTS_FILE, 0) < 0 && errno != ENOENT)
        return esbx_make_error (err, errno, "project `%s`: remove `%s`", project, DEFAULTS_FILE);
      return 0;
    }
  json_set_string (j, "network", network);
  if (strcmp (network, "egress") == 0)
    json_set (j, "allow", steal_pointer (&list));
  text = json_serialize (j, true, &len);
  return esbx_write_file_atomic_at (dfd, DEFAULTS_FILE, text, len, 0644, err);
}

json_t *
esbx_project_network_get (esbx_store_t *store, const char *project, esbx_error_t *err)
{
  json_t *j;

  if (esbx_project_check (store, project, err) < 0)
    return NULL;
  j = read_defaults (store, project, err);
  if (j && json_get_string (j, "network") == NULL)
    json_set_string (j, "network", "none");
  return j;
}

void
esbx_network_defaults_clear (struct esbx_network_defaults *d)
{
  json_free (d->record);
  free (d->allow);
  d->record = NULL;
  d->allow = NULL;
}

int
esbx_network_defaults_apply (esbx_store_t *store, const char *project, struct esbx_session_opts *o,
                             struct esbx_network_defaults *d, esbx_error_t *err)
{
  const json_t *allow, *v;
  const char *network;
  size_t i, n = 0;

  d->record = NULL;
  d->allow = NULL;
  /* No project: its own error comes later.  */
  if (!esbx_project_exists (store, project))
    return 0;
  d->record = read_defaults (store, project, err);
  if (d->record == NULL)
    return -1;
  network = json_get_string (d->record, "network");
  if (network == NULL)
    return 0;
  if (o->network == NULL)
    o->network = network;
  if (strcmp (o->network, "egress") != 0 || strcmp (network, "egress") != 0
      || (o->allow && o->allow[0]))
    return 0;
  allow = json_get (d->record, "allow");
  d->allow = xmalloc0 ((json_len (allow) + 1) * sizeof *d->allow);
  json_array_foreach (allow, i, v)
    if (v->type == JSON_STRING)
      d->allow[n++] = v->text;
  o->allow = d->allow;
  return 0;
}
