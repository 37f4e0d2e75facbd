/* delete: record `container-detached` for a container that create put into
   a session, then become runc.  Nothing here may stop the delete: Docker
   must always be able to clean up, so problems are warnings.  */
#include "runtime.h"
#include "events.h"
#include "layerstore.h"
#include "utils.h"

int
cmd_delete (struct runtime *rt, esbx_error_t *err)
{
  _cleanup_strv_ char **roots = runtime_store_roots (rt);
  _cleanup_store_ esbx_store_t *store = NULL;
  _cleanup_free_ char *session = NULL;
  esbx_error_t e = NULL;
  struct verb_args args;
  json_t *fields;
  size_t i;

  runtime_parse_verb (rt->argc - rt->verb - 1, rt->argv + rt->verb + 1, &args);
  /* The event precedes runc's delete: afterwards we are runc.  If runc
     then refuses (a running container without --force), the event is
     early; Docker only deletes stopped containers or with --force.  */
  for (i = 0; roots[i] && session == NULL; i++)
    session = runtime_map_take (roots[i], args.id);
  if (session == NULL)
    return runtime_exec_runc (rt, err);
  fields = json_new (JSON_OBJECT);
  json_set_string (fields, "container", args.id);
  if (esbx_store_open (roots[i - 1], &store, &e) < 0
      || esbx_event_append (store, session, "container-detached", fields, &e) < 0)
    {
      _cleanup_free_ char *msg = xasprintf ("session `%s`: %s", session, e->msg);
      runtime_log (rt, "warning", msg);
      esbx_error_free (&e);
      if (store == NULL)
        json_free (fields);
    }
  return runtime_exec_runc (rt, err);
}
