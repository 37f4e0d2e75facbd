/* liblayerstore internals shared between its files (not installed).  */
#ifndef ESBX_LAYERSTORE_INTERNAL_H
#define ESBX_LAYERSTORE_INTERNAL_H

#include "hash.h"
#include "layerstore.h"
#include "utils.h"

#include <sys/stat.h>

/* Mount an overlay at TARGET from LOWERS (absolute diff paths, bottom to
   top).  UPPER and WORK may be NULL for a read-only view.  Uses fsconfig
   `lowerdir+` where the kernel has it, relative short paths otherwise.  */
int esbx_mount_overlay (char *const *lowers, size_t n, const char *upper, const char *work,
                        const char *target, esbx_error_t *err);
/* Inspect's "userns" of S (userns.c): what it asked for, and the mode its
   mounted view runs in (null while it is not mounted).  */
json_t *esbx_userns_json (esbx_store_t *store, const struct esbx_session *s);
/* The same for any depth up to twice the overlayfs limit: the bottom layers
   that do not fit are first mounted read-only at FOLDED (a directory the
   caller unmounts after TARGET).  MAP (may be NULL) idmaps the layers;
   then -2 as above.  */
int esbx_mount_stack (char *const *lowers, size_t n, const char *upper, const char *work,
                      const char *target, const char *folded, const struct esbx_idmap *map,
                      esbx_error_t *err);
/* Unmount TARGET (lazily when it is busy and LAZY is set).  */
int esbx_unmount (const char *target, bool lazy, esbx_error_t *err);
bool esbx_is_mountpoint (const char *path);
/* The same for REL beneath DIRFD (a shorter walk than an absolute path).  */
bool esbx_is_mountpoint_at (int dirfd, const char *rel);
/* 0 when no overlay anywhere uses UPPER as its upper directory, 1 when
   one does or when that cannot be told; EMPTY is an empty directory on
   the same filesystem (mount.c).  */
int esbx_overlay_upper_in_use (const char *upper, const char *empty);

/* The new mount API's fs context (fs_context.c): one string or fd
   setting (the syscall's result, errno set); the options of every session
   overlay and setting them; the error of a failed call, naming WHAT and
   OBJECT, with the kernel's explanation read from FSFD.  */
#define ESBX_OVERLAY_PLAIN_OPTIONS 3
extern const char *const esbx_overlay_plain_options[ESBX_OVERLAY_PLAIN_OPTIONS][2];
int esbx_fsconfig_string (int fsfd, const char *key, const char *value);
int esbx_fsconfig_fd (int fsfd, const char *key, int fd);
int esbx_overlay_set_plain (int fsfd, esbx_error_t *err);
int esbx_fs_context_error (esbx_error_t *err, int fsfd, const char *what, const char *object);

/* An inotify fd watching the root of the overlay mounted at TARGET (-1
   when none can be made), and, after TARGET is unmounted, whether that
   overlay's superblock ended: no mount of it is left anywhere (mount.c).  */
int esbx_overlay_watch (const char *target);
bool esbx_overlay_watch_ended (int fd);

/* The ids of the view of layer UPTO of PROJECT (NULL: the head), bottom
   to top: the stack up to it, or, for a layer the merge queue is testing,
   the stack up to its first parent there and the pending layers above.  */
int esbx_layer_chain (esbx_store_t *store, const char *project, const char *upto, char ***ids,
                      size_t *n, esbx_error_t *err);
/* Absolute diff paths of PROJECT's layers from the bottom up to and including
   UPTO (an id, esbx_layer_chain), then the layers in EXTRA (ids, may be NULL).  */
int esbx_stack_lowers (esbx_store_t *store, const char *project, const char *upto,
                       char *const *extra, char ***paths, size_t *n, esbx_error_t *err);

/* A directory under ROOT/tmp, locked (flock) for as long as the returned fd
   is open so that gc leaves it alone.  *path receives its absolute path.  */
int esbx_store_tmpdir (esbx_store_t *store, const char *prefix, char **path, esbx_error_t *err);

/* The store's creation lock: held shared while a temp directory is made and
   locked (esbx_mkdir_locked), exclusively by gc while it sweeps.  */
