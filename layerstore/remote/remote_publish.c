/* liblayerstore: publish of a session of a shared project
 * (docs/SCALE-OUT.md, "publish").  The staged layer's tar is pushed once;
 * then, under the project lock, each attempt brings the local stack to
 * the etcd head, runs the conflict check of local publish, names the layer
 * on that head, pushes its config (which carries its record) and
 * manifest, and moves the head with
 * one etcd transaction that compares the key's mod_revision.  Only the
 * winner installs the layer locally; a loser starts over from the new
 * head.  */
#include "remote.h"
#include "archive_load.h"
#include "failpoint.h"
#include "fs.h"
#include "hash.h"
#include "log.h"
#include "text.h"
#include "utils.h"

#include <fcntl.h>
#include "thread.h"

#include <pthread.h>
#include <string.h>

/* Publishers of one project racing through etcd: each attempt that loses
   sees at least one more layer, so this bounds the layers published by
   others during one publish, not the time.  */
#define MAX_ATTEMPTS 64

/* Work run beside the publish's own, on a thread (the registry writes and
   syncs each object: several at a time cost little more than one), each
   on its registry handle, opened by its first run and kept for the next
   (a handle's token may change while it is used).  */
enum beside_kind
{
  BESIDE_START, /* start an upload for the handle's next push */
  BESIDE_MAKE,  /* make the layer's blob from DIFFD in TMP: DESC, FD */
  BESIDE_BLOB,  /* push the blob DIGEST: from FD, or TEXT/LEN */
  BESIDE_TAG,   /* put the manifest TEXT/LEN as TAG */
};

struct beside
{
  struct esbx_thread thread;
  enum beside_kind kind;
  const struct esbx_remote *rm;
  const char *project;
  struct esbx_registry reg;
  bool open;
  int diffd;
  const char *tmp;
  struct esbx_remote_desc *desc;
  const char *digest;
  int fd;
  const char *text;
  size_t len;
  const char *tag;
  int ret;
  esbx_error_t err;
};

static void *
beside_main (void *arg)
{
  struct beside *b = arg;

  b->ret = 0;
  esbx_error_free (&b->err);
  if (!b->open)
    {
      b->ret = esbx_registry_open (b->rm, b->project, &b->reg, &b->err);
      b->open = b->ret == 0;
    }
  if (b->ret == 0)
    switch (b->kind)
      {
      case BESIDE_START:
        b->ret = esbx_registry_start_upload (&b->reg, &b->err);
        break;
      case BESIDE_MAKE:
        b->fd = esbx_remote_make_diff (&b->reg, b->diffd, b->tmp, b->desc, &b->err);
        b->ret = b->fd < 0 ? -1 : 0;
        break;
      case BESIDE_BLOB:
        b->ret = b->fd >= 0 ? esbx_registry_push_blob_fd (&b->reg, b->digest, b->fd, ESBX_PUSH_NEW,
                                                          &b->err)
                            : esbx_registry_push_blob (&b->reg, b->digest, b->text, b->len,
                                                       ESBX_PUSH_NEW, &b->err);
        break;
      case BESIDE_TAG:
        b->ret = esbx_registry_put_manifest (&b->reg, b->tag, b->text, b->len, &b->err);
        break;
      }
  return NULL;
}

/* Start B as KIND; when no thread can be made, it runs here and now.  */
static void
beside_start (struct beside *b, enum beside_kind kind)
{
  b->kind = kind;
  esbx_thread_start_or_run (&b->thread, beside_main, b);
}

/* Wait for B to end; its result stays for beside_wait.  */
static void
beside_join (struct beside *b)
{
  esbx_thread_join (&b->thread);
}

/* Wait for B and take its result: its error moved to *ERR (once).  */
static int
beside_wait (struct beside *b, esbx_error_t *err)
{
  beside_join (b);
  if (b->ret < 0 && *err == NULL)
    {
      if (b->err)
        *err = steal_pointer (&b->err);
      else
        esbx_make_error (err, 0, "registry `%s`: an earlier request failed", b->rm->registry);
    }
  esbx_error_free (&b->err);
  return b->ret;
}

/* Wait for an upload started ahead: one that failed is started again by
   the push, which says why it fails.  */
static void
beside_wait_start (struct beside *b)
{
  esbx_error_t ignored = NULL;

  if (beside_wait (b, &ignored) < 0)
    esbx_error_free (&ignored);
}

static void
beside_close (struct beside *b)
{
  beside_join (b);
  esbx_error_free (&b->err);
  if (b->open)
    esbx_registry_close (&b->reg);
  b->open = false;
}

