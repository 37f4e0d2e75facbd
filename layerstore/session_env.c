/* The environment of a session: KEY=VALUE pairs kept in session.json
   ("env", an object) that every `esbx exec` and every container of the
   session starts with.  Values are stored and shown as given: secrets are
   not told apart here.  */
#include "internal.h"
#include "text.h"
#include "utils.h"

#include <string.h>

/* How much of a key an error message shows.  */
#define KEY_SHOWN 64

static bool
key_valid (const char *key, size_t len)
{
  size_t i;

  if (len == 0 || (key[0] >= '0' && key[0] <= '9'))
    return false;
  for (i = 0; i < len; i++)
    {
      char c = key[i];
      if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
        return false;
    }
  return true;
}

/* The key as an error names it: its printable start, so that the message
   stays one line.  */
static int
shown_len (const char *key, size_t len)
{
  size_t i;

  for (i = 0; i < len && i < KEY_SHOWN; i++)
    if (key[i] < 0x20 || key[i] == 0x7f)
      break;
  return (int)i;
}

static int
check_pair (const char *key, size_t klen, const char *value, esbx_error_t *err)
{
  int shown = shown_len (key, klen);

  if (!key_valid (key, klen))
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                 "env `%.*s`: expected KEY=VALUE, KEY of letters, digits and _ "
                                 "not starting with a digit",
                                 shown, key);
  if (strchr (value, '\n') != NULL || strchr (value, '\r') != NULL)
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "env `%.*s`: the value holds a newline",
                                 shown, key);
  if (!esbx_utf8_valid (value, strlen (value)))
    return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "env `%.*s`: the value is not UTF-8",
                                 shown, key);
  return 0;
}

int
esbx_session_env_check (const char *key, const char *value, esbx_error_t *err)
{
  return check_pair (key, strlen (key), value, err);
}

int
esbx_session_env_parse (char *const *env, json_t **out, esbx_error_t *err)
{
  _cleanup_json_ json_t *obj = json_new (JSON_OBJECT);
  const json_t *v;
  const char *key;
  size_t i, total = 0;

  for (i = 0; env && env[i]; i++)
    {
      const char *eq = strchr (env[i], '=');
      _cleanup_free_ char *k = NULL;

      if (eq == NULL)
        return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0, "env `%.*s`: expected KEY=VALUE",
                                     shown_len (env[i], strlen (env[i])), env[i]);
      if (check_pair (env[i], (size_t)(eq - env[i]), eq + 1, err) < 0)
        return -1;
      k = xstrndup (env[i], (size_t)(eq - env[i]));
      json_set_string (obj, k, eq + 1);
    }
  /* What execve would take for each string counts: KEY=VALUE and its NUL.  */
  json_object_foreach (obj, i, key, v)
    {
      total += strlen (key) + strlen (v->text) + 2;
      if (total > ESBX_SESSION_ENV_MAX)
        return esbx_make_error_kind (err, ESBX_ERR_USAGE, 0,
                                     "env `%.*s`: the session's environment exceeds %u bytes",
                                     shown_len (key, strlen (key)), key, ESBX_SESSION_ENV_MAX);
    }
  *out = steal_pointer (&obj);
  return 0;
}

json_t *
esbx_session_env_copy (const json_t *env)
{
  json_t *obj = json_new (JSON_OBJECT);
  const json_t *v;
  const char *key;
  size_t i;

  if (env == NULL || env->type != JSON_OBJECT)
    return obj;
  json_object_foreach (env, i, key, v)
    if (v->type == JSON_STRING && key_valid (key, strlen (key)))
      json_set_string (obj, key, v->text);
  return obj;
}
