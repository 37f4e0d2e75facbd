/* Who a peer of the proxy is.  Its address is in the egress range at
   offset 2 of a /30: slot N, whose record (ESBX_EGRESS_RUN/N.json) names
   this store and the session.  The session's record is read for each
   connection, so that the policy is never older than the request.  */
#include "proxy.h"
#include "egress.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int
proxy_client_lookup (uint32_t peer, struct proxy_client *c, bool secrets, esbx_error_t *err)
{
  _cleanup_free_ char *name = NULL;
  _cleanup_json_ json_t *rec = NULL;
  _cleanup_close_ int dfd = -1;
  struct esbx_session *s = NULL;
  const json_t *allow;
  const char *root, *session;
  size_t i;

  memset (c, 0, sizeof *c);
  c->slot = proxy_slot_of (peer);
  if (c->slot < 0)
    return esbx_make_error (err, 0, "not an address of the egress range");
  dfd = TEMP_FAILURE_RETRY (open (ESBX_EGRESS_RUN, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dfd < 0)
    return esbx_make_error (err, errno, "open `%s`", ESBX_EGRESS_RUN);
  name = xasprintf ("%d.json", c->slot);
  rec = json_parse_file_at (dfd, name, err);
  if (rec == NULL)
    return -1;
  root = json_get_string (rec, "store");
  session = json_get_string (rec, "session");
  if (root == NULL || session == NULL || strcmp (root, proxy.store->root) != 0)
    return esbx_make_error (err, 0, "slot %d: another store's", c->slot);
  if (esbx_session_load (proxy.store, session, &s, err) < 0)
    return -1;
  c->session = xstrdup (session);
  allow = json_get (s->record, "allow");
  c->allow = allow && allow->type == JSON_ARRAY ? json_copy (allow) : json_new (JSON_ARRAY);
  if (secrets && esbx_session_secrets (proxy.store, s, &c->secrets, &c->n_secrets, err) < 0)
    {
      esbx_session_free (s);
      proxy_client_free (c);
      return -1;
    }
  esbx_session_free (s);
  c->inject = xmalloc0 (sizeof *c->inject * (c->n_secrets + 1));
  for (i = 0; i < c->n_secrets; i++)
    if (c->secrets[i].inject)
      {
        c->inject[i] = esbx_secret_inject_read (proxy.store, c->secrets[i].name);
        c->has_inject = c->has_inject || c->inject[i] != NULL;
      }
  return 0;
}

void
proxy_client_free (struct proxy_client *c)
{
  size_t i;

  for (i = 0; c->inject && i < c->n_secrets; i++)
    json_free (c->inject[i]);
  free (c->inject);
  esbx_secrets_free (c->secrets, c->n_secrets);
  json_free (c->allow);
  free (c->session);
  memset (c, 0, sizeof *c);
  c->slot = -1;
}