/* What runs beside a publish: the layer's blob made (MAKE) and pushed
   (LAYER), and the config, which carries the layer's record (CFG), each on
   the handle it started its upload on; the tag `head` is moved on LAYER's
   once the publish won.  */
struct besides
{
  struct beside make, layer, cfg;
  bool layer_pushed;
};
#define N_BESIDES 3

/* The members of BS into EACH.  */
static void
besides_list (struct besides *bs, struct beside *each[N_BESIDES])
{
  each[0] = &bs->make;
  each[1] = &bs->layer;
  each[2] = &bs->cfg;
}

/* No thread beside a sync, which forks the importer.  */
static void
besides_join (struct besides *bs)
{
  struct beside *each[N_BESIDES];
  size_t j;

  besides_list (bs, each);
  for (j = 0; j < N_BESIDES; j++)
    beside_join (each[j]);
}

/* What a publish needs from the remote before it can push, begun on a
   thread when the publish starts, beside its scan and staging (the
   remote's settings are read before, so that the layer's blob can be made
   while the thread still runs): libcurl and libarchive loaded, the uploads
   started, and the head's manifest read (a publish names the layer on
   it).  Whatever fails here is done again, and reported, by the publish
   itself.  */
struct esbx_remote_warm
{
  struct esbx_thread thread;
  bool joined;
  esbx_store_t *store;
  char *project;
  struct esbx_remote rm;
  bool loaded; /* RM is */
  struct besides bs;
  char *digest; /* of MANIFEST, the head's when it was read */
  json_t *manifest;
  struct esbx_remote_head head; /* read ahead, for the first attempt */
  bool have_head;
  char *tag;    /* the manifest tag `head` is being moved to, by BS.layer */
  bool tagging; /* BS.layer runs until esbx_remote_warm_free */
};

static void
besides_init (struct besides *bs, const struct esbx_remote *rm, const char *project)
{
  struct beside *each[N_BESIDES];
  size_t j;

  memset (bs, 0, sizeof *bs);
  besides_list (bs, each);
  for (j = 0; j < N_BESIDES; j++)
    {
      each[j]->rm = rm;
      each[j]->project = project;
      each[j]->fd = -1;
    }
}

static void
besides_close (struct besides *bs)
{
  struct beside *each[N_BESIDES];
  size_t j;

  besides_list (bs, each);
  for (j = 0; j < N_BESIDES; j++)
    beside_close (each[j]);
  if (bs->make.fd >= 0)
    close (bs->make.fd);
  bs->make.fd = -1;
}

static void *
warm_main (void *arg)
{
  struct esbx_remote_warm *w = arg;
  struct esbx_remote_head h = { 0 };
  struct esbx_registry reg = { 0 };
  esbx_error_t ignored = NULL;

  if (!w->loaded)
    return NULL;
  beside_start (&w->bs.layer, BESIDE_START);
  beside_start (&w->bs.cfg, BESIDE_START);
  if (esbx_archive_load (&ignored) < 0
      || esbx_remote_head_read (&w->rm, w->project, &h, &ignored) < 0 || !h.exists
      || esbx_registry_open (&w->rm, w->project, &reg, &ignored) < 0)
    goto out;
  if (esbx_remote_get_manifest (w->store, &reg, w->project, h.manifest, &w->manifest, &ignored)
      == 0)
    w->digest = xstrdup (h.manifest);
  w->head = h;
  memset (&h, 0, sizeof h);
  w->have_head = true;

out:
  esbx_error_free (&ignored);
  esbx_registry_close (&reg);
  esbx_remote_head_free (&h);
  return NULL;
}

struct esbx_remote_warm *
esbx_remote_warm_start (esbx_store_t *store, const char *project)
{
  struct esbx_remote_warm *w = xmalloc0 (sizeof *w);
  esbx_error_t ignored = NULL;

  w->store = store;
  w->project = xstrdup (project);
  /* The settings are read here (a small file): the layer's blob is made
     from them while the thread may still run.  */
  if (esbx_remote_load (store, &w->rm, &ignored) == 0)
    {
      w->loaded = true;
      besides_init (&w->bs, &w->rm, w->project);
    }
  esbx_error_free (&ignored);
  esbx_thread_start_or_run (&w->thread, warm_main, w);
  return w;
}

/* Wait for W's thread (when it could not start: do its work now).  */
static void
warm_join (struct esbx_remote_warm *w)
{
  if (w->joined)
    return;
  esbx_thread_join (&w->thread);
  w->joined = true;
}

