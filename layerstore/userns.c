/* A session's user namespace: the range of host ids its root maps to, and
 * the namespace objects that carry the mapping.
 *
 * Ranges are host-wide: slot N is ids ESBX_USERNS_FIRST + N * 65536, 65536
 * of them, claimed by a file /run/esbx/userns/N naming the store and the
 * session (made under a lock, so two sessions never share a slot).  A
 * slot lives as long as the session's merged view is mounted with it:
 * the claim is taken when the view is mounted (session_mount.c) and
 * dropped when it is unmounted.  A slot whose session no longer has its
 * view mounted with that slot (a crash, a reboot of the mount but not of
 * /run) is taken back by a claim that finds every slot claimed
 * (esbx_userns_claim).  What the session got is kept in
 * ROOT/sessions/S/userns.json: {"mode": "userns", "uid": BASE, "count":
 * 65536, "slot": N}, or {"mode": "off", "reason": "..."} when the store's
 * filesystem cannot idmap its layers.
 *
 * The ids on disk never change: the layers and the upper are seen through
 * idmapped mounts (mount.c), so uid 0 of a file is uid 0 on disk and BASE
 * on the host's view of the merged directory.  The range therefore needs
 * no record that outlives the mount.  */
#include "internal.h"
#include "nskeeper.h"
#include "fs.h"
#include "text.h"
#include "json.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/capability.h>
#include <sys/fsuid.h>
#include <sys/syscall.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define USERNS_RUN_DIR "/run/esbx/userns"
#define USERNS_JSON    "userns.json"

static const char *
run_dir (void)
{
  /* Tests point it elsewhere to exhaust slots without touching the host's.  */
  const char *d = getenv ("ESBX_USERNS_RUN_DIR");
  return d && d[0] ? d : USERNS_RUN_DIR;
}

static unsigned
max_slots (void)
{
  const char *v = getenv ("ESBX_USERNS_SLOTS");
  unsigned long n = v ? strtoul (v, NULL, 10) : 0;

  return n > 0 && n <= ESBX_USERNS_MAX_SLOTS ? (unsigned)n : ESBX_USERNS_MAX_SLOTS;
}

static int
open_run_dir (esbx_error_t *err)
{
  _cleanup_free_ char *d = xstrdup (run_dir ());
  char *p;

  for (p = d + 1; (p = strchr (p, '/')) != NULL; p++)
    {
      *p = '\0';
      if (mkdir (d, 0755) < 0 && errno != EEXIST)
        return esbx_make_error (err, errno, "mkdir `%s`", d);
      *p = '/';
    }
  if (mkdir (d, 0700) < 0 && errno != EEXIST)
    return esbx_make_error (err, errno, "mkdir `%s`", d);
  return esbx_open_dir_at (AT_FDCWD, d, err);
}

void
esbx_userns_clear (struct esbx_userns *u)
{
  free (u->reason);
  memset (u, 0, sizeof *u);
  u->slot = -1;
}

int
esbx_userns_load (esbx_store_t *store, const char *session, struct esbx_userns *out,
                  esbx_error_t *err)
{
  _cleanup_close_ int dfd = -1;
  _cleanup_json_ json_t *j = NULL;
  const char *mode, *reason;
  int64_t uid = 0, count = 0, slot = -1;

  memset (out, 0, sizeof *out);
  out->slot = -1;
  dfd = esbx_session_open_dir (store, session, err);
  if (dfd < 0)
    return -1;
  if (!esbx_exists_at (dfd, USERNS_JSON))
    return 0;
  j = json_parse_file_at (dfd, USERNS_JSON, err);
  if (j == NULL)
    return -1;
  mode = json_get_string (j, "mode");
  reason = json_get_string (j, "reason");
  out->known = true;
  if (mode && strcmp (mode, "userns") == 0 && json_get_int (j, "uid", &uid)
      && json_get_int (j, "count", &count) && uid > 0 && count > 0 && uid + count <= UINT32_MAX)
    {
      out->on = true;
      out->uid = (uint32_t)uid;
      out->count = (uint32_t)count;
      if (json_get_int (j, "slot", &slot))
        out->slot = (int)slot;
    }
  if (reason)
    out->reason = xstrdup (reason);
  return 0;
}

