/* liblayerstore: the public interface of the LayerStack.
 *
 * A store (default /var/lib/esbx) holds projects and sessions:
 *
 *   ROOT/projects/P/stack        layer ids bottom to top, one per line
 *   ROOT/projects/P/layers/ID/   diff/ (overlayfs format) + record.json
 *   ROOT/projects/P/lock         flock: serialises check-and-append
 *   ROOT/projects/P/tmp/         layers being written (gc removes leftovers)
 *   ROOT/sessions/S/             session.json, upper/, work/, merged/, lock,
 *                                and the shim's holder and event files
 *   ROOT/tmp/                    sessions and projects being created
 *   ROOT/trash/ENTRY/            a discarded session's unpublished work
 *                                (trash.c), ROOT/trash/ttl its keeping time
 *   ROOT/counters.json           publishes and conflicts since the store began
 *
 * Every function returns < 0 (or NULL) on failure and fills *err; the CLI
 * maps err->kind to its exit status (3 for conflicts).  */
#ifndef ESBX_LAYERSTORE_H
#define ESBX_LAYERSTORE_H

#include "error.h"
#include "json.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define ESBX_DEFAULT_ROOT "/var/lib/esbx"

/* A session's resources where neither its options nor the store's
   ROOT/defaults.conf say (session_defaults.c).  */
#define ESBX_DEFAULTS_CONF      "defaults.conf"
#define ESBX_DEFAULT_MEMORY     (4ull << 30)
#define ESBX_DEFAULT_PIDS       4096ull
#define ESBX_DEFAULT_TMPFS_SIZE (1ull << 30)
#define ESBX_DEFAULT_SHM_SIZE   (64ull << 20)
/* overlayfs stacks at most this many lower layers.  */
#define ESBX_MAX_LAYERS 500
/* Largest layer record read back: an import of ESBX_IMPORT_MAX_ENTRIES
   (1,048,576) entries writes about 200 MiB.  */
#define ESBX_MAX_RECORD (512u * 1024 * 1024)

typedef struct esbx_store
{
  char *root;
  int rootfd;
  bool detach_removals; /* esbx_store_detach_removals */
} esbx_store_t;

/* The store's layout (layout.c): where a project, a layer and a session
   keep their parts, relative to the root: "projects/P", "projects/P/FILE",
   "projects/P/layers/ID[/FILE]", "sessions/S[/FILE]", the merge queue's
   "projects/P/queue[/ID/FILE]"; esbx_store_abs makes one absolute.  */
char *esbx_project_rel (const char *project);
char *esbx_project_file (const char *project, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));
char *esbx_layer_rel (const char *project, const char *id);
/* "projects/PROJECT/frozen/ID": a private, read-only layer of a session's
   writes up to a snapshot (frozen.c).  */
char *esbx_frozen_rel (const char *project, const char *id);
char *esbx_layer_file (const char *project, const char *id, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));
char *esbx_session_rel (const char *name);
char *esbx_session_file (const char *name, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));
char *esbx_store_abs (esbx_store_t *store, const char *rel);
/* The merge queue of a project: "projects/P/queue", and a request's files
   "projects/P/queue/ID/FILE".  */