void
esbx_remote_warm_free (struct esbx_remote_warm *w)
{
  if (w == NULL)
    return;
  warm_join (w);
  if (w->tagging)
    {
      esbx_error_t failed = NULL;
      if (beside_wait (&w->bs.layer, &failed) < 0)
        {
          esbx_warn ("publish in project `%s`: tag head: %s", w->project, failed->msg);
          esbx_error_free (&failed);
        }
    }
  if (w->loaded)
    besides_close (&w->bs);
  free (w->tag);
  esbx_remote_free (&w->rm);
  json_free (w->manifest);
  free (w->digest);
  esbx_remote_head_free (&w->head);
  free (w->project);
  free (w);
}

/* Whether the local stack IDS[0..N) is the head H: then no sync is needed
   (a sync forks the importer, which no other thread may run beside).  */
static bool
at_head (char *const *ids, size_t n, const struct esbx_remote_head *h)
{
  size_t i;

  if (n != h->n)
    return false;
  for (i = 0; i < n; i++)
    if (strcmp (ids[i], h->ids[i]) != 0)
      return false;
  return true;
}

/* Push the layer's blob (once) and, beside it, the config of the stack
   D[0..ND), which carries RECORD (LEN bytes); then the image manifest M,
   tagged ID.  */
static int
push_layer (struct besides *bs, const char *id, const char *record, size_t len,
            struct esbx_remote_desc *d, size_t nd, struct esbx_remote_manifest *m,
            esbx_error_t *err)
{
  const struct esbx_remote_desc *mine = &d[nd - 1];
  int k;

  if (!bs->layer_pushed)
    {
      beside_join (&bs->layer);
      bs->layer.digest = mine->digest;
      bs->layer.fd = bs->make.fd;
      beside_start (&bs->layer, BESIDE_BLOB);
    }
  beside_wait_start (&bs->cfg);
  k = esbx_remote_push_config (&bs->cfg.reg, d, nd, record, len, ESBX_PUSH_NEW, m, err);
  if (!bs->layer_pushed && beside_wait (&bs->layer, err) < 0)
    k = -1;
  bs->layer_pushed = k == 0;
  if (k < 0)
    return -1;
  return esbx_registry_put_manifest (&bs->cfg.reg, id, m->body, m->len, err);
}

/* Make the layer's blob again (its directories changed): the one made
   goes, and so does its upload if it was pushed.  */
static int
remake (struct besides *bs, esbx_error_t *err)
{
  if (beside_wait (&bs->make, err) < 0)
    return -1;
  if (bs->make.fd >= 0)
    close (bs->make.fd);
  bs->make.fd = -1;
  beside_start (&bs->make, BESIDE_MAKE);
  if (bs->layer_pushed)
    {
      bs->layer_pushed = false;
      beside_join (&bs->layer);
      beside_start (&bs->layer, BESIDE_START);
    }
  return 0;
}

/* One attempt with the project lock held: 0 committed, 1 conflicts,
   2 lost the race, -1.  */
static int
attempt (esbx_store_t *store, struct esbx_remote_warm *w, struct esbx_registry *reg,
         const struct esbx_session *s, struct esbx_staged *st, struct esbx_layer *l,
         struct esbx_publish_result *r, esbx_error_t *err)
{
  struct esbx_remote_head h = { 0 };
  struct esbx_upstream up = { 0 };
  struct esbx_remote_desc *d = NULL;
  const struct esbx_remote *rm = &w->rm;
  struct besides *bs = &w->bs;
  const struct esbx_remote_desc *mine = bs->make.desc;
  _cleanup_json_ json_t *fetched = NULL;
  json_t *manifest;
  _cleanup_free_ char *record = NULL;
  struct esbx_remote_manifest m = { 0 };
  _cleanup_free_ char *key = NULL, *value = NULL, *id = NULL;
  _cleanup_strv_ char **ids = NULL;
  char **next = NULL;
  size_t n = 0, nd = 0, len;
  bool won = false, changed = false;
  int ret = -1, k;

