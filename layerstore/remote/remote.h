/* liblayerstore: sharing a project through an OCI distribution registry
   (the layers) and etcd (the head); docs/SCALE-OUT.md is the protocol.
   Shared by registry.c, etcd.c and the remote_*.c files only.  */
#ifndef ESBX_LAYERSTORE_REMOTE_H
#define ESBX_LAYERSTORE_REMOTE_H

#include "http_client.h"
#include "internal.h"

#define ESBX_OCI_MANIFEST        "application/vnd.oci.image.manifest.v1+json"
#define ESBX_OCI_CONFIG          "application/vnd.oci.image.config.v1+json"
#define ESBX_OCI_LAYER           "application/vnd.oci.image.layer.v1.tar"
#define ESBX_OCI_LAYER_GZ        "application/vnd.oci.image.layer.v1.tar+gzip"
#define ESBX_ANNOT_LAYER         "io.esbx.layer"
#define ESBX_ANNOT_RECORD        "io.esbx.record"
#define ESBX_ANNOT_RECORD_CONFIG "io.esbx.record-config"
#define ESBX_ANNOT_DIFF_ID       "io.esbx.diff-id"
#define ESBX_CONFIG_RECORD       "io.esbx.record"
#define ESBX_SNAPSHOT_TYPE       "application/vnd.esbx.snapshot.v1+json"
#define ESBX_ANNOT_SNAPSHOT      "io.esbx.snapshot"
#define ESBX_SNAPSHOT_TAG_PREFIX "snap."

/* One repository of a registry: BASE is scheme://host[:port], REPO the
   path prefix of the remote's URL plus the project's name.  */
struct esbx_registry
{
  char *base;
  char *repo;
  char *shown;       /* the remote's URL as configured, for messages */
  char *credentials; /* the token file's line */
  char *token;       /* a bearer token of the registry's realm (registry_auth.c) */
  struct esbx_http_auth auth;
  bool gzip;    /* layer blobs pushed are gzip-compressed */
  char *upload; /* an upload started ahead (esbx_registry_start_upload) */
};
struct esbx_remote;
/* REMOTE's registry for PROJECT, with its CA, client certificate and
   credentials (read from the token file now); RM outlives R.  */
int esbx_registry_open (const struct esbx_remote *rm, const char *project, struct esbx_registry *r,
                        esbx_error_t *err);
void esbx_registry_close (struct esbx_registry *r);
/* Send RQ to R's registry with R's credentials and RS its answer; one
   answered 401 with a Bearer challenge is sent again with a token of the
   challenge's realm (registry_auth.c).  Fails when no answer came, the
   realm gave no token or the registry refused the token.  */
int esbx_registry_send (struct esbx_registry *r, struct esbx_http_request *rq,
                        struct esbx_http_response *rs, esbx_error_t *err);
void esbx_registry_forget_token (struct esbx_registry *r);
/* The credentials a request of R carries now: the token R has (or the
   process's cache has for R's repository), else the token file's.  */
void esbx_registry_auth_now (struct esbx_registry *r, struct esbx_http_auth *auth);
/* Whether RS is a 401 with a Bearer challenge (a token would do).  */
bool esbx_registry_challenged (const struct esbx_http_response *rs);
/* Flags of the pushes below.  ESBX_PUSH_NEW: the blobs are new (a
   publish's layer, record and config, named by content nobody pushed
   yet), so no HEAD asks whether the registry has them first.  */
#define ESBX_PUSH_NEW 1u
/* Push the blob DIGEST ("sha256:HEX") from FD or from BUF/LEN unless the
   registry has it.  */
int esbx_registry_push_blob_fd (struct esbx_registry *r, const char *digest, int fd, unsigned flags,
                                esbx_error_t *err);
int esbx_registry_push_blob (struct esbx_registry *r, const char *digest, const void *buf,
                             size_t len, unsigned flags, esbx_error_t *err);