static int
write_record (esbx_store_t *store, const char *session, const struct esbx_userns *u,
              esbx_error_t *err)
{
  _cleanup_close_ int dfd = esbx_session_open_dir (store, session, err);
  _cleanup_json_ json_t *j = json_new (JSON_OBJECT);
  _cleanup_free_ char *data = NULL;
  size_t len;

  if (dfd < 0)
    return -1;
  json_set_string (j, "mode", u->on ? "userns" : "off");
  if (u->on)
    {
      json_set_int (j, "uid", u->uid);
      json_set_int (j, "count", u->count);
      json_set_int (j, "slot", u->slot);
    }
  if (u->reason)
    json_set_string (j, "reason", u->reason);
  data = json_serialize (j, true, &len);
  /* What the mounted view runs in: a crash takes the view down with it
     and the next mount writes it again, so it is replaced whole, not
     made durable (session create stays at two fsyncs).  */
  return esbx_replace_file_at (dfd, USERNS_JSON, data, len, 0644, err);
}

int
esbx_userns_record_off (esbx_store_t *store, const char *session, const char *reason,
                        esbx_error_t *err)
{
  struct esbx_userns u = { .slot = -1, .reason = (char *)reason };

  return write_record (store, session, &u, err);
}

/* A claim's text: the store's root and the session, a line each.  */
static char *
claim_text (esbx_store_t *store, const char *session)
{
  return xasprintf ("%s\n%s\n", store->root, session);
}

/* CLAIM split in place into its store's ROOT and SESSION; false when it
   is not a claim.  */
static bool
claim_split (char *claim, char **root, char **session)
{
  char *nl = strchr (claim, '\n');

  if (nl == NULL || claim[0] != '/')
    return false;
  *nl = '\0';
  *root = claim;
  *session = nl + 1;
  if ((nl = strchr (*session, '\n')) != NULL)
    *nl = '\0';
  return esbx_name_valid (*session);
}

/* The slot a claim file's NAME stands for; -1 for another file.  */
static long
slot_of_name (const char *name)
{
  char *end;
  unsigned long n;

  if (name[0] < '0' || name[0] > '9')
    return -1;
  n = strtoul (name, &end, 10);
  return *end == '\0' && n <= UINT32_MAX ? (long)n : -1;
}

/* Whether slot N's claim (its content CLAIM) is still in force: its store
   and session exist, the session's record names slot N and its merged
   view is mounted.  */
static bool
claim_alive (int n, const char *claim)
{
  _cleanup_free_ char *copy = xstrdup (claim);
  _cleanup_free_ char *rec = NULL, *merged = NULL;
  _cleanup_json_ json_t *j = NULL;
  esbx_error_t ignored = NULL;
  char *root, *session;
  int64_t slot = -1;

  if (!claim_split (copy, &root, &session))
    return false;
  rec = xasprintf ("%s/sessions/%s/" USERNS_JSON, root, session);
  merged = xasprintf ("%s/sessions/%s/merged", root, session);
  j = json_parse_file_at (AT_FDCWD, rec, &ignored);
  if (j == NULL)
    {
      esbx_error_free (&ignored);
      /* Being claimed: the record is written after the claim, the mount
         after the record.  A claim without either for long is stale, but
         the claimant holds the lock while it writes both.  */
      return false;
    }
  return json_get_int (j, "slot", &slot) && slot == n && esbx_is_mountpoint (merged);
}

/* Which of the first SLOTS slots have a claim file, from one read of the
   run directory DFD: TAKEN[N].  A directory that cannot be read is an
   error, not a directory without claims.  */
static int
claimed_slots (int dfd, unsigned slots, bool *taken, esbx_error_t *err)
{
  _cleanup_strv_ char **names = NULL;

  names = esbx_list_dir_at (dfd, ".", err);
  if (names == NULL)
    return esbx_error_wrap (err, "user namespace id ranges (`%s`)", run_dir ());
  for (char **p = names; *p; p++)
    {
      long n = slot_of_name (*p);

      if (n >= 0 && (unsigned long)n < slots)
        taken[n] = true;
    }
  return 0;
}

/* Make slot N SESSION's: its claim file, then the session's record.  */
static int
take_slot (esbx_store_t *store, const char *session, int dfd, unsigned n, const char *claim,
           struct esbx_userns *out, esbx_error_t *err)
{
  char name[16];

  snprintf (name, sizeof name, "%u", n);
  if (esbx_replace_file_at (dfd, name, claim, strlen (claim), 0644, err) < 0)
    return -1;
  out->known = true;
  out->on = true;
  out->slot = (int)n;
  out->uid = ESBX_USERNS_FIRST + n * ESBX_USERNS_COUNT;
  out->count = ESBX_USERNS_COUNT;
  if (write_record (store, session, out, err) < 0)
    {
      unlinkat (dfd, name, 0);
      return -1;
    }
  return 0;
}