  if (esbx_project_stack (store, s->project, &ids, &n, err) < 0)
    goto out;
  /* The first attempt takes the head read ahead when the local stack is
     at it: the transaction compares its mod_revision, so a head that moved
     since only loses the race (and the next attempt reads etcd).  */
  if (w->have_head && at_head (ids, n, &w->head))
    {
      h = w->head;
      memset (&w->head, 0, sizeof w->head);
    }
  else if (esbx_remote_head_read (rm, s->project, &h, err) < 0)
    goto out;
  w->have_head = false;
  esbx_remote_head_free (&w->head);
  if (!h.exists)
    {
      esbx_make_error (err, 0, "etcd `%s` has no head for it", rm->etcd);
      goto out;
    }
  if (!at_head (ids, n, &h))
    {
      cleanup_strvp (&ids);
      ids = NULL;
      besides_join (bs);
      if (esbx_remote_sync_locked (store, reg, s->project, &h, NULL, err) < 0
          || esbx_project_stack (store, s->project, &ids, &n, err) < 0)
        goto out;
    }
  if (esbx_upstream_load (store, s->project, s->base, s->published, ids, n, &up, err) < 0)
    goto out;
  esbx_conflicts_find (&l->changes, &up, r);
  if (r->n_conflicts > 0)
    {
      ret = 1;
      goto out;
    }
  /* The layer's directories that only hold its changes were given the
     local head's modes before its blob was made: a head that differs
     there now needs the blob made again.  */
  if (esbx_layer_adopt_parents (store, s->project, st, &l->changes, ids[n - 1], &changed, err) < 0
      || (changed && remake (bs, err) < 0))
    goto out;
  record = esbx_layer_name (l, ids, n, &len);
  id = xstrdup (l->id);
  /* The head's manifest, read ahead unless the head moved since.  */
  manifest = w->manifest;
  if (w->digest == NULL || strcmp (w->digest, h.manifest) != 0)
    {
      if (esbx_remote_get_manifest (store, reg, s->project, h.manifest, &fetched, err) < 0)
        goto out;
      manifest = fetched;
    }
  if (esbx_remote_descs_parse (manifest, &d, &nd, err) < 0)
    goto out;
  /* The layer's blob, made beside all of the above.  */
  if (beside_wait (&bs->make, err) < 0)
    goto out;
  d = xrealloc (d, (nd + 1) * sizeof *d);
  memset (&d[nd], 0, sizeof d[nd]);
  d[nd].id = xstrdup (id);
  d[nd].digest = xstrdup (mine->digest);
  d[nd].size = mine->size;
  d[nd].gzip = mine->gzip;
  d[nd].diff_id = xstrdup (mine->diff_id);
  nd++;
  if (push_layer (bs, id, record, len, d, nd, &m, err) < 0)
    goto out;
  esbx_failpoint ("remote-pushed");
  next = xmalloc ((n + 2) * sizeof *next);
  memcpy (next, ids, n * sizeof *next);
  next[n] = id;
  next[n + 1] = NULL;
  key = esbx_remote_head_key (s->project);
  value = esbx_remote_head_value (next, n + 1, m.digest);
  free (next);
  if (esbx_etcd_put_if (rm, key, value, h.mod_revision, &won, err) < 0)
    goto out;
  if (!won)
    {
      ret = 2;
      goto out;
    }
  esbx_failpoint ("remote-head-moved");
  esbx_remote_manifest_keep (store, s->project, m.body, m.len);
  /* The tag is for people and image tools (etcd is the head): moved
     beside the local commit.  */
  /* It goes on beside the local install and the session's record, and
     is waited for by esbx_remote_warm_free: a failure only warns.  */
  free (w->tag);
  w->tag = xstrndup (m.body, m.len);
  beside_join (&bs->layer);
  bs->layer.tag = "head";
  bs->layer.fd = -1;
  bs->layer.text = w->tag;
  bs->layer.len = m.len;
  beside_start (&bs->layer, BESIDE_TAG);
  w->tagging = true;
  /* esbx_layer_commit names the layer again, from the same fields.  */
  free (l->parent);
  l->parent = NULL;
  k = esbx_layer_commit (store, s->project, st, l, ids, n, err);
  if (k < 0)
    goto out;
  if (strcmp (l->id, id) != 0)
    {
      esbx_make_error (err, 0, "layer named `%s` here and `%s` in the remote head", l->id, id);
      goto out;
    }
  ret = 0;

out:
  esbx_remote_manifest_free (&m);
  esbx_remote_descs_free (d, nd);
  esbx_upstream_free (&up);
  esbx_remote_head_free (&h);
  return ret;
}

/* The layer L staged in ST of session S through the remote: conflict
   check against the remote head, push, etcd transaction, then
   esbx_layer_commit.  0: committed (L->id), 1: conflicts in R, -1.  */
