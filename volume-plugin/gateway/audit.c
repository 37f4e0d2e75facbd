#include "audit.h"
#include "fs.h"
#include "json.h"
#include "log.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>

struct esbx_audit
{
  int fd;
  pthread_mutex_t lock;
};

int
esbx_audit_open (esbx_store_t *store, struct esbx_audit **out, esbx_error_t *err)
{
  struct esbx_audit *a;
  int fd;

  fd = openat (store->rootfd, "audit.log", O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0)
    return esbx_make_error (err, errno, "open `%s/audit.log`", store->root);
  a = xmalloc0 (sizeof *a);
  a->fd = fd;
  pthread_mutex_init (&a->lock, NULL);
  *out = a;
  return 0;
}

void
esbx_audit_close (struct esbx_audit *a)
{
  if (a == NULL)
    return;
  close (a->fd);
  pthread_mutex_destroy (&a->lock);
  free (a);
}

void
esbx_audit_record (struct esbx_audit *a, const char *token_id, const char *method, const char *path,
                   bool allowed, unsigned status, const char *reason)
{
  _cleanup_json_ json_t *o = json_new (JSON_OBJECT);
  _cleanup_free_ char *now = esbx_rfc3339_now (), *line = NULL, *doc = NULL;
  size_t len;

  if (a == NULL)
    return;
  json_set_string (o, "time", now);
  json_set (o, "token", token_id ? json_new_string (token_id) : json_new (JSON_NULL));
  json_set_string (o, "method", method);
  json_set_string (o, "path", path);
  json_set_string (o, "decision", allowed ? "allowed" : "denied");
  json_set_int (o, "status", status);
  if (reason)
    json_set_string (o, "reason", reason);
  doc = json_serialize (o, false, &len);
  line = xasprintf ("%s\n", doc);
  /* One write per line with O_APPEND: lines never interleave, and the
     mutex keeps our own threads in order.  */
  pthread_mutex_lock (&a->lock);
  if (esbx_write_all (a->fd, line, len + 1) < 0)
    esbx_warn ("audit log: %s", strerror (errno));
  pthread_mutex_unlock (&a->lock);
}