int esbx_store_creation_lock (esbx_store_t *store, bool exclusive, esbx_error_t *err);
/* A discarded session's directory in ROOT/tmp while it is removed:
   PREFIX + NAME-RANDOM (discard.c; gc waits for its remover).  */
#define ESBX_DISCARD_PREFIX "discard-"
/* Remove REL (a directory of the store nobody else uses) in a process of
   its own when the store detaches removals and this process runs one
   thread: 1 when that process took it, 0 when the caller removes it
   (remove_detached.c).  */
int esbx_rm_rf_detached (esbx_store_t *store, const char *rel);
/* mkdir REL under the store root and return an fd holding its flock.  */
int esbx_mkdir_locked (esbx_store_t *store, const char *rel, esbx_error_t *err);

/* Append C (owned members moved) to CS.  */
void esbx_changeset_push (struct esbx_changeset *cs, struct esbx_change *c);
void esbx_changeset_sort (struct esbx_changeset *cs);
const struct esbx_change *esbx_changeset_find (const struct esbx_changeset *cs, const char *path);
/* Do A and B leave their path in the same state: both absent, or the same
   type and mode with the same content (files: sha256) or target
   (symlinks)?  */
bool esbx_change_same_state (const struct esbx_change *a, const struct esbx_change *b);

/* Layer records (layer.c).  */
int esbx_layer_from_json (const json_t *j, struct esbx_layer **out, esbx_error_t *err);
json_t *esbx_layer_to_json (const struct esbx_layer *l);
/* A new object holding the string members of LABELS, in order (an empty one
   when LABELS is NULL or not an object): labels are strings only.  */
json_t *esbx_labels_copy (const json_t *labels);
/* Replace the stack file atomically; the caller holds the project lock.  */
int esbx_project_write_stack (esbx_store_t *store, const char *project, char *const *ids, size_t n,
                              esbx_error_t *err);
/* The project lock (exclusive); returns the fd that holds it.  */
int esbx_project_lock (esbx_store_t *store, const char *project, esbx_error_t *err);

/* The merged view of a stack of layers, read without mounting (lookup.c).  */
struct esbx_stack_cache;
struct esbx_stack
{
  esbx_store_t *store;
  char *project;
  size_t n;
  int *fds; /* diff directories, bottom to top */
  char **ids;
  struct esbx_layer **records;    /* loaded on demand */
  bool *record_failed;            /* and not again after a failure */
  struct esbx_stack_cache *cache; /* directories walked (lookup_cache.c) */
};
bool esbx_is_whiteout (const struct stat *st);
bool esbx_is_opaque_at (int dirfd, const char *name);
bool esbx_is_opaque_fd (int fd);
int esbx_stack_open (esbx_store_t *store, const char *project, const char *upto, char *const *extra,
                     struct esbx_stack *st, esbx_error_t *err);
void esbx_stack_close (struct esbx_stack *st);
/* 1 and the layer index and stat when REL ("a/b") exists in the view.  */
int esbx_stack_lookup (struct esbx_stack *st, const char *rel, size_t *layer, struct stat *out);
int esbx_stack_file_sha (struct esbx_stack *st, size_t layer, const char *rel, char sha[65],
                         esbx_error_t *err);
/* Names visible in directory REL ("" for the root) of the view.  */
char **esbx_stack_readdir (struct esbx_stack *st, const char *rel, esbx_error_t *err);

/* Move session S (its directory REL under the store root, unmounted) to
   the trash with CHANGES unpublished changes (-1: unknown), kept TTL
   seconds (trash.c).  */
int esbx_trash_put (esbx_store_t *store, const struct esbx_session *s, const char *rel,
                    int64_t changes, int64_t ttl, char **entry, char **expires, esbx_error_t *err);

/* Whether the session directory REL may go to the trash (trash_floor.c):
   1 when it may, after purging the oldest entries the free-space floor
   asked for (each said in a warning); 0 with *WHY when it must be deleted
   instead (larger than the trash's largest entry, or the floor out of
   reach).  */
int esbx_trash_make_room (esbx_store_t *store, const char *rel, char **why, esbx_error_t *err);

/* Count one publish that took place, or one refused for conflicts, in
   ROOT/counters.json (counters.c).  A failure is only warned about: the
   publish itself stands.  */
void esbx_counters_publish (esbx_store_t *store, bool conflict);

