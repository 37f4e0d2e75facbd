/* The lifecycle of a session as its front ends see it: the CLI, the
   gateway and the Docker volume driver call these and nothing below them,
   so that what a verb means (publish then discard, when the merged view may
   be unmounted, when a rebase must wait) is decided here once.  */
#include "sandbox.h"
#include "holder.h"
#include "text.h"
#include "utils.h"

#include <errno.h>

int
esbx_sandbox_create (esbx_store_t *store, const char *project, const struct esbx_session_opts *opts,
                     char **name, esbx_error_t *err)
{
  return esbx_session_create (store, project, opts, name, err);
}

int
esbx_sandbox_publish (esbx_store_t *store, const char *name, const char *message,
                      unsigned int flags, struct esbx_publish_result *result, esbx_error_t *err)
{
  if (esbx_session_publish (store, name, message, result, err) < 0)
    return -1;
  if ((flags & ESBX_PUBLISH_DISCARD) && esbx_sandbox_discard (store, name, 0, err) < 0)
    return -1;
  return 0;
}

int
esbx_sandbox_discard (esbx_store_t *store, const char *name, unsigned int flags, esbx_error_t *err)
{
  if (esbx_check_name ("session", name, err) < 0)
    return -1;
  if (esbx_holder_stop (store, name, err) < 0)
    return esbx_error_wrap (err, "discard `%s`", name);
  return esbx_session_discard (store, name, flags, err);
}

int
esbx_sandbox_rebase (esbx_store_t *store, const char *name, struct esbx_publish_result *result,
                     esbx_error_t *err)
{
  if (esbx_check_name ("session", name, err) < 0)
    return -1;
  if (!esbx_session_exists (store, name))
    return esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0, "session `%s` does not exist", name);
  if (esbx_sandbox_holder_running (store, name))
    return esbx_make_error (
        err, EBUSY, "rebase `%s`: the session's holder is running; stop its processes first", name);
  return esbx_session_rebase (store, name, result, err);
}

int
esbx_sandbox_view_acquire (esbx_store_t *store, const char *name, char **merged, esbx_error_t *err)
{
  if (esbx_session_mount (store, name, err) < 0)
    return -1;
  if (merged)
    *merged = esbx_session_merged (store, name);
  return 0;
}

int
esbx_sandbox_view_release (esbx_store_t *store, const char *name, esbx_error_t *err)
{
  /* The holder's processes (esbx exec, esbx-runtime containers) use the
     merged view too: it stays until the session ends.  */
  if (esbx_sandbox_holder_running (store, name) || !esbx_session_is_mounted (store, name))
    return 0;
  return esbx_session_unmount (store, name, err);
}

json_t *
esbx_sandbox_list (esbx_store_t *store, const char *project, esbx_sandbox_filter_t visible,
                   const void *data, esbx_error_t *err)
{
  _cleanup_strv_ char **names = esbx_session_list (store, project, err);
  json_t *arr;
  size_t i;

  if (names == NULL)
    return NULL;
  arr = json_new (JSON_ARRAY);
  for (i = 0; names[i]; i++)
    {
      struct esbx_session *s = NULL;
      esbx_error_t e = NULL;

      /* A session discarded while we list is simply gone.  */
      if (esbx_session_load (store, names[i], &s, &e) < 0)
        {
          esbx_error_free (&e);
          continue;
        }
      if (visible == NULL || visible (s, data))
        json_append (arr, esbx_session_json (store, s, NULL));
      esbx_session_free (s);
    }
  return arr;
}

json_t *
esbx_sandbox_inspect (esbx_store_t *store, const char *name, esbx_error_t *err)
{
  struct esbx_session *s = NULL;
  json_t *j;

  if (esbx_session_load (store, name, &s, err) < 0)
    return NULL;
  j = esbx_session_json (store, s, esbx_sandbox_status (store, s->name));
  esbx_session_free (s);
  return j;
}
