/* Errors in the wrapped runtime's own log format.  containerd's shim
   reports a failed create by reading the last "error" line of the --log
   file, so that is where `docker run` finds the cause; podman does the same
   for runtimes it knows to log JSON (runtime_supports_json).  runc and crun
   write the same JSON lines; their text lines differ: logrus's for runc,
   the bare message for crun.  */
#include "runtime.h"
#include "fs.h"
#include "text.h"
#include "utils.h"

#include <fcntl.h>
#include <string.h>

/* logrus's text formatter: time="..." level=error msg="..." with Go
   quoting of the message.  */
static char *
text_line (const char *time, const char *level, const char *msg)
{
  size_t n = strlen (msg);
  _cleanup_free_ char *quoted = xmalloc (n * 4 + 1);
  char *q = quoted;
  const char *p;

  for (p = msg; *p; p++)
    {
      unsigned char c = (unsigned char)*p;

      if (c == '"' || c == '\\')
        {
          *q++ = '\\';
          *q++ = (char)c;
        }
      else if (c == '\n')
        {
          *q++ = '\\';
          *q++ = 'n';
        }
      else if (c < 0x20)
        q += sprintf (q, "\\x%02x", c);
      else
        *q++ = (char)c;
    }
  *q = '\0';
  return xasprintf ("time=\"%s\" level=%s msg=\"%s\"\n", time, level, quoted);
}

static char *
json_line (const char *time, const char *level, const char *msg)
{
  _cleanup_json_ json_t *o = json_new (JSON_OBJECT);
  _cleanup_free_ char *s = NULL;

  json_set_string (o, "level", level);
  json_set_string (o, "msg", msg);
  json_set_string (o, "time", time);
  s = json_serialize (o, false, NULL);
  return xasprintf ("%s\n", s);
}

void
runtime_log (const struct runtime *rt, const char *level, const char *msg)
{
  _cleanup_free_ char *time = NULL;
  _cleanup_free_ char *line = NULL;
  _cleanup_close_ int fd = -1;

  fprintf (stderr, "esbx-runtime: %s%s%s\n", strcmp (level, "error") == 0 ? "" : level,
           strcmp (level, "error") == 0 ? "" : ": ", msg);
  if (rt->log == NULL || *rt->log == '\0')
    return;
  time = esbx_rfc3339_now ();
  if (rt->log_format && strcmp (rt->log_format, "json") == 0)
    line = json_line (time, level, msg);
  else if (runtime_is_crun (rt))
    line = xasprintf ("%s\n", msg);
  else
    line = text_line (time, level, msg);
  fd = TEMP_FAILURE_RETRY (
      open (rt->log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0644));
  if (fd < 0)
    return;
  /* One write, O_APPEND: runc's children may log to the same file.  */
  (void)esbx_write_all (fd, line, strlen (line));
}