/* Sessions (session.c).  */
/* The trash entries of forks of SNAPSHOT of PROJECT (trash.c): restoring
   one needs the snapshot, so it is in use.  */
int esbx_trash_snapshot_users (esbx_store_t *store, const char *project, const char *snapshot,
                               struct strv *out, esbx_error_t *err);
/* Append to IDS the frozen layers of PROJECT that trash entries name;
 *UNKNOWN when an entry could not be read.  */
int esbx_trash_frozen_users (esbx_store_t *store, const char *project, struct strv *ids,
                             bool *unknown, esbx_error_t *err);
/* Unmount the merged view and the folded bottom layers under it (LAZY:
   MNT_DETACH).  */
int esbx_session_unmount_views (esbx_store_t *store, const char *name, bool lazy,
                                esbx_error_t *err);
int esbx_session_save (esbx_store_t *store, const char *name, const json_t *record,
                       esbx_error_t *err);
/* The names of every secret S holds or keeps (an array of strings, owned):
   those it was given ("secrets") and those its snapshot's session had
   ("kept_secrets": a fork, or a session made from a snapshot, keeps the
   names so that publish looks for their values, and gets no value).  */
json_t *esbx_session_secret_names (const struct esbx_session *s);

/* Change set of an upper directory against BASE (scan.c).  SAME, when not
   NULL, receives the copy-ups identical to the base (directories too).  Unless FLAGS has
   ESBX_CHANGES_INCLUDE_IGNORED, the ignore rules of the merged view
   (ignore.h) leave changes out; IGNORED, when not NULL, receives them.  */
int esbx_scan_upper (struct esbx_stack *base, int upperfd, const char *session, unsigned flags,
                     struct esbx_changeset *out, struct esbx_changeset *same,
                     struct esbx_changeset *ignored, esbx_error_t *err);
/* Scan session S against its base and the layers it published.  Returns
   the fd of its upper directory; KEEP, when not NULL, receives the opened
   base stack (the caller closes it).  */
int esbx_session_scan (esbx_store_t *store, const struct esbx_session *s, struct esbx_stack *keep,
                       unsigned flags, struct esbx_changeset *out, struct esbx_changeset *same,
                       struct esbx_changeset *ignored, esbx_error_t *err);
/* Refused (ESBX_ERR_FORBIDDEN, naming the path) when a changed regular
   file of CS (in the upper UFD) holds the value of one of S's secrets not
   in ALLOW (secret_scan.c).  */
int esbx_secret_scan_changes (esbx_store_t *store, const struct esbx_session *s, int ufd,
                              const struct esbx_changeset *cs, char *const *allow,
                              esbx_error_t *err);
/* A secret's owner (secret_owner.c), beneath the secrets directory DFD.
   Write PROJECT (which must exist; NULL: the store's, the record goes) as
   NAME's owner; remove it; read it (*OWNER NULL: the store's).  */
int esbx_secret_owner_write (esbx_store_t *store, int dfd, const char *name, const char *project,
                             esbx_error_t *err);
void esbx_secret_owner_remove (int dfd, const char *name);
/* A secret's hosts (secret_inject.c).  */
int esbx_secret_inject_write (esbx_store_t *store, const char *name, const json_t *inject,
                              esbx_error_t *err);
void esbx_secret_inject_remove (esbx_store_t *store, const char *name);
int esbx_secret_owner_read (int dfd, const char *name, json_t **owner, esbx_error_t *err);
/* Refused (ESBX_ERR_FORBIDDEN) unless a session of PROJECT may use secret
   NAME of OWNER (esbx_secret_owner_read; NULL: the store's, any may).  */
int esbx_secret_owner_check (esbx_store_t *store, const char *name, const json_t *owner,
                             const char *project, esbx_error_t *err);
/* Refuse names that are not UTF-8, hold control characters or look like
   whiteouts; REL is the path shown in the message.  */
int esbx_check_entry_name (const char *session, const char *rel, const char *name,
                           esbx_error_t *err);

/* What upstream changed since a base (conflict.c): the newest entry of
   each path over LAYERS, sorted by path.  */