char *esbx_queue_rel (const char *project);
char *esbx_request_file (const char *project, const char *id, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

/* Open (creating if needed) the store at ROOT; NULL means $ESBX_ROOT or the
   default.  */
int esbx_store_open (const char *root, esbx_store_t **out, esbx_error_t *err);
void esbx_store_close (esbx_store_t *store);
/* From now on a discard of STORE returns once the session is gone from
   sessions/, and a process of its own removes its files (what the CLI
   does: a large session is not waited for).  For a caller that runs no
   other thread when it discards; otherwise the removal stays in place.  */
void esbx_store_detach_removals (esbx_store_t *store);
static inline void
cleanup_storep (esbx_store_t **s)
{
  esbx_store_close (*s);
}
#define _cleanup_store_ __attribute__ ((cleanup (cleanup_storep)))

/* ---- change sets ------------------------------------------------------ */

enum esbx_change_kind
{
  ESBX_ADDED,
  ESBX_MODIFIED,
  ESBX_DELETED,
};

enum esbx_file_type
{
  ESBX_TYPE_NONE = 0,
  ESBX_TYPE_FILE,
  ESBX_TYPE_DIR,
  ESBX_TYPE_SYMLINK,
  ESBX_TYPE_FIFO,
};

struct esbx_change
{
  char *path; /* absolute within the tree: "/src/main.c" */
  enum esbx_change_kind kind;
  enum esbx_file_type type; /* for deletions: the type that was deleted */
  mode_t mode;              /* permission bits (07777) */
  int64_t size;
  char sha256[65]; /* regular files; "" otherwise */
  char *target;    /* symlinks */
  bool opaque;     /* a directory whose old contents were all removed */
  bool stripped;   /* setuid/setgid bits were removed */
  /* Regular files: the first path of the change set (in path order) that
     is the same file, a hard link made in the session; NULL for that first
     name and for files with one name.  Record field "link".  */
  char *link;
};

struct esbx_changeset
{
  struct esbx_change *v;
  size_t n;
  size_t cap;
};

void esbx_changeset_free (struct esbx_changeset *cs);
const char *esbx_change_kind_name (enum esbx_change_kind k);
const char *esbx_file_type_name (enum esbx_file_type t);
/* The type of a file of mode M: ESBX_TYPE_NONE for one the store does not
   keep (a socket, a device).  */
enum esbx_file_type esbx_file_type_of (mode_t m);
/* Its name in a listing (file, dir, symlink, fifo), "other" for one the
   store does not keep.  */
const char *esbx_file_mode_name (mode_t m);
int esbx_file_type_parse (const char *s, enum esbx_file_type *t);
json_t *esbx_change_to_json (const struct esbx_change *c);
int esbx_change_from_json (const json_t *j, struct esbx_change *c, esbx_error_t *err);

/* ---- layers and projects ---------------------------------------------- */

struct esbx_layer
{
  char *id;
  char *parent; /* NULL for layer 0 */
  int64_t index;
  char *created;
  char *session;  /* NULL for imported layers */
  json_t *labels; /* object, may be empty */
  char *message;
  struct esbx_changeset changes; /* sorted by path */
  char *git_commit;              /* a git project's layer: its commit (not part of the id,
                                    which the commit's trailer names) */
  json_t *gate;                  /* a layer the merge queue landed: {"request", "approvals",
                                    "checks"}, or NULL */
};

/* What L holds, freed (L itself: esbx_layer_free), and L zeroed.  */
void esbx_layer_clear (struct esbx_layer *l);
void esbx_layer_free (struct esbx_layer *l);
int esbx_layer_load (esbx_store_t *store, const char *project, const char *id,
                     struct esbx_layer **out, esbx_error_t *err);
/* Layer ids of PROJECT, bottom to top.  */
int esbx_project_stack (esbx_store_t *store, const char *project, char ***ids, size_t *n,
                        esbx_error_t *err);
/* Block until PROJECT's head is another layer than AFTER (a reference;
   NULL: the head when called) and give its id in *HEAD; TIMEOUT_MS > 0
   bounds the wait (then ESBX_ERR_BUSY) (head_wait.c).  */
int esbx_project_wait (esbx_store_t *store, const char *project, const char *after,
                       int64_t timeout_ms, char **head, esbx_error_t *err);
/* Write what PATH is at layer REF (NULL or "head": the head) of PROJECT to
   OUTFD: a file's content, a symlink's target, a directory's names one a
   line (a directory's with a `/`) (show.c).  */
int esbx_show (esbx_store_t *store, const char *project, const char *ref, const char *path,
               int outfd, esbx_error_t *err);
/* Resolve a layer reference: an id, a unique id prefix, or "head".  */
int esbx_layer_resolve (esbx_store_t *store, const char *project, const char *ref, char **id,
                        esbx_error_t *err);
/* Absolute path of a layer's diff directory.  */
char *esbx_layer_diff_path (esbx_store_t *store, const char *project, const char *id);

/* FROM: NULL (empty project), a directory, a tarball (tar, tar.gz, tar.zst,
   zip) or a `docker save` archive.  */
/* A project whose first layer is commit REF (NULL: HEAD) of the git
   repository REPO (a path, or a URL libgit2 can fetch): its tree, read from
   the object database, and a repository every session gets (README, "Git
   projects").  */
int esbx_project_create_git (esbx_store_t *store, const char *name, const char *repo,
                             const char *ref, esbx_error_t *err);
/* Was PROJECT made from a git repository (ROOT/projects/P/git.json)?  */
bool esbx_project_is_git (esbx_store_t *store, const char *project);
/* ROOT/projects/P/git: a bare repository plain git reads (its objects are
   the layers', refs/heads/esbx/head the head's commit).  */
char *esbx_project_git_dir (esbx_store_t *store, const char *project);
/* A git project and another repository (layerstore/git/git_push.c,
   git_pull.c; README, "Git projects").  */
struct esbx_git_sync_opts
{
  const char *remote; /* a path or a URL; pull-git: NULL for the source of git.json */
  const char *branch; /* push-git: refs/heads/BRANCH (NULL: "esbx") */
  const char *ref;    /* pull-git: the remote's ref (NULL: git.json's, else HEAD) */
  const char *secret; /* a secret: "USER:PASSWORD" or a token, for http(s) */
  bool urls_only;     /* refuse local paths and file:// (the gateway) */
};
/* Push the head's commit to REMOTE's refs/heads/BRANCH, which must be an
   ancestor of it (a fast-forward; else ESBX_ERR_CONFLICT naming both
   commits); remembered in git.json ("pushed").  The view:
   {"remote", "ref", "commit", "layer", "previous" (or null), "layers" (how
   many the remote did not have), "pushed"}.  */
json_t *esbx_project_push_git (esbx_store_t *store, const char *project,
                               const struct esbx_git_sync_opts *o, esbx_error_t *err);
/* Land the new first-parent commits of REF of REMOTE as layers, one each,
   when REF descends from the head's commit (else ESBX_ERR_CONFLICT).  The
   view: {"remote", "ref", "commit", "previous", "layers": [{"id",
   "commit"}] (empty: up to date)}.  */
json_t *esbx_project_pull_git (esbx_store_t *store, const char *project,
                               const struct esbx_git_sync_opts *o, esbx_error_t *err);
int esbx_project_create (esbx_store_t *store, const char *name, const char *from,
                         esbx_error_t *err);
bool esbx_project_exists (esbx_store_t *store, const char *name);
/* NAME is a valid name (usage error) of a project of STORE (not found).  */
int esbx_project_check (esbx_store_t *store, const char *name, esbx_error_t *err);
char **esbx_project_list (esbx_store_t *store, esbx_error_t *err);
int esbx_project_rm (esbx_store_t *store, const char *name, esbx_error_t *err);
/* Flatten the stack into one layer; refused while sessions of it exist.  */
int esbx_project_squash (esbx_store_t *store, const char *name, char **new_id, esbx_error_t *err);
/* The layer that first produced PATH's current state: of the newest
   layers whose records leave PATH in that same state (content and mode,
   symlink target, or absence), the lowest (blame.c says exactly).  */
int esbx_blame (esbx_store_t *store, const char *project, const char *path, struct esbx_layer **out,
                esbx_error_t *err);

/* ---- user namespaces (userns.c) ----------------------------------------- */

/* Slot N of the host's ranges: ids ESBX_USERNS_FIRST + N * COUNT, COUNT of
   them; root of the session is the first.  */
#define ESBX_USERNS_FIRST     1073741824u
#define ESBX_USERNS_COUNT     65536u
#define ESBX_USERNS_MAX_SLOTS 16384u

/* ROOT/sessions/S/userns.json: the mode its mounted view runs in.  */
struct esbx_userns
{
  bool known; /* a record exists: the view was mounted by a version that writes it */
  bool on;    /* uid..uid+count-1 of the host are ids 0.. of the session */
  uint32_t uid, count;
  int slot;
  char *reason; /* why not, when a session that asked for one runs without */
};
/* OUT zeroed (not known) when there is no record.  */
int esbx_userns_load (esbx_store_t *store, const char *session, struct esbx_userns *out,
                      esbx_error_t *err);
void esbx_userns_clear (struct esbx_userns *u);
/* Claim a free range for SESSION and record it.  */
int esbx_userns_claim (esbx_store_t *store, const char *session, struct esbx_userns *out,
                       esbx_error_t *err);
/* Record that SESSION runs without one, and why (NULL: it asked so).  */
int esbx_userns_record_off (esbx_store_t *store, const char *session, const char *reason,
                            esbx_error_t *err);
/* Drop SESSION's record and its claim, once its view is unmounted.  */
void esbx_userns_release (esbx_store_t *store, const char *session);
/* Drop the claims of STORE's sessions that no longer exist (a start
   killed between claim and record), saying so on REPORT.  */
void esbx_userns_gc (esbx_store_t *store, FILE *report);
/* Act on SESSION's merged view as its root: this thread's fsuid and fsgid
   become its root's host id, with the capabilities kept, so that what it
   creates is owned by the session's root (host root has no id there).
   True when it switched; esbx_userns_fs_leave goes back to 0 (a no-op
   when nothing switched).  */
bool esbx_userns_fs_enter (esbx_store_t *store, const char *session);
void esbx_userns_fs_leave (void);
/* This thread's fsuid and fsgid ID, capabilities kept.  */
void esbx_userns_fs_ids (uint32_t id);
/* A new user namespace mapping ids 0..COUNT-1 to UID..: an fd of it.  */
int esbx_userns_open (uint32_t uid, uint32_t count, esbx_error_t *err);
/* Layers seen through idmapped mounts (mount_idmap.c), for a session's
   view and for a container that joins a session (shim/runtime/): each
   through an idmapped mount of USERNS_FD, an overlay created as UID.  */
struct esbx_idmap
{
  int userns_fd;
  uint32_t uid;
};
/* An overlay at TARGET from LOWERS (absolute paths, bottom to top) and
   UPPER and WORK (NULL: read-only; both in one directory), every layer
   idmapped; -2 (ERR set) when a layer's filesystem or the kernel cannot
   idmap them.  */
int esbx_mount_overlay_idmapped (char *const *lowers, size_t n, const char *upper, const char *work,
                                 const char *target, const struct esbx_idmap *map,
                                 esbx_error_t *err);
/* A bind mount of DIR at TARGET, idmapped through USERNS_FD; -2 (ERR set)
   when its filesystem cannot be idmapped (an overlay never can).  */
int esbx_mount_idmapped_bind (const char *dir, const char *target, int userns_fd,
                              esbx_error_t *err);

/* ---- sessions --------------------------------------------------------- */

struct esbx_session_opts
{
  const char *name;         /* NULL: generated "<project>-<hex>" */
  const char *base;         /* layer reference; NULL: head */
  char **labels;            /* NULL-terminated "K=V" */
  const char *network;      /* "none" (default), "host" or "egress" */
  const char *workspace;    /* path inside the holder; default "/workspace" */
  uint64_t memory;          /* bytes, 0 = the store's default (session_defaults.c) */
  uint64_t pids;            /* 0 = the store's default */
  uint64_t tmpfs_size;      /* bytes of each of /tmp, /run, /home, /root; 0 = the default */
  uint64_t shm_size;        /* bytes of /dev/shm, 0 = the default */
  const char *cpus;         /* e.g. "1.5", NULL = unlimited */
  const char *rootfs;       /* DIR, tar or `docker save` archive; NULL: the host's */
  char **env;               /* NULL-terminated "K=V", later ones win (esbx_session_env_parse) */
  const char *snapshot;     /* start from this snapshot of PROJECT (on its base) */
  int64_t ttl;              /* seconds the session may live, 0: the project's default */
  int64_t idle_ttl;         /* seconds it may stay unused, 0: the project's default */
  const char *on_expiry;    /* "discard" (default) or "snapshot" */
  char **allow;             /* NULL-terminated egress allow-list (network "egress" only) */
  char **secrets;           /* NULL-terminated "NAME[,env=VAR][,file=/run/secrets/F]" */
  const char *token;        /* the gateway token that makes it (its caps count it), or NULL */
  const char *pending_base; /* the merge queue's own sessions: a candidate layer (not in the
                               stack yet) as the base; BASE and SNAPSHOT unset */
  int64_t disk;             /* bytes of a disk of its own; 0: the defaults', ESBX_DISK_NONE: none */
  const char *userns;       /* "auto" (a user namespace where the store can idmap) or "off";
                               NULL: the store's default (session_defaults.c) */
  const char *isolation;    /* "namespaces" or "gvisor" (the holder is a runsc sandbox);
                               NULL: the store's default */
  int64_t push_every;       /* seconds between its automatic pushed snapshots (esbxd), 0: the
                               project's (esbx_snapshot_policy) */
};

struct esbx_session
{
  char *id; /* random, made with the session: what gateway tokens are bound to */
  char *name;
  char *project;
  char *base;       /* layer id the session started from */
  char **published; /* ids of layers published from this session, in order */
  char *network;
  char *workspace;
  char *created;
  json_t *labels;      /* object */
  uint64_t memory;     /* 0: unlimited */
  uint64_t pids;       /* 0: unlimited */
  uint64_t tmpfs_size; /* 0: a record older than sizes, ESBX_DEFAULT_TMPFS_SIZE */
  uint64_t shm_size;   /* 0: likewise, ESBX_DEFAULT_SHM_SIZE */
  char *cpus;
  char *rootfs;   /* key of its image root (image_root.c), NULL: the host's */
  json_t *env;    /* object of strings, may be empty: what its commands start with */
  char *snapshot; /* the snapshot it was made from (a lower layer over its base) */
  char **frozen;  /* ids of the frozen layers over its base, bottom first
                     (frozen.c), NULL-terminated; NULL: none */
  int64_t disk;   /* bytes of its own disk (session_disk.c), 0: none */
  json_t *record; /* the whole session.json */
  char *view;     /* a scan's merged view of snapshot and upper (snapshot.c),
                     removed by esbx_session_free */
  int view_lock;
};

/* One entry of an egress allow-list (egress_policy.c):
   [METHODS] HOST[:PORT][/PATH] [METHODS] [/PATH], HOST one of NAME,
   *.DOMAIN, ADDRESS or CIDR, IPv4; METHODS upper-case and comma-separated
   (GET,POST), PATH a path that ends in `*` for a prefix.  A name is kept
   lower-case with its "*." (subdomains only); an address is a network
   ADDR/PREFIX in host byte order.  PORT 0: every port.  An entry with
   methods or a path is an HTTP rule: the egress proxy decides it, never
   the kernel.  */
#define ESBX_EGRESS_METHODS_MAX 8
struct esbx_egress_rule
{
  char *name; /* NULL for an address or CIDR */
  uint32_t addr;
  unsigned prefix;
  unsigned port;
  char *methods[ESBX_EGRESS_METHODS_MAX + 1]; /* NULL-terminated; none: every method */
  char *path;                                 /* NULL: every path */
};
int esbx_egress_rule_parse (const char *spec, struct esbx_egress_rule *out, esbx_error_t *err);
void esbx_egress_rule_clear (struct esbx_egress_rule *r);
/* FN (R, TEXT, DATA) for each entry of the JSON array ALLOW that is a rule
   (TEXT: the entry as given), in order, until FN returns true: whether it
   did.  An entry that does not parse is passed over: it was refused when
   the list was set, and a record edited by hand loses only that entry.  */
bool esbx_egress_rules_any (const json_t *allow,
                            bool (*fn) (const struct esbx_egress_rule *r, const char *text,
                                        void *data),
                            void *data);
/* ALLOW (NULL-terminated, may be NULL) checked, as a JSON array of the
   entries as given; the first bad one is an error (ESBX_ERR_USAGE).  */
int esbx_egress_allow_parse (char *const *allow, json_t **out, esbx_error_t *err);
/* What the egress policy ALLOW (a session record's "allow") says of a
   request to HOST (a name or an IPv4 literal) on PORT: METHOD and PATH
   (without its query) of an HTTP request, both NULL for a connection
   whose requests are not seen.  "allowed": some entry matches; "inspect":
   entries match the host and port but only for some methods or paths, so
   a connection must be opened (TLS intercepted) to decide each request;
   "rule": the entry that decided, as given; "reason" when refused.  */
struct esbx_egress_verdict
{
  bool allowed;
  bool inspect;
  const char *rule;
  const char *reason;
};
void esbx_egress_decide (const json_t *allow, const char *host, unsigned port, const char *method,
                         const char *path, struct esbx_egress_verdict *v);
/* Whether NAME is a name some entry of ALLOW allows (any port, method or
   path): what the resolver answers.  */
bool esbx_egress_name_allowed (const json_t *allow, const char *name);
/* Whether the IPv4 address ADDR (host byte order) is covered by an address
   or CIDR entry of ALLOW (a name's answer in a private range needs one).  */
bool esbx_egress_addr_listed (const json_t *allow, uint32_t addr);

int esbx_session_create (esbx_store_t *store, const char *project,
                         const struct esbx_session_opts *opts, char **name, esbx_error_t *err);
/* The environment of a session (session_env.c).  KEY matches
   [A-Za-z_][A-Za-z0-9_]*, VALUE is UTF-8 without a newline, and all of
   them (KEY=VALUE and a NUL each) fit in ESBX_SESSION_ENV_MAX bytes; an
   error (kind ESBX_ERR_USAGE) names the key.  */
#define ESBX_SESSION_ENV_MAX (64u * 1024)
int esbx_session_env_check (const char *key, const char *value, esbx_error_t *err);
/* ENV ("K=V" strings, NULL-terminated, may be NULL) as an object, later
   ones winning.  */
int esbx_session_env_parse (char *const *env, json_t **out, esbx_error_t *err);
/* The valid string members of ENV (any JSON, may be NULL), as a new object.  */
json_t *esbx_session_env_copy (const json_t *env);

int esbx_session_load (esbx_store_t *store, const char *name, struct esbx_session **out,
                       esbx_error_t *err);
/* The same, read from the session's directory DFD (esbx_session_open_dir).  */
int esbx_session_load_at (int dfd, const char *name, struct esbx_session **out, esbx_error_t *err);
void esbx_session_free (struct esbx_session *s);
bool esbx_session_exists (esbx_store_t *store, const char *name);
/* Walking the sessions (of PROJECT when not NULL), in name order, each
   loaded once; one discarded or unreadable meanwhile is skipped:
     struct esbx_sessions it; struct esbx_session *s;
     if (esbx_sessions_open (store, NULL, &it, err) < 0) ...
     while ((s = esbx_sessions_next (&it))) ... S is valid until the next call
     esbx_sessions_close (&it);  */
struct esbx_sessions
{
  esbx_store_t *store;
  char *project;
  char **names;
  size_t i;
  struct esbx_session *cur;
  size_t unreadable; /* listed, there, and not loaded */
};
int esbx_sessions_open (esbx_store_t *store, const char *project, struct esbx_sessions *it,
                        esbx_error_t *err);
struct esbx_session *esbx_sessions_next (struct esbx_sessions *it);
void esbx_sessions_close (struct esbx_sessions *it);
static inline void
cleanup_sessionsp (struct esbx_sessions *it)
{
  esbx_sessions_close (it);
}
#define _cleanup_sessions_ __attribute__ ((cleanup (cleanup_sessionsp)))
/* Sessions (of PROJECT when not NULL), sorted.  */
char **esbx_session_list (esbx_store_t *store, const char *project, esbx_error_t *err);
/* ROOT/sessions/NAME and its merged/ and upper/ directories.  */
char *esbx_session_dir (esbx_store_t *store, const char *name);
char *esbx_session_merged (esbx_store_t *store, const char *name);
char *esbx_session_upper (esbx_store_t *store, const char *name);
/* Open ROOT/sessions/NAME as a directory fd; a bad name or a session that
   does not exist is an error that says so.  */
int esbx_session_open_dir (esbx_store_t *store, const char *name, esbx_error_t *err);
/* Mount the merged view if it is not mounted (idempotent).  */
int esbx_session_mount (esbx_store_t *store, const char *name, esbx_error_t *err);
/* The same for a session whose record is loaded.  */
int esbx_session_mount_record (esbx_store_t *store, const struct esbx_session *s,
                               esbx_error_t *err);
bool esbx_session_is_mounted (esbx_store_t *store, const char *name);
int esbx_session_unmount (esbx_store_t *store, const char *name, esbx_error_t *err);

/* A session's own disk (session_disk.c, disk_defaults.c): its upper on a
   filesystem of that size.  SIZE is "512M", "10G" (ESBX_DISK_MIN to
   ESBX_DISK_MAX) or "none"/"0" (ESBX_DISK_NONE); anything else is a usage
   error naming it.  */
#define ESBX_DISK_NONE (-1)
#define ESBX_DISK_MIN  (8ull << 20)
#define ESBX_DISK_MAX  (16384ull << 30)
int esbx_disk_size_parse (const char *text, int64_t *bytes, esbx_error_t *err);
/* "20M", "10G", "none" (BYTES <= 0).  */
char *esbx_disk_size_string (int64_t bytes);
/* The disk a new session of PROJECT gets when it names none: the
   project's default, else the store's (0: none; ESBX_DISK_NONE: the
   project says none).  */
int esbx_disk_default (esbx_store_t *store, const char *project, int64_t *bytes, esbx_error_t *err);
/* The store's default: `disk = SIZE` in ROOT/defaults.conf.  */
int esbx_store_disk_default (esbx_store_t *store, int64_t *bytes, esbx_error_t *err);
/* PROJECT's default (SIZE "none": none, whatever the store's); clear it;
   {"disk": SIZE|null, "store": SIZE|null}.  */
int esbx_project_disk_set (esbx_store_t *store, const char *project, const char *size,
                           esbx_error_t *err);
int esbx_project_disk_clear (esbx_store_t *store, const char *project, esbx_error_t *err);
json_t *esbx_project_disk_get (esbx_store_t *store, const char *project, esbx_error_t *err);
/* Delete unpublished changes too: no trash.  */
#define ESBX_DISCARD_FORCE 1u
/* With FORCE: a throwaway session (the merge queue's), deleted without
   counting or naming its changes.  */
#define ESBX_DISCARD_SCRATCH 2u
/* Unmount and delete the session's private state.  The holder (shim/) must
   be stopped first: esbx_sandbox_discard does both.  A session with
   unpublished changes (esbx_session_changes not empty, or not countable)
   goes to the trash instead, unless FLAGS has ESBX_DISCARD_FORCE or the
   keeping time is 0; either way a warning on stderr names the number of
   changes.  */
int esbx_session_discard (esbx_store_t *store, const char *name, unsigned int flags,
                          esbx_error_t *err);
/* Take the session's lock (exclusive); returns the fd holding it.  */
int esbx_session_lock (esbx_store_t *store, const char *name, esbx_error_t *err);

/* Flags of a change set (diff, publish).  */
/* Ignore rules do not apply: build outputs and the like count too.  */
#define ESBX_CHANGES_INCLUDE_IGNORED 1u
/* The ignored changes are wanted only to be named: an ignored directory
   is one entry (not entered), an ignored file is not read.  */
#define ESBX_CHANGES_IGNORED_TOP 2u
/* The root's `.git` is no change (a git project's sessions and layers:
   git_repo.c).  */
#define ESBX_CHANGES_NO_GIT 4u

/* The change set of a session against its base (and what it published),
   without the paths its ignore rules exclude (README, "Ignore rules"):
   .gitignore files of its merged view, then the root's .esbxignore.
   Those stay in the session; IGNORED, when not NULL, receives them.  */
int esbx_session_diff (esbx_store_t *store, const char *name, unsigned flags,
                       struct esbx_changeset *out, struct esbx_changeset *ignored,
                       esbx_error_t *err);
/* The same for a session whose record is loaded.  */
int esbx_session_changes_of (esbx_store_t *store, const struct esbx_session *s,
                             struct esbx_changeset *out, esbx_error_t *err);
/* esbx_session_diff without flags or the ignored list.  */
int esbx_session_changes (esbx_store_t *store, const char *name, struct esbx_changeset *out,
                          esbx_error_t *err);

/* Unified diffs of the session's changed text files (diff --patch),
   written to OUT file by file as they are made.  A reader that closed OUT
   fails it with an error whose status is EPIPE.  */
int esbx_session_patch (esbx_store_t *store, const char *name, FILE *out, esbx_error_t *err);

/* What a path both the session and upstream changed is, for rebase.  */
enum esbx_conflict_kind
{
  ESBX_CONFLICT_CONTENT,       /* text files both changed: merged three ways */
  ESBX_CONFLICT_BINARY,        /* files both changed, not text on every side */
  ESBX_CONFLICT_MODIFY_DELETE, /* changed in the session, deleted upstream */
  ESBX_CONFLICT_DELETE_MODIFY, /* deleted in the session, changed upstream */
  ESBX_CONFLICT_TYPE,          /* another type on each side, or a directory
                                  above removed or replaced on one side */
  ESBX_CONFLICT_SYMLINK,       /* a symlink both changed */
  ESBX_CONFLICT_MODE,          /* a mode both changed, each its own way */
  ESBX_CONFLICT_RENAME,        /* changed on one side, renamed on the other */
};
const char *esbx_conflict_kind_name (enum esbx_conflict_kind k);
/* The three versions of a path a rebase could not merge, as git's index
   stages 1, 2 and 3 hold them.  */
enum esbx_side
{
  ESBX_SIDE_BASE,
  ESBX_SIDE_OURS,
  ESBX_SIDE_THEIRS,
};
const char *esbx_side_name (enum esbx_side side);

struct esbx_conflict
{
  char *path;
  char *layer;   /* upstream layer that touched the path */
  char *session; /* and the session it came from (may be NULL) */
  enum esbx_conflict_kind kind;
  /* Publish: rebase cannot merge this path by itself.  Rebase: it did not
     (markers, or a kind it cannot merge): a person or an agent must look.  */
  bool blocking;
  bool markers;  /* rebase: merged with conflict markers left in the session's file */
  char *renamed; /* a rename followed: the path the change went to (rebase) or
                    the rename that would be followed (publish) */
};

struct esbx_publish_result
{
  char *layer; /* new layer id; NULL when nothing changed or on conflict;
                  rebase: the session's base afterwards, also on failure */
  struct esbx_conflict *conflicts;
  size_t n_conflicts;
  size_t n_changes;
  bool published;       /* the publish took place (a layer, or nothing to publish) */
  char **merged;        /* rebase: paths merged cleanly (NULL-terminated) */
  json_t *unmerged;     /* paths a rebase left for a person, not yet resolved
                           (unmerged.c's entries), or NULL */
  size_t n_ignored;     /* publish: changes the ignore rules left out */
  char **ignored_first; /* the first of them (NULL-terminated), or NULL */
};
void esbx_publish_result_free (struct esbx_publish_result *r);

/* Publish, in steps, so that the one who knows where the project's head
   is chooses where the layer goes (shim/lib/sandbox.c: here, or through
   the store's remote):
     esbx_publish_open     the session's lock and record;
     esbx_publish_prepare  its change set (FLAGS: ESBX_CHANGES_INCLUDE_IGNORED)
                           checked (unmerged paths refused, ESBX_ERR_UNMERGED;
                           a changed file holding the value of one of the
                           session's secrets not in ALLOW refused,
                           ESBX_ERR_FORBIDDEN) and staged as a layer;
     esbx_publish_commit   the conflict gate against the local head
                           (ESBX_ERR_CONFLICT, R's conflicts), the layer
                           installed and the head moved (a git project's
                           layer is a commit too); or
     esbx_remote_publish   the same against the head in etcd;
     esbx_publish_end      the layer remembered in the session's record.
   A session with no changes publishes nothing (esbx_publish_is_empty:
   commit is skipped, R->layer NULL).  Ignored paths never reach the layer
   nor the conflict check: R names them.  */
struct esbx_publish;
int esbx_publish_open (esbx_store_t *store, const char *name, const char *message,
                       struct esbx_publish **out, esbx_error_t *err);
const char *esbx_publish_project (const struct esbx_publish *p);
int esbx_publish_prepare (struct esbx_publish *p, unsigned flags, char *const *allow,
                          struct esbx_publish_result *r, esbx_error_t *err);
bool esbx_publish_is_empty (const struct esbx_publish *p);
int esbx_publish_commit (struct esbx_publish *p, struct esbx_publish_result *r, esbx_error_t *err);
int esbx_publish_end (struct esbx_publish *p, struct esbx_publish_result *r, esbx_error_t *err);
/* Unstages what was not committed and lets the session go.  */
void esbx_publish_free (struct esbx_publish *p);
/* A shared project's publish (remote/remote_publish.c): W, started with
   esbx_remote_warm_start as soon as the project is known, does beside the
   scan what the remote work needs first (loading libcurl and libarchive,
   uploads, the head's manifest).  */
struct esbx_remote_warm;
struct esbx_remote_warm *esbx_remote_warm_start (esbx_store_t *store, const char *project);
void esbx_remote_warm_free (struct esbx_remote_warm *w);
int esbx_remote_publish (struct esbx_publish *p, struct esbx_remote_warm *w,
                         struct esbx_publish_result *r, esbx_error_t *err);
/* Move the session's base to the head (remounting it), merging what both
   sides changed where it can (rebase.c): text three ways, renames followed,
   a directory's mode, a file's mode or content changed on one side only.
   What it cannot merge (overlapping hunks, binary files, a deletion against
   a change, types, modes both changed) stays the session's and becomes an
   unmerged entry with its three versions kept: then < 0 with kind
   ESBX_ERR_UNMERGED, R->unmerged and R->conflicts filled and R->layer the
   new base.  Publish refuses until each is resolved.  */
int esbx_session_rebase (esbx_store_t *store, const char *name, struct esbx_publish_result *r,
                         esbx_error_t *err);
/* Write SIDE of the unmerged PATH of session NAME to OUTFD.  */
int esbx_session_unmerged_show (esbx_store_t *store, const char *name, const char *path,
                                enum esbx_side side, int outfd, esbx_error_t *err);
/* Mark the unmerged PATHS (NULL-terminated) of session NAME resolved, as
   they are now; an unknown path changes nothing.  */
int esbx_session_unmerged_resolve (esbx_store_t *store, const char *name, char *const *paths,
                                   esbx_error_t *err);

/* Rebase onto TARGET instead of the head: a layer of the stack or one the
   merge queue is testing (queue_merge.c), whose parents lead to the stack.  */
int esbx_session_rebase_onto (esbx_store_t *store, const char *name, const char *target,
                              struct esbx_publish_result *r, esbx_error_t *err);

/* ---- the deliberate gate (gate.c, queue*.c; README, "The gate") -------- */

/* A project's publish policy, ROOT/projects/P/gate.json.  auto: a publish
   lands at once (no file: the default).  checks: a publish files a
   request, and the merge queue lands it once CHECKS pass on the merged
   tree.  review: a request waits for APPROVALS approvals.  Both combine:
   checks with approvals, review with checks.  */
struct esbx_gate
{
  char *mode;            /* "auto", "checks", "review" */
  char **checks;         /* shell commands, NULL-terminated, may be empty */
  int64_t check_timeout; /* seconds each check may run */
  unsigned approvals;    /* distinct approvals a request needs */
  unsigned parallel;     /* requests tested at once; 0: the CPUs online */
  char **secrets;        /* secrets the check sessions get (by name) */
};
#define ESBX_GATE_DEFAULT_TIMEOUT 600
#define ESBX_GATE_MAX_CHECKS      16
void esbx_gate_clear (struct esbx_gate *g);
/* PROJECT's policy; auto when it has none.  */
int esbx_gate_load (esbx_store_t *store, const char *project, struct esbx_gate *g,
                    esbx_error_t *err);
/* Check G (usage errors name the option) and write it; mode auto removes
   the file.  Refused for shared and git projects (not done yet).  */
int esbx_gate_set (esbx_store_t *store, const char *project, const struct esbx_gate *g,
                   esbx_error_t *err);
json_t *esbx_gate_json (const struct esbx_gate *g);
bool esbx_gate_is_auto (const struct esbx_gate *g);

/* Requests of the merge queue, ROOT/projects/P/queue/ID/: request.json (the
   record), diff/ (the session's changes as they were filed, an overlay
   tree), check.log.  Ids are store-wide ("r12").  States: review (waiting
   for approvals), queued, testing (a candidate layer built and its checks
   running), passed (waiting for the request ahead of it), and the final
   landed, rejected, cancelled.  */
bool esbx_request_is_final (const json_t *rec);
/* Find request ID: its project in *PROJECT (owned) and its record.  */
json_t *esbx_request_load (esbx_store_t *store, const char *id, char **project, esbx_error_t *err);
/* PROJECT's requests (NULL: every project's), oldest first; ALL: final
   ones too.  */
json_t *esbx_queue_list (esbx_store_t *store, const char *project, bool all, esbx_error_t *err);
/* File the prepared publish P (not empty) as a request of its project,
   filed by BY ("uid:0", "token:ID"); DISCARD: the session ends once it
   lands.  *ID is the request's.  A session with a request not final is
   refused (busy).  */
int esbx_queue_file (struct esbx_publish *p, const char *by, bool discard, unsigned flags,
                     char **id, esbx_error_t *err);
/* Approve or reject request ID as BY (MESSAGE may be NULL).  An approval
   needs the request waiting (review, or queued for checks), is counted
   once per BY, and is refused to the token that filed it; a rejection
   ends any request not final.  *OUT (when not NULL): the record after.  */
int esbx_request_approve (esbx_store_t *store, const char *id, const char *by, const char *message,
                          json_t **out, esbx_error_t *err);
int esbx_request_reject (esbx_store_t *store, const char *id, const char *by, const char *message,
                         json_t **out, esbx_error_t *err);
/* Withdraw request ID (cancelled).  */
int esbx_request_cancel (esbx_store_t *store, const char *id, const char *by, esbx_error_t *err);
/* The file of request ID: "check.log", or PATH of its frozen changes
   ("diff/..."), opened read-only beneath it.  */
int esbx_request_open_log (esbx_store_t *store, const char *id, esbx_error_t *err);
/* What PATH was in request ID's filed changes, written to OUTFD (a file's
   content, a symlink's target); not found when the request did not
   change it or changed it away.  */
int esbx_request_show (esbx_store_t *store, const char *id, const char *path, int outfd,
                       esbx_error_t *err);
/* The queue's counters (queue_stats.c): {"landed", "rejected": {KIND: N},
   "check_runs", "check_seconds", "wait_seconds", "waited"}.  */
json_t *esbx_queue_stats (esbx_store_t *store, const char *project);
/* Whether a request of PROJECT names LAYER (its candidate): gc keeps it.  */
bool esbx_queue_uses_layer (esbx_store_t *store, const char *project, const char *layer);

/* The merge queue's steps, for its runner (shim/lib/queue_run.c, which
   runs the checks); queue.c and queue_merge.c.  The queue's lock
   (queue/lock) guards every change of a record; where the project lock is
   held too it is taken first.  */
int esbx_queue_lock (esbx_store_t *store, const char *project, esbx_error_t *err);
json_t *esbx_request_read (esbx_store_t *store, const char *project, const char *id,
                           esbx_error_t *err);
/* Write REC (its "updated" set now); the caller holds the queue lock.  */
int esbx_request_write (esbx_store_t *store, const char *project, const char *id, json_t *rec,
                        esbx_error_t *err);
/* An event of the queue (queue/events.jsonl: time, type, project,
   request, FIELDS owned), an audit line (ROOT/audit.log: time, action,
   by, project, request, reason), a counter of stats.json (KEY, or KEY.SUB,
   plus VALUE; the caller holds the queue lock).  */
void esbx_queue_event (esbx_store_t *store, const char *project, const char *id, const char *type,
                       json_t *fields);
void esbx_queue_audit (esbx_store_t *store, const char *action, const char *by, const char *project,
                       const char *id, const char *reason);
void esbx_queue_count (esbx_store_t *store, const char *project, const char *key, const char *sub,
                       double value);
/* Append LEN bytes to request ID's check.log (at most 4 MiB are kept).  */
void esbx_request_log (esbx_store_t *store, const char *project, const char *id, const char *buf,
                       size_t len);
/* The names of request ID's throwaway sessions: its merge ("ID.merge")
   and its checks ("ID.check").  */
char *esbx_request_session (const char *id, const char *role);
/* Build request ID's candidate layer on TARGET (the head, or the candidate
   of the request ahead of it): a session on the request's base holding its
   changes, rebased onto TARGET, published as a layer installed but not in
   the stack (esbx_layer_chain), whose record names the request, its
   approvals and the checks; the request is then `testing`, its candidate
   and parent recorded.  0 and *CANDIDATE (NULL: the changes are upstream
   already, nothing to land), or 0 and *REFUSED (owned: {"kind":
   "conflict"|"unmerged"|"base", "message", ...}) when it does not merge.  */
int esbx_queue_candidate (esbx_store_t *store, const char *project, const char *id,
                          const char *target, char **candidate, json_t **refused,
                          esbx_error_t *err);
/* Land request ID's candidate: under the project lock, when the head is
   still its parent, the head moves to it (1), else nothing (0: the head
   moved; drop and build again).  Landed: the request is, its session (if
   it still exists) remembers the layer as published.  */
int esbx_queue_land (esbx_store_t *store, const char *project, const char *id, esbx_error_t *err);
/* Forget request ID's candidate (removed unless the stack names it) and
   put it back in STATE ("queued"), or when its candidate is in the stack
   already, finish its landing (a runner killed in between): 1 then.  */
int esbx_queue_drop (esbx_store_t *store, const char *project, const char *id, const char *state,
                     esbx_error_t *err);
/* The runner ends request ID: rejected with WHY (owned: {"kind":
   "check"|"timeout"|"conflict"|"unmerged"|"base", "message", ...}), its
   candidate dropped.  */
int esbx_queue_reject (esbx_store_t *store, const char *project, const char *id, json_t *why,
                       esbx_error_t *err);
/* Change request ID's record with FN under the queue lock (no change when
   it is final already, unless ANY).  */
int esbx_request_update (esbx_store_t *store, const char *project, const char *id, bool any,
                         void (*fn) (json_t *rec, void *arg), void *arg, esbx_error_t *err);

/* ---- secrets (secret.c) ----------------------------------------------- */

/* ROOT/secrets/NAME (0600 in a 0700 directory): values that sessions use
   (/run/secrets, exec env) but never keep, publish or log.  */
#define ESBX_SECRET_MAX (64u * 1024)
/* Values shorter than this are not looked for in published files: too
   many false alarms.  Exec output is redacted whatever their length.  */
#define ESBX_SECRET_SCAN_MIN 8
struct esbx_secret
{
  char *name;
  char *env;  /* variable of each exec, or NULL */
  char *file; /* path under /run/secrets in the session, or NULL */
  char *value;
  size_t len;
  bool inject;       /* attached with `inject`: the session holds PLACEHOLDER */
  char *placeholder; /* what env and file hold when INJECT */
};
/* Trailing newlines of VALUE are cut; refused (ESBX_ERR_EXISTS) when NAME
   exists: a secret never changes, rm and create it again.  PROJECT (which
   must exist) owns it: only its sessions may name it; NULL: the store
   owns it, any session may (secret_owner.c).  */
int esbx_secret_create (esbx_store_t *store, const char *name, const char *project,
                        const char *value, size_t len, esbx_error_t *err);
/* [{"name", "size", "created", "project"}] (project null: the store's),
   never the values; with PROJECT, only that project's.  */
json_t *esbx_secret_list (esbx_store_t *store, const char *project, esbx_error_t *err);
/* The same as esbx_secret_create, with INJECT (esbx_secret_inject_parse,
   NULL: none): the hosts the egress proxy puts the value in requests to.  */
int esbx_secret_create_inject (esbx_store_t *store, const char *name, const char *project,
                               const json_t *inject, const char *value, size_t len,
                               esbx_error_t *err);
/* `secret create --for HOST... [--header 'NAME: T{}' | --basic USER |
   --query PARAM]` as the record secret_inject.c keeps (*OUT NULL without
   --for).  */
int esbx_secret_inject_parse (const char *name, char *const *hosts, const char *header,
                              const char *basic, const char *query, json_t **out,
                              esbx_error_t *err);
/* The record of secret NAME, or NULL when it is bound to no host.  */
json_t *esbx_secret_inject_read (esbx_store_t *store, const char *name);
/* Whether INJECT (a record) puts its value in requests to HOST.  */
bool esbx_secret_inject_binds (const json_t *inject, const char *host);
/* The project that owns secret NAME in *PROJECT (owned), NULL when the
   store does; not-found when there is no such secret.  */
int esbx_secret_owner (esbx_store_t *store, const char *name, char **project, esbx_error_t *err);
/* Refused (ESBX_ERR_BUSY) while a session names it.  */
int esbx_secret_rm (esbx_store_t *store, const char *name, esbx_error_t *err);
int esbx_secret_read (esbx_store_t *store, const char *name, char **value, size_t *len,
                      esbx_error_t *err);
/* The same for PROJECT's use (push-git's credentials): refused
   (ESBX_ERR_FORBIDDEN) when NAME is another project's.  */
int esbx_secret_read_for (esbx_store_t *store, const char *name, const char *project, char **value,
                          size_t *len, esbx_error_t *err);
/* ROOT/secrets/NAME, for the holder that copies it to the session's tmpfs.  */
char *esbx_secret_path (esbx_store_t *store, const char *name);
/* SPECS (session create --secret) as the record's "secrets" array (*OUT
   NULL when there are none); every secret must exist and be one a session
   of PROJECT may use (ESBX_ERR_FORBIDDEN otherwise).  */
int esbx_secret_attach_parse (esbx_store_t *store, const char *project, char *const *specs,
                              json_t **out, esbx_error_t *err);
/* A copy of a record's "secrets" (names, env, file: never values).  */
json_t *esbx_secret_attach_json (const json_t *secrets);
/* The secrets session S names, with their values.  */
int esbx_session_secrets (esbx_store_t *store, const struct esbx_session *s,
                          struct esbx_secret **out, size_t *n, esbx_error_t *err);
void esbx_secrets_free (struct esbx_secret *v, size_t n);

/* ---- image roots (image_root.c) ----------------------------------------- */

/* Import FROM once per distinct source into ROOT/rootfs and give its key.  */
int esbx_rootfs_add (esbx_store_t *store, const char *from, char **key, esbx_error_t *err);
bool esbx_rootfs_valid_key (const char *key);
/* The tree of KEY: ROOT/rootfs/KEY/root.  */
char *esbx_rootfs_dir (esbx_store_t *store, const char *key);

/* ---- snapshots (snapshot.c) ---------------------------------------------- */

/* Freeze SESSION's private state (its upper) as snapshot NAME (NULL:
   "<session>-snap-<hex>") of its project; *OUT is its name.  Snapshot
   names are unique in the store.  The upper is moved into a frozen layer
   and the session goes on over it with an empty one (*MOVED, may be
   NULL), or, when that cannot be done safely or FLAGS has
   ESBX_SNAPSHOT_COPY (the caller knows something uses the view), copied.
   The caller makes the upper hold still (esbx_sandbox_snapshot freezes
   the session's processes and takes the holder's workspace down).  */
#define ESBX_SNAPSHOT_COPY 1u
int esbx_snapshot_create (esbx_store_t *store, const char *session, const char *name,
                          unsigned flags, char **out, bool *moved, esbx_error_t *err);
/* The snapshots (of PROJECT when not NULL): each its record plus
   "sessions" (made from it) and "children" (snapshots of those).  */
json_t *esbx_snapshot_list (esbx_store_t *store, const char *project, esbx_error_t *err);
json_t *esbx_snapshot_inspect (esbx_store_t *store, const char *name, esbx_error_t *err);
/* Refused (ESBX_ERR_BUSY) while a session or another snapshot uses it.  */
int esbx_snapshot_rm (esbx_store_t *store, const char *name, esbx_error_t *err);
/* Remove every snapshot nothing uses (`gc --snapshots`).  */
int esbx_snapshot_gc (esbx_store_t *store, FILE *report, esbx_error_t *err);

/* ---- snapshots on the remote (remote/snapshot_push.c, snapshot_pull.c) -- */

/* When a shared project's sessions push snapshots by themselves
   (snapshot_policy.c, ROOT/projects/P/snapshot-push.json): before each
   publish attempt, every EVERY seconds (0: never; esbxd does it), and
   the snapshot `--on-expiry snapshot` takes.  */
struct esbx_snapshot_policy
{
  bool on_publish;
  int64_t every;
  bool on_expiry;
};
/* Nothing set is all false and 0.  */
int esbx_snapshot_policy_get (esbx_store_t *store, const char *project,
                              struct esbx_snapshot_policy *p, esbx_error_t *err);
/* Refused for a project that is not shared unless P sets nothing.  */
int esbx_snapshot_policy_set (esbx_store_t *store, const char *project,
                              const struct esbx_snapshot_policy *p, esbx_error_t *err);

/* Push snapshot NAME of a shared project to the remote, and first the
   snapshots under it that etcd lacks: its diff and record as an OCI
   artifact in the registry (tag snap.NAME), its record in etcd, which then
   names it as the last snapshot pushed of its session.  *MANIFEST (unless
   NULL) receives the artifact's manifest digest.  Fails with the
   registry's or etcd's error, naming its URL: nothing is skipped.  */
int esbx_snapshot_push (esbx_store_t *store, const char *name, char **manifest, esbx_error_t *err);
/* Snapshot NAME of shared PROJECT here: fetched from the remote, its
   parents first, unless it is here already; NOT_FOUND when etcd has no
   record of it.  */
int esbx_snapshot_pull (esbx_store_t *store, const char *project, const char *name,
                        esbx_error_t *err);
/* NAME, a session's automatic snapshot that a newer pushed one replaced:
   removed here unless something here uses it (then it stays, here and on
   the remote: 0), and, in a shared project, taken off the remote: its
   etcd record, then its manifest (the registry's garbage-collect removes
   its blobs), unless a snapshot in etcd names it as its parent or a
   session's last pushed snapshot is it.  Fails with the remote's error
   (gone here then, kept there).  */
int esbx_snapshot_retire (esbx_store_t *store, const char *name, esbx_error_t *err);
/* The last snapshot pushed of session SESSION of shared PROJECT: *NAME,
   NULL when none was.  */
int esbx_snapshot_last_pushed (esbx_store_t *store, const char *project, const char *session,
                               char **name, esbx_error_t *err);

/* ---- lifetimes (lifetime.c) --------------------------------------------- */

/* PROJECT's defaults for new sessions: ttl, idle_ttl (seconds, 0: none)
   and on_expiry (NULL: discard).  */
int esbx_lifetime_set_defaults (esbx_store_t *store, const char *project, int64_t ttl,
                                int64_t idle_ttl, const char *on_expiry, esbx_error_t *err);
json_t *esbx_lifetime_defaults (esbx_store_t *store, const char *project, esbx_error_t *err);
/* ---- resource defaults (session_defaults.c) ----------------------------- */

/* A --tmpfs-size or --shm-size value (WHAT names the option): a size
   above 0.  */
int esbx_parse_tmpfs_size (const char *what, const char *s, uint64_t *out, esbx_error_t *err);

/* ---- network defaults (network_defaults.c) ------------------------------ */

/* PROJECT's network for new sessions that name none: NETWORK ("none",
   "host" or "egress"; NULL: egress with ALLOW, else none) and, for egress,
   ALLOW (NULL-terminated, checked as --allow), the allow-list of egress
   sessions that name none.  "none" removes the defaults.  */
int esbx_project_network_set (esbx_store_t *store, const char *project, const char *network,
                              char *const *allow, esbx_error_t *err);
/* {"network": N[, "allow": [...]]}; {"network": "none"} without defaults.  */
json_t *esbx_project_network_get (esbx_store_t *store, const char *project, esbx_error_t *err);

/* The session was used now (exec, Docker mount, file operation): what its
   idle time to live counts from.  Cheap, and never fails.  */
void esbx_session_touch (esbx_store_t *store, const char *name);
/* Seconds since the epoch of its last use (its creation if never used).  */
int64_t esbx_session_last_used (esbx_store_t *store, const struct esbx_session *s);
/* When S expires (seconds since the epoch; 0: never) and *WHY ("ttl" or
   "idle-ttl").  */
int64_t esbx_session_expires (esbx_store_t *store, const struct esbx_session *s, const char **why);
/* Failed attempts to retire S at its expiry (ROOT/sessions/S/expiry.json):
   how many, when the next may start (ms since the epoch) and the last
   error.  A session that never failed has zeros and no error.  */
struct esbx_expiry_state
{
  int64_t failures;
  int64_t next_ms;
  char *error;
};
/* Never fails: a missing or unreadable record is zeros.  */
void esbx_expiry_state_load (esbx_store_t *store, const char *name, struct esbx_expiry_state *st);
int esbx_expiry_state_save (esbx_store_t *store, const char *name,
                            const struct esbx_expiry_state *st, esbx_error_t *err);
void esbx_expiry_state_clear (struct esbx_expiry_state *st);
/* {"age", "idle", "ttl", "idle_ttl", "expires", "expires_in", "expires_by",
   "on_expiry"[, "expiry_failures", "expiry_error"]} for `session list` and
   inspect.  */
json_t *esbx_session_lifetime_json (esbx_store_t *store, const struct esbx_session *s);

/* ---- progress of long operations (progress.c) --------------------------- */

/* A front end that wants progress sets a sink for its thread; import,
   export, diff --patch and gc then count their work in it (plain counters,
   no system call per file) and call REPORT at most every INTERVAL_MS, and
   once more with FINAL set at the end.  Libraries never print: REPORT
   draws (the CLI) or streams (the gateway).  */
struct esbx_progress
{
  void (*report) (const struct esbx_progress *p, void *data);
  void *data;
  unsigned interval_ms; /* 0: 100, or $ESBX_PROGRESS_INTERVAL_MS */
  const char *phase;    /* "import", "export", "patch", "gc" */
  const char *unit;     /* what DONE counts: "files", "layers" */
  uint64_t done;
  uint64_t total;      /* 0: unknown */
  uint64_t bytes;      /* written or read */
  uint64_t in;         /* how far into a source of known size (an archive) */
  uint64_t in_total;   /* its size (0: unknown); the percentage when TOTAL is 0 */
  uint64_t start_ns;   /* monotonic */
  uint64_t elapsed_ns; /* at the last report */
  bool final;
  uint64_t next_ns; /* the earliest time of the next report */
};

/* The sink of the calling thread (NULL: no progress).  */
void esbx_progress_set (struct esbx_progress *p);
struct esbx_progress *esbx_progress_get (void);
/* Start PHASE on the current sink, if any: counters to zero.  */
struct esbx_progress *esbx_progress_begin (const char *phase, const char *unit, uint64_t total);
/* Report when the interval has passed (a clock read from the vDSO).  */
void esbx_progress_tick (struct esbx_progress *p);
/* The final report of the phase begun.  */
void esbx_progress_end (struct esbx_progress *p);
/* One more item of N bytes on P (NULL: nothing), reported if it is time.  */
static inline void
esbx_progress_add (struct esbx_progress *p, uint64_t n)
{
  if (p == NULL)
    return;
  p->done++;
  p->bytes += n;
  esbx_progress_tick (p);
}

/* ---- import/export (import.c, export.c) --------------------------------- */

/* Fill the empty directory DESTFD from FROM (directory, archive, docker save).
   Runs the extraction in a child process that cannot write outside DESTFD.  */
int esbx_import_tree (const char *from, int destfd, esbx_error_t *err);
/* FROM is one OCI image layer and DESTFD empty: its whiteout entries are
   skipped (the caller recreates them in overlay format from the layer's
   record).  */
#define ESBX_IMPORT_IMAGE_LAYER 1u
/* A project's tree: a `.git` at any depth is left out, with one warning
   (git projects are made with --from-git).  */
#define ESBX_IMPORT_SKIP_GIT 2u
int esbx_import_tree_flags (const char *from, int destfd, unsigned flags, esbx_error_t *err);
/* The layer diff directory DIFFD (overlay format) as an OCI image layer
   tar (whiteouts `.wh.NAME`, `.wh..wh..opq`) written to FD (export.c).  */
int esbx_export_diff_oci (int diffd, int fd, esbx_error_t *err);

enum esbx_export_format
{
  ESBX_EXPORT_TAR,
  ESBX_EXPORT_OCI_LAYER,
};
/* REF is a session name or PROJECT[@LAYER].  */
int esbx_export (esbx_store_t *store, const char *ref, const char *file,
                 enum esbx_export_format format, esbx_error_t *err);

/* ---- several hosts (remote*.c, registry.c, etcd.c; docs/SCALE-OUT.md) --- */

/* The store's remote: an OCI registry URL (http://HOST:PORT[/PREFIX]) and
   etcd's client URL, kept in ROOT/remote.json ($ESBX_REGISTRY and
   $ESBX_ETCD win over it), and how to reach them: a CA bundle and a client
   certificate for both, the registry's credentials in a token file (a
   line "user:password" for basic authentication, else a bearer token).  */
struct esbx_remote_config
{
  const char *registry;
  const char *etcd;
  const char *ca; /* the files: NULL or paths, made absolute */
  const char *cert;
  const char *key;
  const char *token_file;
  const char *compression; /* of layer blobs: "gzip" (NULL) or "none" */
};
int esbx_remote_set (esbx_store_t *store, const struct esbx_remote_config *c, esbx_error_t *err);
/* {"registry", "etcd", "compression", and "ca", "cert", "key",
   "token_file" when set} as they apply now.  */
json_t *esbx_remote_show (esbx_store_t *store, esbx_error_t *err);
/* Whether PROJECT's history is shared through the remote.  */
bool esbx_project_is_shared (esbx_store_t *store, const char *project);
/* Share PROJECT: push every layer, then create its head in etcd (refused
   when etcd has another head for it).  */
int esbx_project_push (esbx_store_t *store, const char *project, esbx_error_t *err);
/* Bring PROJECT (created here if needed) up to its head in etcd; *FETCHED
   counts the layers downloaded.  */
int esbx_project_pull (esbx_store_t *store, const char *project, size_t *fetched,
                       esbx_error_t *err);
/* The same for a shared project that exists here.  */
int esbx_remote_sync (esbx_store_t *store, const char *project, size_t *fetched, esbx_error_t *err);
/* esbx_remote_sync unless esbx_remote_watched says the store follows the
   heads already (what a session create does).  */
int esbx_remote_sync_unwatched (esbx_store_t *store, const char *project, esbx_error_t *err);
/* In this process, REGISTRY and ETCD (URLs, each NULL for none) win over
   $ESBX_REGISTRY, $ESBX_ETCD and ROOT/remote.json of every store:
   esbxd's --registry/--etcd and the keys of its config file.  */
void esbx_remote_override (const char *registry, const char *etcd);
/* Refuse URL unless http:// or https:// (WHAT names it: "--etcd").  */
int esbx_remote_check_url (const char *what, const char *url, esbx_error_t *err);

/* Watching the heads in etcd (etcd_watch.c): what esbxd prefetches by.  */
struct esbx_remote_watch_ops
{
  /* The watch is in place at etcd URL ETCD: sync every project now (heads
     written before a watch made without a start revision are not
     reported, and after a resume the store must be at the heads before
     creates trust it).  True (every project synced) marks the store as
     following the heads (esbx_remote_watched); false ends the watch,
     which starts from now again.  */
  bool (*created) (const char *etcd, void *arg);
  /* PROJECT's head was written (not called for deletions).  False (the
     sync failed): the watch ends, and resumes at this event when called
     again.  */
  bool (*head) (const char *project, void *arg);
  /* Asked at least once a second: true ends the watch.  */
  bool (*stop) (void *arg);
  void *arg;
};
/* Watch every project's head in the store's etcd from revision *NEXT
   (0: from now), *NEXT following the events seen.  Returns 0 when STOP
   ended it, -1 when it could not start or the connection ended: call again
   with the same *NEXT to resume (it is 0 again when etcd compacted it).  */
int esbx_remote_watch (esbx_store_t *store, int64_t *next, const struct esbx_remote_watch_ops *ops,
                       esbx_error_t *err);
/* Whether a watch (esbxd's) of the store's etcd is connected now and
   keeping the shared projects here at the heads etcd has: then a session
   create starts from the local stack without asking etcd itself.  While
   connected, esbx_remote_watch holds an OFD write lock on
   ROOT/remote.watch, which names the etcd watched.  */
bool esbx_remote_watched (esbx_store_t *store);

/* ---- the trash (trash.c) ------------------------------------------------ */

#define ESBX_TRASH_DEFAULT_TTL (24 * 3600)
/* How long the trash keeps an entry, in seconds: $ESBX_TRASH_TTL, else
   ROOT/trash/ttl, else 24 hours; 0 turns the trash off.  */
int esbx_trash_ttl (esbx_store_t *store, int64_t *seconds, esbx_error_t *err);
/* Store DURATION ("30s", "2h", "7d", "0") in ROOT/trash/ttl.  */
int esbx_trash_set_ttl (esbx_store_t *store, const char *duration, esbx_error_t *err);
/* "1d", "90m": SECONDS in the largest unit that divides it (owned).  */
char *esbx_trash_ttl_string (int64_t seconds);
/* The entries, sorted: [{"entry", "session", "project", "base", "changes",
   "size", "deleted", "expires"}].  */
json_t *esbx_trash_list (esbx_store_t *store, esbx_error_t *err);
/* Bring ENTRY back as session NAME (NULL: its old name) on its old base;
   refused when the name is taken or the project, its base or a layer it
   published is gone.  *RESTORED is the session's name.  */
int esbx_trash_restore (esbx_store_t *store, const char *entry, const char *name, char **restored,
                        esbx_error_t *err);
/* Delete ENTRY, or every entry when NULL; each is reported on REPORT.  */
int esbx_trash_purge (esbx_store_t *store, const char *entry, FILE *report, esbx_error_t *err);
/* Delete the entries past their keeping time (gc); *FAILED counts those
   that could not be, *ERR is the first such error.  */
int esbx_trash_expire (esbx_store_t *store, FILE *report, size_t *failed, esbx_error_t *err);

/* ---- store counters (counters.c) ---------------------------------------- */

/* Publishes since the store began, by any front end: those that took
   place (a layer, or nothing to publish) and those refused for conflicts.  */
int esbx_counters_publishes (esbx_store_t *store, uint64_t *ok, uint64_t *conflicts,
                             esbx_error_t *err);

/* ---- maintenance -------------------------------------------------------- */

/* Verify every layer of PROJECT (or of every project when NULL) against its
   record; problems are printed to REPORT, the return is < 0 if any.  */
int esbx_fsck (esbx_store_t *store, const char *project, FILE *report, esbx_error_t *err);
/* Remove leftovers of crashed operations: temp dirs, unreferenced layers,
   half-created sessions.  Safe at any time and concurrently.  */
int esbx_gc (esbx_store_t *store, FILE *report, esbx_error_t *err);
/* Remove the whole local copy of every shared project that no session,
   snapshot or trash entry of this store uses (gc_cache.c): the registry
   and etcd hold it, `session create` and `project pull` fetch it again.  */
int esbx_gc_cache (esbx_store_t *store, FILE *report, esbx_error_t *err);

/* ---- gateway tokens (token.c) ------------------------------------------- */

/* Scopes a token can carry (DESIGN.md, "Gateway and permissions").  */
enum
{
  ESBX_SCOPE_MANAGE = 1u << 0,  /* projects, sessions, publish, discard */
  ESBX_SCOPE_RUNTIME = 1u << 1, /* exec, file read/write inside a session */
  ESBX_SCOPE_OBSERVE = 1u << 2, /* list, inspect, diff, events */
};

/* A token as stored in ROOT/tokens/ID.json: only the SHA-256 of its secret
   is kept.  A limit names a project or session and is bound to its id, so
   that it never reaches another one made later under the same name.  */
struct esbx_token
{
  char *id;
  unsigned scopes;
  char *project;    /* NULL: any project */
  char *project_id; /* PROJECT's id; NULL until the project exists */
  char *session;    /* NULL: any session */
  char *session_id; /* SESSION's id (esbx_session.id) */
  char *created;    /* RFC 3339 */
  int64_t expires;  /* seconds since the epoch, 0: never */
  /* At most this many sessions it made through the gateway at once, and of
     them egress sessions; 0: no cap (esbx_token_create sets the defaults
     below for a token with a limit).  */
  unsigned max_sessions;
  unsigned max_egress;
};

/* The caps of a token with a project or session limit that names none of
   its own: one project's token cannot take a host's 64 egress slots
   (ESBX_EGRESS_MAX; each egress session holds one while its holder
   runs), nor make sessions without end.  */
#define ESBX_TOKEN_DEFAULT_MAX_SESSIONS 32
#define ESBX_TOKEN_DEFAULT_MAX_EGRESS   8
#define ESBX_TOKEN_MAX_CAP              100000

/* Caps asked for at creation (token create --max-sessions, --max-egress);
   0: the default of the token's limit.  */
struct esbx_token_caps
{
  unsigned max_sessions;
  unsigned max_egress;
};

void esbx_token_free (struct esbx_token *t);
/* "manage,observe" -> bits; unknown or empty scopes are a usage error.  */
int esbx_token_parse_scopes (const char *s, unsigned *scopes, esbx_error_t *err);
/* Bits -> "manage,runtime,observe" (owned).  */
char *esbx_token_scopes_string (unsigned scopes);
/* The record without its hash, for `token list` and the audit log.  */
json_t *esbx_token_to_json (const struct esbx_token *t);
/* TTL_SECONDS 0: never expires.  *secret receives the bearer secret, which
   is shown once and never stored.  SESSION must exist; PROJECT may not exist
   yet (the token may create it) and is then bound at its first use after
   the project exists (esbx_token_bind_project).  CAPS may be NULL: the
   defaults.  */
int esbx_token_create (esbx_store_t *store, unsigned scopes, const char *project,
                       const char *session, int64_t ttl_seconds, const struct esbx_token_caps *caps,
                       char **secret, struct esbx_token **out, esbx_error_t *err);
/* Every token, sorted by id.  */
int esbx_token_list (esbx_store_t *store, struct esbx_token ***out, size_t *n, esbx_error_t *err);
int esbx_token_revoke (esbx_store_t *store, const char *id, esbx_error_t *err);
/* The random id of PROJECT, made the first time it is asked for
   (ROOT/projects/P/id): a project removed and created again under the same
   name has another.  */
int esbx_project_id (esbx_store_t *store, const char *project, char **id, esbx_error_t *err);
/* Bind T, limited to a project it has no id of yet, to that project as it
   is now; a revoked token stays revoked.  Nothing to do for other tokens or
   while the project does not exist.  */
int esbx_token_bind_project (esbx_store_t *store, struct esbx_token *t, esbx_error_t *err);
/* The sessions token ID made through the gateway that exist now (session
   records naming it, esbx_session_opts.token), and how many of them are on
   the egress network.  */
int esbx_token_holdings (esbx_store_t *store, const char *id, size_t *sessions, size_t *egress,
                         esbx_error_t *err);
/* Token ID's own lock (ROOT/tokens/ID.lock), held while it counts its
   holdings and makes a session, so that two requests of one token never
   both take the last place.  */
int esbx_token_lock (esbx_store_t *store, const char *id, esbx_error_t *err);
/* The token whose secret is SECRET, compared in constant time against every
   stored hash.  Fails for an unknown, revoked or expired one.  */
int esbx_token_verify (esbx_store_t *store, const char *secret, struct esbx_token **out,
                       esbx_error_t *err);

/* ---- JSON views shared by the CLI and the gateway (view.c) -------------- */

/* A layer's provenance without its change list, for log and blame.  */
json_t *esbx_layer_summary_json (const struct esbx_layer *l);
/* A session as `session list` (RUNTIME NULL) or `session inspect` shows it;
   RUNTIME (owned) is the shim's status of the session.  */
json_t *esbx_session_json (esbx_store_t *store, const struct esbx_session *s, json_t *runtime);
/* A line of `project list`: {"name", "layers", "head"}.  */
json_t *esbx_project_json (esbx_store_t *store, const char *name, esbx_error_t *err);
/* `project log`: the layer summaries, newest first.  */
json_t *esbx_project_log_json (esbx_store_t *store, const char *name, esbx_error_t *err);
/* `diff --json`: one esbx_change_to_json per change.  */
json_t *esbx_changeset_json (const struct esbx_changeset *cs);
/* A publish that succeeded: {"layer" (null when nothing changed), "changes"
   [, "ignored": {"count", "first"}]}.  */
json_t *esbx_publish_result_json (const struct esbx_publish_result *r);
/* A rebase, whether it succeeded or left paths unmerged: {"base" (the
   session's base afterwards), "merged", "conflicts", "unmerged"}.  */
json_t *esbx_rebase_result_json (const struct esbx_publish_result *r);
/* The conflicts of a publish or rebase: [{"path", "layer", "session",
   "kind", "blocking"[, "renamed"][, "markers"]}].  */
json_t *esbx_conflicts_json (const struct esbx_publish_result *r);
/* The paths left unmerged: [{"path", "kind", "layer", "session",
   ["renamed",] "base", "ours", "theirs"}], each side "file", "symlink",
   "directory" or null (absent).  */
json_t *esbx_unmerged_json (const struct esbx_publish_result *r);
/* What a refused publish names: {["conflicts",] ["unmerged"]}, or NULL
   when it names neither.  */
json_t *esbx_refused_json (const struct esbx_publish_result *r);

#endif