/* Start an upload on R now (the POST of a blob push), for R's next push
   of a new blob, which then is one request: a publish starts its uploads
   while it still scans and checks.  */
int esbx_registry_start_upload (struct esbx_registry *r, esbx_error_t *err);
/* The filesystem driver of docker-registry rewrites a manifest's blob in
   place when the same manifest is put again (another host moving tag
   `head`): a read at that moment gets an error or a torn body.  Reads are
   verified, so they are simply tried again: this many times, with
   esbx_registry_read_pause (ATTEMPT) after a failed ATTEMPT (1, 2...).  */
#define ESBX_REGISTRY_READ_ATTEMPTS 4
void esbx_registry_read_pause (int attempt);
/* Whether a read that failed with E on ATTEMPT is tried again: not after
   the last attempt, nor when the registry or its realm refused the
   credentials (ESBX_ERR_FORBIDDEN: asking again changes nothing).  */
bool esbx_registry_read_again (const esbx_error_t e, int attempt);
/* One blob of esbx_registry_get_blobs: into FD (truncated first) or, when
   FD < 0, into BUF/LEN (the caller frees BUF).  */
struct esbx_registry_blob
{
  const char *digest;
  uint64_t size; /* > 0: the size its descriptor gives; a longer answer is refused */
  int fd;
  char *buf;
  size_t len;
};
/* Download the N blobs B at once, at most ESBX_REGISTRY_PARALLEL
   transfers at a time, each verified against its digest before it is
   kept; a failed one is tried again as every read.  Fails with the error
   of the first blob that could not be read (registry_fetch.c).  */
#define ESBX_REGISTRY_PARALLEL 6
int esbx_registry_get_blobs (struct esbx_registry *r, struct esbx_registry_blob *b, size_t n,
                             esbx_error_t *err);
/* The answer RS to a GET of blob DIGEST checked (status 200, digest):
   rewound in FD, or RS's body moved to *BUF, *LEN.  */
int esbx_registry_blob_answer (struct esbx_registry *r, const char *digest,
                               struct esbx_http_response *rs, int fd, char **buf, size_t *len,
                               esbx_error_t *err);
int esbx_registry_put_manifest (struct esbx_registry *r, const char *tag, const char *body,
                                size_t len, esbx_error_t *err);
/* Delete the manifest DIGEST (and so the tags naming it); one already gone
   is not an error.  A registry that does not delete (docker-registry
   without storage.delete.enabled) answers 405: an error (ESBX_ERR_FORBIDDEN)
   that says so.  */
int esbx_registry_delete_manifest (struct esbx_registry *r, const char *digest, esbx_error_t *err);
/* Whether DIGEST is "sha256:" and 64 lower-case hex digits: digests a
   manifest or etcd names go into URLs and are compared as text.  */
bool esbx_registry_digest_valid (const char *digest);
/* The manifest REF (tag or digest), verified against REF when a digest.  */
int esbx_registry_get_manifest (struct esbx_registry *r, const char *ref, json_t **out,
                                esbx_error_t *err);
/* The same, and its bytes in *BODY (*LEN).  */
int esbx_registry_get_manifest_body (struct esbx_registry *r, const char *ref, json_t **out,
                                     char **body, size_t *len, esbx_error_t *err);

/* etcd's v3 JSON gateway at URL (etcd.c).  */
struct esbx_etcd_kv
{
  char *value; /* NULL: no such key */
  size_t len;
  int64_t mod_revision; /* 0 without the key */
};
void esbx_etcd_kv_free (struct esbx_etcd_kv *kv);
int esbx_etcd_get (const struct esbx_remote *rm, const char *key, struct esbx_etcd_kv *kv,
                   esbx_error_t *err);
/* Put KEY = VALUE if KEY's mod_revision is still MOD_REVISION (0: KEY does
   not exist); *WON says whether it was.  */