struct esbx_upstream_entry
{
  const struct esbx_change *change;
  const struct esbx_layer *layer;
};
struct esbx_upstream
{
  struct esbx_layer **layers; /* owned */
  size_t n_layers;
  struct esbx_upstream_entry *v;
  size_t n;
};
/* Load the layers after BASE in IDS that are not in OWN (the session's own
   published layers).  */
int esbx_upstream_load (esbx_store_t *store, const char *project, const char *base,
                        char *const *own, char **ids, size_t n, struct esbx_upstream *u,
                        esbx_error_t *err);
/* (Re)build the path index of U from its layers.  */
void esbx_upstream_index (struct esbx_upstream *u);
void esbx_upstream_free (struct esbx_upstream *u);
/* Append to R every path of CS that conflicts with U.  */
void esbx_conflicts_find (const struct esbx_changeset *cs, const struct esbx_upstream *u,
                          struct esbx_publish_result *r);

/* The newest upstream entry of PATH, or NULL.  */
const struct esbx_upstream_entry *esbx_upstream_find (const struct esbx_upstream *u,
                                                      const char *path);

/* Three-way merges of text files (merge.c).  */
#define ESBX_MERGE_MAX_BYTES (64 * 1024 * 1024)
/* A regular file of at most ESBX_MERGE_MAX_BYTES with no NUL byte in its
   first 8 KiB: text, as git and diff(1) tell it.  */
bool esbx_mergeable_fd (int fd);
/* diff3 -m -E of OURS, BASE (-1: empty) and THEIRS into OUTFD, LABELS
   naming them in the markers; *MARKERS when hunks overlapped.  */
int esbx_merge_text (int ours, int base, int theirs, int outfd, const char *const labels[3],
                     bool *markers, esbx_error_t *err);
/* 1 when the session's file PATH has a line starting with a conflict marker
   (`<<<<<<< ` or `>>>>>>> `).  */
int esbx_has_conflict_markers (int ufd, const char *path);

/* What rebase does with each conflict of R, the paths both the change
   set CS of session S (its upper UFD, directory SDFD) and upstream UP
   changed up to HEAD (rebase_plan.c): merged files are written beside the
   session's entries, R's conflicts get their kind and whether they block,
   unmerged entries are made with their versions kept.  */
struct esbx_rebase_plan;
int esbx_rebase_plan_make (esbx_store_t *store, const struct esbx_session *s, int sdfd, int ufd,
                           const struct esbx_changeset *cs, const struct esbx_upstream *up,
                           const char *head, struct esbx_publish_result *r,
                           struct esbx_rebase_plan **out, esbx_error_t *err);
/* Once the session is unmounted: drop the copy-ups of SAME, move the
   merges into the upper directory.  */
int esbx_rebase_plan_apply (struct esbx_rebase_plan *p, const struct esbx_changeset *same,
                            esbx_error_t *err);
/* The unmerged entries after the rebase (a new array), and the paths
   merged cleanly (taken, NULL-terminated).  */
json_t *esbx_rebase_plan_entries (struct esbx_rebase_plan *p);
char **esbx_rebase_plan_merged (struct esbx_rebase_plan *p);
/* Remove what was not applied and free P.  */
void esbx_rebase_plan_free (struct esbx_rebase_plan *p);
/* For publish: R's conflicts get their kind and whether rebase would leave
   them for a person; nothing is merged or written.  */
int esbx_rebase_classify (esbx_store_t *store, const struct esbx_session *s, int ufd,
                          const struct esbx_changeset *cs, const struct esbx_upstream *up,
                          const char *head, struct esbx_publish_result *r, esbx_error_t *err);

/* Paths a rebase left for a person (unmerged.c): entries of the session's
   record, with the three versions of each in sessions/S/unmerged/.  */
#define ESBX_UNMERGED_DIR "unmerged"
/* A new entry: {"path", "kind", "layer", "session", "id", "base", "ours",
   "theirs"}, the sides null until kept.  */
json_t *esbx_unmerged_new (const char *path, enum esbx_conflict_kind kind, const char *layer,
                           const char *session, int64_t id);
/* The entries of RECORD as a new array (a record's older string entries
   become content entries without kept versions).  */
