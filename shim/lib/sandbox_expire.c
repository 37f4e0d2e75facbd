/* The end of bounded lifetimes (README, "Lifetimes"): esbxd's expiry thread
 * and `esbx gc` retire the sessions past their ttl or idle ttl.  Retiring
 * can fail (a snapshot that does not fit on the store's filesystem, a
 * holder that does not stop); the session then must not live on forever,
 * nor be tried again every second.  Each failure is counted in
 * ROOT/sessions/S/expiry.json, reported (a log line or gc's report, an
 * `expiry.failed` event, /metrics) and puts the next attempt off, twice as
 * long each time; after ESBX_EXPIRY_ATTEMPTS failed attempts the session is
 * retired by the fallback, a plain discard: its unpublished work goes to
 * the trash as with any discard.  */
#include "sandbox.h"
#include "events.h"
#include "holder.h"
#include "log.h"
#include "text.h"
#include "utils.h"

#include <inttypes.h>
#include <string.h>
#include <time.h>

/* The longest wait between two attempts.  */
#define RETRY_MAX_MS (10 * 60 * 1000)

static int64_t
now_ms (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The wait after the FAILURES-th failure: RETRY_MS, doubled each time.  */
static int64_t
retry_delay (long retry_ms, int64_t failures)
{
  int64_t d = retry_ms > 0 ? retry_ms : 1000;

  while (--failures > 0 && d < RETRY_MAX_MS)
    d *= 2;
  return d < RETRY_MAX_MS ? d : RETRY_MAX_MS;
}

/* One line for gc's report, else esbxd's log.  */
static void
say (FILE *report, const char *line)
{
  if (report)
    fprintf (report, "%s\n", line);
  else
    esbx_warn ("%s", line);
}

/* Count the failure of retiring S: next attempt later, an event, a line.  */
static void
failed (esbx_store_t *store, const struct esbx_session *s, const char *why, long retry_ms,
        struct esbx_expiry_state *st, const char *msg, FILE *report)
{
  json_t *f = json_new (JSON_OBJECT);
  _cleanup_free_ char *line = NULL;
  esbx_error_t e = NULL;
  int64_t delay;

  st->failures++;
  delay = retry_delay (retry_ms, st->failures);
  st->next_ms = now_ms () + delay;
  free (st->error);
  st->error = xstrdup (msg);
  if (esbx_expiry_state_save (store, s->name, st, &e) < 0)
    {
      esbx_warn ("%s", e->msg);
      esbx_error_free (&e);
    }
  json_set_string (f, "reason", why);
  json_set_string (f, "error", msg);
  json_set_int (f, "attempt", st->failures);
  if (st->failures < ESBX_EXPIRY_ATTEMPTS)
    json_set_int (f, "retry_in_ms", delay);
  else
    json_set_string (f, "next", "discard");
  esbx_event_append (store, s->name, "expiry.failed", f, NULL);
  if (st->failures < ESBX_EXPIRY_ATTEMPTS)
    line = xasprintf ("expiry of session `%s` failed: %s; attempt %" PRId64
                      " of %d, the next in %.1f s",
                      s->name, msg, st->failures, ESBX_EXPIRY_ATTEMPTS, (double)delay / 1000);
  else
    line = xasprintf ("expiry of session `%s` failed: %s; the next attempt discards it", s->name,
                      msg);
  say (report, line);
}

/* Retire S: with on_expiry snapshot, a snapshot first (then nothing is
   lost and the session goes without the trash); otherwise, or as the
   fallback once the attempts are used up, a discard, whose trash keeps
   unpublished work.  Returns 1 when retired, 0 when put off, -1 when it
   failed (counted).  */
static int
retire (esbx_store_t *store, const struct esbx_session *s, const char *why, long retry_ms,
        FILE *report)
{
  const char *on_expiry = json_get_string (s->record, "on_expiry");
  struct esbx_expiry_state st;
  _cleanup_free_ char *snap = NULL;
  unsigned int flags = 0;
  esbx_error_t e = NULL;
  bool fallback;
  json_t *f;

  esbx_expiry_state_load (store, s->name, &st);
  /* esbxd waits out the delay; `esbx gc`, asked by hand, tries at once.  */
  if (retry_ms > 0 && st.failures > 0 && now_ms () < st.next_ms)
    {
      esbx_expiry_state_clear (&st);
      return 0;
    }
  fallback = st.failures >= ESBX_EXPIRY_ATTEMPTS;
  if (esbx_holder_stop (store, s->name, &e) < 0)
    goto fail;
  if (on_expiry && strcmp (on_expiry, "snapshot") == 0 && !fallback)
    {
      _cleanup_free_ char *hex = esbx_random_hex (4);
      _cleanup_free_ char *want = xasprintf ("%.100s-expired-%s", s->name, hex);
      struct esbx_snapshot_policy p = { 0 };
      if (esbx_snapshot_create (store, s->name, want, 0, &snap, NULL, &e) < 0)
        goto fail;
      /* A push that fails fails the retiring (tried again, counted), with
         the snapshot removed: the next attempt takes another.  */
      if (esbx_project_is_shared (store, s->project)
          && (esbx_snapshot_policy_get (store, s->project, &p, &e) < 0
              || (p.on_expiry && esbx_snapshot_push (store, snap, NULL, &e) < 0)))
        {
          esbx_error_t ignored = NULL;
          if (esbx_snapshot_rm (store, snap, &ignored) < 0)
            esbx_error_free (&ignored);
          goto fail;
        }
      flags |= ESBX_DISCARD_FORCE;
    }
  f = json_new (JSON_OBJECT);
  json_set_string (f, "reason", why);
  if (snap)
    json_set_string (f, "snapshot", snap);
  if (fallback)
    {
      json_set_string (f, "fallback", "discard");
      json_set_int (f, "failures", st.failures);
      if (st.error)
        json_set_string (f, "error", st.error);
    }
  esbx_event_append (store, s->name, "expired", f, NULL);
  if (esbx_sandbox_discard (store, s->name, flags, &e) < 0)
    goto fail;
  if (report && snap)
    fprintf (report, "retired session `%s` (%s): kept as snapshot `%s`\n", s->name, why, snap);
  else if (report && fallback)
    fprintf (report, "retired session `%s` (%s): discarded after %" PRId64 " failed attempts\n",
             s->name, why, st.failures);
  else if (report)
    fprintf (report, "retired session `%s` (%s)\n", s->name, why);
  if (fallback && !report)
    esbx_warn ("retired session `%s` (%s): discarded after %" PRId64 " failed attempts", s->name,
               why, st.failures);
  esbx_expiry_state_clear (&st);
  return 1;

fail:
  /* Another gc or a discard got there first: nothing failed.  */
  if (esbx_session_exists (store, s->name))
    failed (store, s, why, retry_ms, &st, e->msg, report);
  esbx_error_free (&e);
  esbx_expiry_state_clear (&st);
  return esbx_session_exists (store, s->name) ? -1 : 0;
}

int
esbx_sandbox_expire (esbx_store_t *store, long retry_ms, FILE *report,
                     struct esbx_expire_result *res, esbx_error_t *err)
{
  _cleanup_sessions_ struct esbx_sessions it = { 0 };
  struct esbx_expire_result r = { 0 };
  int64_t now = (int64_t)time (NULL);
  struct esbx_session *s;

  if (esbx_sessions_open (store, NULL, &it, err) < 0)
    return -1;
  while ((s = esbx_sessions_next (&it)))
    {
      const char *why;
      int64_t at;

      at = esbx_session_expires (store, s, &why);
      if (at > 0 && at <= now)
        {
          int done = retire (store, s, why, retry_ms, report);
          if (done > 0)
            r.retired++;
          else if (done < 0)
            r.failed++;
        }
    }
  if (res)
    *res = r;
  return 0;
}