static int
commit (esbx_store_t *store, const struct esbx_session *s, struct esbx_staged *st,
        struct esbx_layer *l, struct esbx_remote_warm *w, struct esbx_publish_result *r,
        esbx_error_t *err)
{
  struct esbx_registry reg = { 0 };
  struct esbx_remote_desc mine = { 0 };
  _cleanup_free_ char *tmp = NULL, *diffrel = NULL;
  _cleanup_close_ int tmpfd = -1;
  _cleanup_close_ int diffd = -1;
  esbx_error_t ignored = NULL;
  _cleanup_strv_ char **local = NULL;
  size_t nlocal = 0;
  int i, k = -1;

  if (!w->loaded)
    {
      /* Why the remote could not be loaded.  */
      struct esbx_remote rm = { 0 };
      if (esbx_remote_load (store, &rm, err) == 0)
        esbx_make_error (err, 0, "the store's remote changed while publishing");
      esbx_remote_free (&rm);
      goto out;
    }
  if (esbx_registry_open (&w->rm, s->project, &reg, err) < 0)
    goto out;
  tmpfd = esbx_store_tmpdir (store, "publish", &tmp, err);
  diffrel = xasprintf ("%s/diff", st->rel);
  if (tmpfd < 0 || (diffd = esbx_open_dir_at (store->rootfd, diffrel, err)) < 0)
    goto out;
  /* The layer's content depends on its parent only where a directory
     holds its changes and nothing of its own (esbx_layer_adopt_parents):
     given the local head's modes, its blob is made once, beside the first
     attempt's etcd read and conflict check, and again only if the remote
     head differs there.  */
  if (esbx_project_stack (store, s->project, &local, &nlocal, err) < 0
      || esbx_layer_adopt_parents (store, s->project, st, &l->changes, local[nlocal - 1], NULL, err)
             < 0)
    goto out;
  w->bs.make.diffd = diffd;
  w->bs.make.tmp = tmp;
  w->bs.make.desc = &mine;
  beside_start (&w->bs.make, BESIDE_MAKE);
  warm_join (w);
  for (i = 0; i < MAX_ATTEMPTS; i++)
    {
      _cleanup_close_ int plock = esbx_project_lock (store, s->project, err);

      if (plock < 0)
        goto out;
      /* Every attempt is named with the time it is made.  */
      free (l->created);
      l->created = esbx_rfc3339_now ();
      k = attempt (store, w, &reg, s, st, l, r, err);
      if (k != 2)
        goto out;
    }
  k = -1;
  esbx_make_error (err, EAGAIN, "the head moved %d times while publishing", MAX_ATTEMPTS);

out:
  /* Before the blob's fd and file go: a conflict may have come first.
     The tag `head` goes on (esbx_remote_warm_free waits for it).  The
     warm thread starts the uploads of BS: it ends first.  */
  warm_join (w);
  if (w->loaded)
    {
      beside_close (&w->bs.make);
      beside_close (&w->bs.cfg);
      if (!w->tagging)
        beside_close (&w->bs.layer);
      if (w->bs.make.fd >= 0)
        close (w->bs.make.fd);
      w->bs.make.fd = -1;
    }
  if (tmp && esbx_rm_rf_at (AT_FDCWD, tmp, &ignored) < 0)
    esbx_error_free (&ignored);
  free (mine.digest);
  free (mine.diff_id);
  esbx_registry_close (&reg);
  return k;
}

int
esbx_remote_publish (struct esbx_publish *p, struct esbx_remote_warm *w,
                     struct esbx_publish_result *r, esbx_error_t *err)
{
  struct esbx_upstream up = { 0 };
  _cleanup_strv_ char **ids = NULL;
  size_t n;
  int k;

  if (p->git)
    return esbx_make_error (err, 0,
                            "publish `%s`: a git project shared through a registry is not "
                            "supported yet",
                            p->name);
  k = commit (p->store, p->s, &p->staged, &p->layer, w, r, err);
  if (k == 0)
    return 0;
  /* The attempt brought the local stack to the remote head: the
     conflicts are told apart from it.  */
  if (k > 0 && (k = esbx_project_stack (p->store, p->s->project, &ids, &n, err)) == 0
      && (k = esbx_upstream_load (p->store, p->s->project, p->s->base, p->s->published, ids, n, &up,
                                  err))
             == 0)
    k = esbx_publish_refuse (p, ids, n, &up, r, err) < 0
            ? -1
            : esbx_make_error (err, 0, "the remote head's conflicts are gone once read");
  esbx_upstream_free (&up);
  if (k < 0 && !(err && *err && (*err)->kind == ESBX_ERR_CONFLICT))
    esbx_error_wrap (err, "publish `%s`", p->name);
  return k < 0 ? -1 : 0;
}