json_t *esbx_unmerged_entries (const json_t *record);
/* An id no entry of ENTRIES has.  */
int64_t esbx_unmerged_next_id (const json_t *entries);
/* Keep SIDE of ENTRY in the session directory SDFD: a regular file's
   content read from FD, or a symlink's TARGET; TYPE ("file", "symlink",
   "directory" or NULL: absent) goes into the entry.  */
int esbx_unmerged_keep (int sdfd, json_t *entry, enum esbx_side side, int fd, const char *target,
                        const char *type, esbx_error_t *err);
/* Is ENTRY resolved in the upper UFD?  Content entries once the file has
   no marker line; other kinds only by esbx_session_unmerged_resolve.  */
bool esbx_unmerged_resolved (int ufd, const json_t *entry);
/* Remove the kept versions of entries not in KEEP (and the directory once
   KEEP is empty).  */
void esbx_unmerged_prune (int sdfd, const json_t *keep);
/* Refused (ESBX_ERR_UNMERGED, R->unmerged filled) while S has entries not
   resolved in UFD.  */
int esbx_unmerged_check (const struct esbx_session *s, int ufd, struct esbx_publish_result *r,
                         esbx_error_t *err);

/* A layer being written under projects/P/tmp (layerwrite.c).  */
struct esbx_staged
{
  char *rel;  /* relative to the store root */
  int lockfd; /* keeps gc away */
};
/* Copy the entries of CS from SRCFD (a session's upper; -1 for an empty
   layer) into a staged layer; sha256 and size in CS are updated from what
   was copied.  */
int esbx_layer_stage (esbx_store_t *store, const char *project, int srcfd,
                      struct esbx_changeset *cs, struct esbx_staged *out, esbx_error_t *err);
void esbx_layer_unstage (esbx_store_t *store, struct esbx_staged *st);
/* The directories of a staged layer that only hold its changes (no
   change of their own) take the mode and owner they have at HEAD, the view
   the layer lands on: the session's copies of them are as its base had
   them, and the top layer's directory is what a view shows.  *CHANGED
   (when not NULL) says whether one had to.  */
int esbx_layer_adopt_parents (esbx_store_t *store, const char *project, struct esbx_staged *st,
                              const struct esbx_changeset *cs, const char *head, bool *changed,
                              esbx_error_t *err);
/* Make a diff filled by other means than esbx_layer_stage (imports,
   squash) durable: one syncfs of the store's filesystem.  */
int esbx_layer_sync (int diffd, esbx_error_t *err);
/* Name layer L for the stack IDS[0..N) it goes on (parent, index, the
   creation time when it has none): its id, from the record without the id
   and the git commit; returns the record as it is written (*LEN bytes).  */
char *esbx_layer_name (struct esbx_layer *l, char *const *ids, size_t n, size_t *len);
/* With the project lock held and IDS the current stack: name the layer,
   write its record, install it and move the head.  L->changes must be the
   staged change set.  */
int esbx_layer_commit (esbx_store_t *store, const char *project, struct esbx_staged *st,
                       struct esbx_layer *l, char **ids, size_t n, esbx_error_t *err);
/* The same without moving the head: the layer is named on IDS, its record
   written and it is installed in layers/ (the merge queue's candidates).  */
int esbx_layer_install (esbx_store_t *store, const char *project, struct esbx_staged *st,
                        struct esbx_layer *l, char **ids, size_t n, esbx_error_t *err);
/* Copy the upper directory (or overlay diff) SRC as it is, whiteouts and
   opaque directories included, into the empty directory DST
   (snapshot.c).  */
int esbx_upper_copy (int src, int dst, esbx_error_t *err);

/* PROJECT is not in this store: pull it when the store has a remote and
   etcd a head for it (remote_fetch.c); 0 also when it has none.  */
int esbx_remote_pull_absent (esbx_store_t *store, const char *project, esbx_error_t *err);

/* A publish under way (publish.c; layerstore.h has its steps): the
   session locked and loaded, its change set scanned and staged as LAYER.  */
struct esbx_publish
{
  esbx_store_t *store;
  char *name;
  char *message; /* NULL: none given */
  struct esbx_session *s;
  int slock;
  int ufd; /* what was scanned: the upper, or a fork's view */
  struct esbx_staged staged;
  struct esbx_layer layer;
  struct esbx_changeset ignored;
  bool empty; /* nothing to publish */
  bool git;   /* a git project's: the layer is a commit too */
};
/* R's conflicts (against UP, the layers up to IDS[N - 1]) refuse P: their
   kinds told, counted, the error made.  0 when there are none.  */