int esbx_etcd_put_if (const struct esbx_remote *rm, const char *key, const char *value,
                      int64_t mod_revision, bool *won, esbx_error_t *err);
/* Delete KEY if its mod_revision is still MOD_REVISION; *DONE says
   whether it was.  */
int esbx_etcd_delete_if (const struct esbx_remote *rm, const char *key, int64_t mod_revision,
                         bool *done, esbx_error_t *err);
/* FN (VALUE, LEN, DATA) for the value of each key under PREFIX until it
   returns true; *FOUND says whether it did.  */
int esbx_etcd_any_under (const struct esbx_remote *rm, const char *prefix,
                         bool (*fn) (const char *value, size_t len, void *data), void *data,
                         bool *found, esbx_error_t *err);
/* ERR of a request to etcd without a client certificate that etcd
   refused for the lack of one: say so.  */
void esbx_etcd_hint (const struct esbx_remote *rm, esbx_error_t *err);
/* The gateway's encodings: base64 (owned, NUL-terminated) and 64-bit
   numbers as strings.  */
char *esbx_etcd_b64 (const char *s, size_t len);
int esbx_etcd_unb64 (const char *s, char **out, size_t *len);
bool esbx_etcd_int64 (const json_t *obj, const char *key, int64_t *out);

/* The store's remote (remote.c): ROOT/remote.json, $ESBX_REGISTRY and
   $ESBX_ETCD winning.  */
struct esbx_remote
{
  char *registry;
  char *etcd;
  char *ca; /* absolute paths, or NULL */
  char *cert;
  char *key;
  char *token_file; /* the registry's credentials */
  /* Read from TOKEN_FILE once, when the remote is loaded: its first line
     ("user:password" or a bearer token), or why it could not be read
     (said when a registry is opened).  */
  char *credentials;
  char *credentials_error;
  bool uncompressed; /* "compression": "none" */
  struct esbx_http_auth etcd_auth;
};
int esbx_remote_load (esbx_store_t *store, struct esbx_remote *rm, esbx_error_t *err);
void esbx_remote_free (struct esbx_remote *rm);
/* Write ROOT/projects/P/remote, the marker of a shared project.  */
int esbx_remote_mark_shared (esbx_store_t *store, const char *project, esbx_error_t *err);

/* A project's head in etcd: key esbx/projects/P/head, value
   {"layers": [ids bottom to top], "manifest": digest of the top's}.  */
struct esbx_remote_head
{
  bool exists;
  char **ids;
  size_t n;
  char *manifest;
  int64_t mod_revision; /* 0 when the key does not exist */
};
char *esbx_remote_head_key (const char *project);
/* A pushed snapshot's record in etcd (esbx/projects/P/snapshots/NAME:
   {"manifest", "session", "parent", "created"}), the last one pushed of a
   session (esbx/projects/P/sessions/S/snapshot: {"snapshot", "manifest",
   "created"}) and the tag of its manifest in the registry (snap.NAME,
   or snap. and the sha256 of a name too long for a tag).  */
char *esbx_remote_snapshot_key (const char *project, const char *name);
char *esbx_remote_last_snapshot_key (const char *project, const char *session);
char *esbx_remote_snapshot_tag (const char *name);
/* The manifest digest etcd's record of snapshot NAME of PROJECT names:
 *MANIFEST NULL when there is no record.  */
int esbx_remote_snapshot_manifest (const struct esbx_remote *rm, const char *project,
                                   const char *name, char **manifest, esbx_error_t *err);
int esbx_remote_head_read (const struct esbx_remote *rm, const char *project,
                           struct esbx_remote_head *h, esbx_error_t *err);
void esbx_remote_head_free (struct esbx_remote_head *h);
char *esbx_remote_head_value (char *const *ids, size_t n, const char *manifest);

/* A layer as a manifest lists it: its blob and the annotations naming its
   id and where its record is: in the config of the manifest that added
   the layer (RECORD_IN_CONFIG), or, as layers pushed before that form
   were, a record blob of its own.  */