/* Under the run directory's lock: the slot SESSION claimed before (a
   mount that failed half-way, tried again), else the lowest slot without
   a claim (one read of the directory, whatever the number of sessions),
   else, every slot being claimed, the lowest whose claim is stale (each
   claim checked: its session and record read, its view looked at).  */
int
esbx_userns_claim (esbx_store_t *store, const char *session, struct esbx_userns *out,
                   esbx_error_t *err)
{
  _cleanup_close_ int dfd = -1, lock = -1;
  _cleanup_free_ char *claim = NULL;
  _cleanup_free_ bool *taken = NULL;
  unsigned n, slots = max_slots ();
  struct esbx_userns before;
  esbx_error_t ignored = NULL;

  memset (out, 0, sizeof *out);
  out->slot = -1;
  dfd = open_run_dir (err);
  if (dfd < 0)
    return -1;
  lock = esbx_lock_at (dfd, ".lock", true, true, err);
  if (lock < 0)
    return -1;
  claim = claim_text (store, session);
  if (esbx_userns_load (store, session, &before, &ignored) == 0 && before.on && before.slot >= 0
      && (unsigned)before.slot < slots)
    {
      unsigned mine = (unsigned)before.slot;
      _cleanup_free_ char *old = NULL;
      char name[16];
      size_t len;

      snprintf (name, sizeof name, "%u", mine);
      if (esbx_read_file_at (dfd, name, 8192, &old, &len, &ignored) == 0
          && strcmp (old, claim) == 0)
        {
          esbx_userns_clear (&before);
          return take_slot (store, session, dfd, mine, claim, out, err);
        }
    }
  esbx_error_free (&ignored);
  esbx_userns_clear (&before);
  taken = xmalloc0 (slots * sizeof *taken);
  if (claimed_slots (dfd, slots, taken, err) < 0)
    return -1;
  for (n = 0; n < slots; n++)
    if (!taken[n])
      return take_slot (store, session, dfd, n, claim, out, err);
  for (n = 0; n < slots; n++)
    {
      char name[16];
      _cleanup_free_ char *old = NULL;
      size_t len;
      esbx_error_t rerr = NULL;

      snprintf (name, sizeof name, "%u", n);
      if (esbx_read_file_at (dfd, name, 8192, &old, &len, &rerr) < 0)
        {
          esbx_error_free (&rerr);
          continue;
        }
      if (strcmp (old, claim) == 0 || !claim_alive ((int)n, old))
        return take_slot (store, session, dfd, n, claim, out, err);
    }
  return esbx_make_error_kind (err, ESBX_ERR_BUSY, 0,
                               "session `%s`: all %u user namespace id ranges of this host are in "
                               "use (" USERNS_RUN_DIR ")",
                               session, slots);
}

void
esbx_userns_release (esbx_store_t *store, const char *session)
{
  struct esbx_userns u;
  _cleanup_close_ int dfd = -1, lock = -1, sdfd = -1;
  _cleanup_free_ char *claim = NULL, *old = NULL;
  esbx_error_t ignored = NULL;
  char name[16];
  size_t len;

  if (esbx_userns_load (store, session, &u, &ignored) < 0)
    {
      esbx_error_free (&ignored);
      return;
    }
  if (u.known && (sdfd = esbx_session_open_dir (store, session, &ignored)) >= 0)
    unlinkat (sdfd, USERNS_JSON, 0);
  esbx_error_free (&ignored);
  if (!u.on || u.slot < 0 || (dfd = open_run_dir (&ignored)) < 0
      || (lock = esbx_lock_at (dfd, ".lock", true, true, &ignored)) < 0)
    {
      esbx_error_free (&ignored);
      esbx_userns_clear (&u);
      return;
    }
  snprintf (name, sizeof name, "%d", u.slot);
  claim = claim_text (store, session);
  /* Only our own claim: another session may have taken a slot we lost.  */
  if (esbx_read_file_at (dfd, name, 8192, &old, &len, &ignored) == 0 && strcmp (old, claim) == 0)
    unlinkat (dfd, name, 0);
  esbx_error_free (&ignored);
  esbx_userns_clear (&u);
}