int esbx_publish_refuse (struct esbx_publish *p, char **ids, size_t n,
                         const struct esbx_upstream *up, struct esbx_publish_result *r,
                         esbx_error_t *err);

/* Lifetimes (lifetime.c): check the options, then write ttl, idle_ttl and
   on_expiry (PROJECT's defaults where the options have none) in RECORD.  */
int esbx_lifetime_check (const struct esbx_session_opts *o, esbx_error_t *err);
int esbx_lifetime_record (esbx_store_t *store, const char *project,
                          const struct esbx_session_opts *o, json_t *record, esbx_error_t *err);

/* The content digest of the tree beneath DIRFD (tree_digest.c), which
   keys --rootfs images.  */
int esbx_tree_digest_at (int dirfd, char out[ESBX_SHA256_HEX_LEN + 1], esbx_error_t *err);

/* Resource defaults (session_defaults.c): where O has no memory, pids,
   tmpfs or shm size, the store's ROOT/defaults.conf value, else the
   built-in one (memory and pids may end 0: unlimited).  */
int esbx_session_defaults_apply (esbx_store_t *store, struct esbx_session_opts *o,
                                 esbx_error_t *err);

/* Network defaults (network_defaults.c): where O names no network, the
   project's; where the network is egress and O names no allow-list, the
   project's egress allow-list.  O's strings then point into D, which the
   caller clears.  */
struct esbx_network_defaults
{
  json_t *record;
  char **allow; /* borrows the strings of RECORD */
};
int esbx_network_defaults_apply (esbx_store_t *store, const char *project,
                                 struct esbx_session_opts *o, struct esbx_network_defaults *d,
                                 esbx_error_t *err);
void esbx_network_defaults_clear (struct esbx_network_defaults *d);

/* Loop devices (loop.c).  NULL, or why this host cannot make them.  */
char *esbx_loop_unavailable (void);
/* A loop device over the image FD (opened read-write): the one already
   bound to that file when there is one, else a free one with autoclear.
   Returns its open fd (closing it unbinds a new device that was not
   mounted meanwhile) and its path in *DEV.  */
int esbx_loop_attach (int fd, char **dev, esbx_error_t *err);
/* Unbind the device bound to the file FD, unless a mount still uses it.  */
void esbx_loop_detach_file (int fd);
/* Unbind the devices over files beneath PREFIX that no mount uses (and
   whose file nobody holds the flock of), saying so on REPORT.  */
int esbx_loop_detach_unused (const char *prefix, FILE *report, esbx_error_t *err);

/* Sessions' own disks (session_disk.c).  An error unless this host can
   make a disk of BYTES (loop devices, mkfs.ext4).  */
int esbx_disk_check_host (int64_t bytes, esbx_error_t *err);
/* Where O names no disk: its project's or the store's default; then the
   host checked for it (disk_defaults.c).  */
int esbx_disk_defaults_apply (esbx_store_t *store, const char *project, struct esbx_session_opts *o,
                              esbx_error_t *err);
/* Make and mount the disk of a session being built in DFD (absolute DIR),
   its upper/ and work/ directories there already: DIR/upper becomes the
   disk's.  */
int esbx_session_disk_make (int dfd, const char *dir, int64_t bytes, esbx_error_t *err);
/* Mount S's disk where it is not (after a reboot); 0 at once for a session
   without one.  Everything that reads an upper calls it first.  */
int esbx_session_disk_mount (esbx_store_t *store, const struct esbx_session *s, esbx_error_t *err);
/* Unmount session NAME's disk (lazily where busy): *LOCK receives the
   image's flock (-1 without a disk), which the caller holds until the
   session's directory is moved away, so nobody mounts it again
   meanwhile.  */
int esbx_session_disk_unmount (esbx_store_t *store, const char *name, int *lock, esbx_error_t *err);
/* Best effort, for a session directory DIR being removed.  */
void esbx_session_disk_unmount_dir (const char *dir);
/* ROOT/sessions/S/disk, the mount holding S's upper and work directories;
   NULL when S has no disk.  */
