/* delete: record `container-detached` for a container that create put into
   a session, then become runc.  Nothing here may stop the delete: Docker
   must always be able to clean up, so problems are warnings.

   A container joined to a session in a user namespace has host-side mounts
   (joined_dir.c): runc runs as a child then, and they are undone once runc
   no longer knows the container (a delete of a running container without
   --force fails, and the container keeps them).  */
#include "runtime.h"
#include "events.h"
#include "layerstore.h"
#include "utils.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void
record_detached (struct runtime *rt, const char *store_root, const char *session, const char *id)
{
  _cleanup_store_ esbx_store_t *store = NULL;
  json_t *fields = json_new (JSON_OBJECT);
  esbx_error_t e = NULL;

  json_set_string (fields, "container", id);
  if (esbx_store_open (store_root, &store, &e) < 0
      || esbx_event_append (store, session, "container-detached", fields, &e) < 0)
    {
      _cleanup_free_ char *msg = xasprintf ("session `%s`: %s", session, e->msg);
      runtime_log (rt, "warning", msg);
      esbx_error_free (&e);
      if (store == NULL)
        json_free (fields);
    }
}

/* runc's delete as a child, then the joined container's mounts; exits
   with runc's status.  */
static int
delete_then_clean (struct runtime *rt, const char *dir, const char *id, esbx_error_t *err)
{
  _cleanup_free_ char *state = xasprintf ("%s/%s", runtime_root (rt), id);
  esbx_error_t e = NULL;
  int status;

  if (runtime_run_runc (rt, "delete", &status, err) < 0)
    return -1;
  if (access (state, F_OK) < 0 && errno == ENOENT && joined_dir_remove (dir, &e) < 0)
    {
      runtime_log (rt, "warning", e->msg);
      esbx_error_free (&e);
    }
  exit (WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status));
}

int
cmd_delete (struct runtime *rt, esbx_error_t *err)
{
  _cleanup_strv_ char **roots = runtime_store_roots (rt);
  _cleanup_free_ char *session = NULL;
  _cleanup_free_ char *dir = NULL;
  struct verb_args args;
  size_t i;

  runtime_parse_verb (rt->argc - rt->verb - 1, rt->argv + rt->verb + 1, &args);
  /* The event precedes runc's delete: afterwards we are runc.  If runc
     then refuses (a running container without --force), the event is
     early; Docker only deletes stopped containers or with --force.  */
  for (i = 0; roots[i] && session == NULL; i++)
    session = runtime_map_take (roots[i], args.id);
  if (session)
    record_detached (rt, roots[i - 1], session, args.id);
  dir = args.id ? joined_dir_path (runtime_root (rt), args.id) : NULL;
  if (dir && access (dir, F_OK) == 0)
    return delete_then_clean (rt, dir, args.id, err);
  return runtime_exec_runc (rt, err);
}