void
esbx_userns_gc (esbx_store_t *store, FILE *report)
{
  _cleanup_close_ int dfd = -1, lock = -1;
  _cleanup_strv_ char **names = NULL;
  esbx_error_t ignored = NULL;

  /* Under the lock, as claims are made: a claim in flight has its
     session's record already (made before the view is mounted).  */
  if ((dfd = open_run_dir (&ignored)) < 0
      || (lock = esbx_lock_at (dfd, ".lock", true, true, &ignored)) < 0
      || (names = esbx_list_dir_at (dfd, ".", &ignored)) == NULL)
    {
      esbx_error_free (&ignored);
      return;
    }
  for (char **p = names; *p; p++)
    {
      _cleanup_free_ char *claim = NULL;
      char *root, *session;
      size_t len;

      if (slot_of_name (*p) < 0 || esbx_read_file_at (dfd, *p, 8192, &claim, &len, &ignored) < 0)
        {
          esbx_error_free (&ignored);
          continue;
        }
      if (!claim_split (claim, &root, &session) || strcmp (root, store->root) != 0
          || esbx_session_exists (store, session))
        continue;
      if (unlinkat (dfd, *p, 0) == 0 && report)
        fprintf (report, "freed user namespace range %s of session `%s` (gone)\n", *p, session);
    }
}

int
esbx_userns_open (uint32_t uid, uint32_t count, esbx_error_t *err)
{
  char path[64], map[64];
  int fd = -1, saved = 0;
  const char *what = NULL;
  pid_t pid;
  size_t i;

  /* A namespace to open, then nothing: ended once it is opened, or when
     this process dies first (killed as it starts a holder, say).  */
  pid = esbx_nskeeper_start (CLONE_NEWUSER, err);
  if (pid < 0)
    return esbx_error_wrap (err, "user namespace of ids %" PRIu32 "-%" PRIu32, uid,
                            uid + count - 1);
  snprintf (map, sizeof map, "0 %" PRIu32 " %" PRIu32 "\n", uid, count);
  for (i = 0; what == NULL && i < 2; i++)
    {
      _cleanup_close_ int m = -1;

      snprintf (path, sizeof path, "/proc/%d/%s", (int)pid, i == 0 ? "uid_map" : "gid_map");
      m = TEMP_FAILURE_RETRY (open (path, O_WRONLY | O_CLOEXEC));
      if (m < 0 || esbx_write_all (m, map, strlen (map)) < 0)
        {
          saved = errno;
          what = i == 0 ? "write its uid_map" : "write its gid_map";
        }
    }
  if (what == NULL)
    {
      snprintf (path, sizeof path, "/proc/%d/ns/user", (int)pid);
      fd = TEMP_FAILURE_RETRY (open (path, O_RDONLY | O_CLOEXEC));
      if (fd < 0)
        {
          saved = errno;
          what = "open it";
        }
    }
  esbx_nskeeper_stop (pid);
  if (what)
    return esbx_make_error (err, saved, "user namespace of ids %" PRIu32 "-%" PRIu32 ": %s", uid,
                            uid + count - 1, what);
  return fd;
}

json_t *
esbx_userns_json (esbx_store_t *store, const struct esbx_session *s)
{
  const char *want = json_get_string (s->record, "userns");
  json_t *o = json_new (JSON_OBJECT);
  struct esbx_userns u;
  esbx_error_t ignored = NULL;

  json_set_string (o, "requested", want ? want : "off");
  if (esbx_userns_load (store, s->name, &u, &ignored) < 0 || !u.known)
    {
      esbx_error_free (&ignored);
      json_set (o, "mode", json_new (JSON_NULL));
      return o;
    }
  json_set_string (o, "mode", u.on ? "userns" : "off");
  if (u.on)
    {
      json_set_int (o, "uid", u.uid);
      json_set_int (o, "count", u.count);
    }
  if (u.reason)
    json_set_string (o, "reason", u.reason);
  esbx_userns_clear (&u);
  return o;
}

/* The effective capabilities back to the permitted ones: a change of
   fsuid away from 0 drops the filesystem ones.  */
static void
raise_caps (void)
{
  struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
  struct __user_cap_data_struct data[2];

  if (syscall (SYS_capget, &hdr, data) < 0)
    return;
  data[0].effective = data[0].permitted;
  data[1].effective = data[1].permitted;
  syscall (SYS_capset, &hdr, data);
}

void
esbx_userns_fs_ids (uint32_t id)
{
  setfsgid (id);
  setfsuid (id);
  raise_caps ();
}

bool
esbx_userns_fs_enter (esbx_store_t *store, const char *session)
{
  struct esbx_userns u;
  esbx_error_t ignored = NULL;
  bool on;

  if (esbx_userns_load (store, session, &u, &ignored) < 0)
    {
      esbx_error_free (&ignored);
      return false;
    }
  on = u.on;
  if (on)
    esbx_userns_fs_ids (u.uid);
  esbx_userns_clear (&u);
  return on;
}

void
esbx_userns_fs_leave (void)
{
  esbx_userns_fs_ids (0);
}