char *esbx_session_disk_dir (esbx_store_t *store, const struct esbx_session *s);
/* Bytes the image of session directory REL (beneath DIRFD) takes on the
   store's filesystem; 0 without one.  */
uint64_t esbx_session_disk_allocated_at (int dirfd, const char *rel);
/* {"limit", "size", "mounted", "used", "available", "allocated"}, or null.  */
json_t *esbx_session_disk_json (esbx_store_t *store, const struct esbx_session *s);
/* gc: unbind the loop devices of the store's images no mount uses.  */
int esbx_session_disk_gc (esbx_store_t *store, FILE *report, esbx_error_t *err);
/* renameat, or where FROM and TO are on different filesystems (an upper on
   a disk of its own) a copy of the regular file FROM renamed into place
   with its owner and mode, then FROM removed.  */
int esbx_move_file_at (int fromfd, const char *from, int tofd, const char *to, esbx_error_t *err);

/* Random bytes of a session id: 32 hex digits.  */
#define ESBX_SESSION_ID_BYTES 16

/* Snapshot records (snapshot_record.c).  */
struct strv;
/* "projects/PROJECT/snapshots/NAME", relative to the store's root.  */
char *esbx_snapshot_rel (const char *project, const char *name);
/* The project holding snapshot NAME; an error that says so when none does.  */
int esbx_snapshot_find_project (esbx_store_t *store, const char *name, char **project,
                                esbx_error_t *err);
/* The record of snapshot NAME of PROJECT (it has a base).  */
json_t *esbx_snapshot_load_record (esbx_store_t *store, const char *project, const char *name,
                                   esbx_error_t *err);
/* The base layer of snapshot NAME of PROJECT.  */
int esbx_snapshot_resolve (esbx_store_t *store, const char *project, const char *name, char **base,
                           esbx_error_t *err);
/* Append the diff directories of snapshot NAME and its parents, bottom to
   top, to OUT: the lower layers above the base of a session made from it.  */
int esbx_snapshot_lowers (esbx_store_t *store, const char *project, const char *name,
                          struct strv *out, esbx_error_t *err);

/* The ids of "frozen" of RECORD (a session's, a snapshot's, a trash
   entry's) in *IDS, NULL-terminated, or NULL when it has none; -1 when one
   is not an id.  */
int esbx_frozen_ids (const json_t *record, char ***ids);
/* The lower layers over the base of session S, bottom to top, appended to
   OUT: its frozen layers, or the diffs of the snapshot it was made from
   (a store from before frozen layers).  */
int esbx_session_frozen_lowers (esbx_store_t *store, const struct esbx_session *s, struct strv *out,
                                esbx_error_t *err);
/* Whether S stacks anything over its base besides its upper.  */
bool esbx_session_has_frozen (const struct esbx_session *s);

/* Frozen layers (frozen.c).  */
/* Make an empty frozen layer of PROJECT for SESSION: *ID, its diff/ empty,
   owned and moded as the directory MODEL (an fd) is.  */
int esbx_frozen_make (esbx_store_t *store, const char *project, const char *session, int model,
                      char **id, esbx_error_t *err);
/* Remove the frozen layers of PROJECT that no session, snapshot or trash
   entry names; the caller holds the project lock.  */
int esbx_frozen_gc (esbx_store_t *store, const char *project, FILE *report, esbx_error_t *err);

/* Snapshots (snapshot.c).  */
/* Whether a snapshot of PROJECT builds on LAYER (true when unknown).  */
bool esbx_snapshot_uses_layer (esbx_store_t *store, const char *project, const char *layer);
/* The private state of session S made from a snapshot, as one upper
   directory: the snapshots' diffs and its upper merged (hard links) in a
   locked temp dir *PATH (*LOCKFD keeps gc away).  Returns its fd.  */
int esbx_snapshot_view (esbx_store_t *store, const struct esbx_session *s, char **path, int *lockfd,
                        esbx_error_t *err);
/* Give fork S (unmounted, its lock held) an upper of its own: its frozen
   layers copied beneath what it wrote, so that it stacks its base alone,
   as a session never forked (rebase writes into the upper).  Costs a copy
   of what the snapshot holds.  */
int esbx_session_flatten (esbx_store_t *store, struct esbx_session *s, esbx_error_t *err);

#endif