struct esbx_remote_desc
{
  char *id;
  char *digest; /* "sha256:..." of the layer blob, compressed or not */
  int64_t size;
  bool gzip;
  char *diff_id; /* "sha256:..." of the layer tar */
  char *record;  /* "sha256:..." of that config, or of record.json */
  bool record_in_config;
};
int esbx_remote_descs_parse (const json_t *manifest, struct esbx_remote_desc **out, size_t *n,
                             esbx_error_t *err);
void esbx_remote_descs_free (struct esbx_remote_desc *d, size_t n);
/* The image manifest of the stack D[0..N): its bytes and digest.  */
struct esbx_remote_manifest
{
  char *body;
  size_t len;
  char *digest;
};
void esbx_remote_manifest_free (struct esbx_remote_manifest *m);
/* Build the config and the image manifest of the stack D[0..N) into M and
   push the config; the manifest is put by the caller (it names blobs that
   must be in the registry first) (remote_push.c).  The config carries
   RECORD (LEN bytes), the top layer's record.json: D[N - 1].record
   becomes the config's digest.  */
int esbx_remote_push_config (struct esbx_registry *reg, struct esbx_remote_desc *d, size_t n,
                             const char *record, size_t len, unsigned flags,
                             struct esbx_remote_manifest *m, esbx_error_t *err);
/* The same and put the manifest, tagged TAG.  */
int esbx_remote_push_manifest (struct esbx_registry *reg, struct esbx_remote_desc *d, size_t n,
                               const char *record, size_t len, const char *tag,
                               struct esbx_remote_manifest *m, esbx_error_t *err);
/* The record.json a config carries: *TEXT (*LEN bytes, allocated), or an
   error when CONFIG (CLEN bytes) has none.  */
int esbx_remote_config_record (const char *config, size_t clen, char **text, size_t *len,
                               esbx_error_t *err);
/* Export the layer diff DIFFD to TMP/layer.tar and gzip it unless the
   remote says none: D->digest, D->size, D->gzip and D->diff_id are
   filled; returns an fd of the blob to push.  */
int esbx_remote_make_diff (const struct esbx_registry *reg, int diffd, const char *tmp,
                           struct esbx_remote_desc *d, esbx_error_t *err);
/* The same, and push the blob.  */
int esbx_remote_push_diff (struct esbx_registry *reg, int diffd, const char *tmp,
                           struct esbx_remote_desc *d, unsigned flags, esbx_error_t *err);

/* The last head manifest of PROJECT this store pushed or read
   (manifest_cache.c): kept (best-effort), and read back for DIGEST, from
   the store when the kept one is DIGEST's, else from the registry (and
   kept).  */
void esbx_remote_manifest_keep (esbx_store_t *store, const char *project, const char *body,
                                size_t len);
int esbx_remote_get_manifest (esbx_store_t *store, struct esbx_registry *reg, const char *project,
                              const char *digest, json_t **out, esbx_error_t *err);

/* IN's bytes gzip-compressed into OUT, the same for the same input
   (gzip.c).  */
int esbx_gzip_fd (int in, int out, esbx_error_t *err);

/* With the project lock held: download the layers D[FROM..TO) that are
   not installed into TMP (a locked temp dir), all blobs at once, and
   install them (remote_fetch.c); *FETCHED: how many were.  */
int esbx_remote_fetch_layers (esbx_store_t *store, struct esbx_registry *reg, const char *project,
                              const char *tmp, const struct esbx_remote_desc *d, size_t from,
                              size_t to, size_t *fetched, esbx_error_t *err);
/* With the project lock held: fetch the layers of H the local stack lacks
   and make the stack H (the local one must be a prefix of it).  */
int esbx_remote_sync_locked (esbx_store_t *store, struct esbx_registry *reg, const char *project,
                             const struct esbx_remote_head *h, size_t *fetched, esbx_error_t *err);

#endif
