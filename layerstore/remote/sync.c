/* liblayerstore: bringing a shared project's local stack up to its head
 * in etcd (docs/SCALE-OUT.md, "pull P / sync"): on top of the remote's
 * records (remote.c), the fetch of layers (remote_fetch.c) and esbxd's
 * watch (etcd_watch.c), so that none of them needs another.  */
#include "remote.h"
#include "fs.h"
#include "text.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

int
esbx_remote_sync_locked (esbx_store_t *store, struct esbx_registry *reg, const char *project,
                         const struct esbx_remote_head *h, size_t *fetched, esbx_error_t *err)
{
  _cleanup_strv_ char **ids = NULL;
  _cleanup_json_ json_t *manifest = NULL;
  _cleanup_free_ char *tmp = NULL;
  _cleanup_close_ int tmpfd = -1;
  struct esbx_remote_desc *d = NULL;
  esbx_error_t ignored = NULL;
  size_t n = 0, nd = 0, i;
  int ret = -1;

  if (fetched)
    *fetched = 0;
  if (esbx_project_exists (store, project)
      && esbx_project_stack (store, project, &ids, &n, err) < 0)
    return -1;
  if (n > h->n)
    return esbx_make_error (err, 0,
                            "project `%s`: the local stack (%zu layers) is ahead of the "
                            "remote head (%zu): the histories diverged",
                            project, n, h->n);
  for (i = 0; i < n; i++)
    if (strcmp (ids[i], h->ids[i]) != 0)
      return esbx_make_error (err, 0,
                              "project `%s`: layer %zu is `%s` here and `%s` in the remote "
                              "head: the histories diverged",
                              project, i, ids[i], h->ids[i]);
  if (n == h->n)
    return 0;
  if (esbx_remote_get_manifest (store, reg, project, h->manifest, &manifest, err) < 0
      || esbx_remote_descs_parse (manifest, &d, &nd, err) < 0)
    return esbx_error_wrap (err, "project `%s`", project);
  if (nd != h->n)
    {
      esbx_make_error (err, 0, "project `%s`: the head's manifest has %zu layers, etcd %zu",
                       project, nd, h->n);
      goto out;
    }
  tmpfd = esbx_store_tmpdir (store, "pull", &tmp, err);
  if (tmpfd < 0)
    goto out;
  for (i = n; i < nd; i++)
    {
      if (strcmp (d[i].id, h->ids[i]) != 0)
        {
          esbx_make_error (err, 0,
                           "project `%s`: the head's manifest names layer `%s` where "
                           "etcd has `%s`",
                           project, d[i].id, h->ids[i]);
          goto out;
        }
    }
  if (esbx_remote_fetch_layers (store, reg, project, tmp, d, n, nd, fetched, err) < 0)
    goto out;
  if (esbx_project_write_stack (store, project, h->ids, h->n, err) < 0)
    goto out;
  ret = 0;

out:
  if (tmp && esbx_rm_rf_at (AT_FDCWD, tmp, &ignored) < 0)
    esbx_error_free (&ignored);
  esbx_remote_descs_free (d, nd);
  if (ret < 0)
    esbx_error_wrap (err, "project `%s`", project);
  return ret;
}

int
esbx_remote_sync_unwatched (esbx_store_t *store, const char *project, esbx_error_t *err)
{
  return esbx_remote_watched (store) ? 0 : esbx_remote_sync (store, project, NULL, err);
}

int
esbx_remote_sync (esbx_store_t *store, const char *project, size_t *fetched, esbx_error_t *err)
{
  struct esbx_remote rm = { 0 };
  struct esbx_registry reg = { 0 };
  struct esbx_remote_head h = { 0 };
  _cleanup_close_ int lock = -1;
  int ret = -1;

  if (esbx_remote_load (store, &rm, err) < 0 || esbx_registry_open (&rm, project, &reg, err) < 0)
    goto out;
  if (esbx_remote_head_read (&rm, project, &h, err) < 0)
    goto out;
  if (!h.exists)
    {
      esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0,
                            "project `%s`: no head in etcd `%s` (push it first)", project, rm.etcd);
      goto out;
    }
  lock = esbx_project_lock (store, project, err);
  if (lock < 0)
    goto out;
  ret = esbx_remote_sync_locked (store, &reg, project, &h, fetched, err);

out:
  esbx_remote_head_free (&h);
  esbx_registry_close (&reg);
  esbx_remote_free (&rm);
  return ret;
}

int
esbx_project_pull (esbx_store_t *store, const char *project, size_t *fetched, esbx_error_t *err)
{
  static const char *const subdirs[] = { "layers", "tmp" };
  _cleanup_free_ char *rel = NULL;
  _cleanup_close_ int pfd = -1;
  _cleanup_close_ int lock = -1;
  esbx_error_t ignored = NULL;
  size_t i;

  if (esbx_check_name ("project", project, err) < 0)
    return -1;
  if (esbx_project_exists (store, project))
    {
      if (!esbx_project_is_shared (store, project))
        return esbx_make_error (err, 0,
                                "project pull `%s`: a local project of that name exists and "
                                "is not shared",
                                project);
      if (esbx_remote_sync (store, project, fetched, err) < 0)
        return esbx_error_wrap (err, "project pull");
      return 0;
    }
  rel = esbx_project_rel (project);
  if (mkdirat (store->rootfd, rel, 0711) < 0)
    return esbx_make_error (err, errno, "project pull `%s`: mkdir", project);
  pfd = esbx_open_dir_at (store->rootfd, rel, err);
  /* gc leaves a project directory without a stack alone while its
     creator holds the lock.  */
  if (pfd < 0 || (lock = esbx_project_lock (store, project, err)) < 0)
    goto fail;
  for (i = 0; i < ARRAY_SIZE (subdirs); i++)
    if (mkdirat (pfd, subdirs[i], 0711) < 0)
      {
        esbx_make_error (err, errno, "mkdir `%s`", subdirs[i]);
        goto fail;
      }
  if (esbx_remote_mark_shared (store, project, err) < 0)
    goto fail;
  /* esbx_remote_sync takes the lock again: flock on another open file
     description of the same file would wait for ourselves.  */
  {
    struct esbx_remote rm = { 0 };
    struct esbx_registry reg = { 0 };
    struct esbx_remote_head h = { 0 };
    int r = -1;

    if (esbx_remote_load (store, &rm, err) == 0 && esbx_registry_open (&rm, project, &reg, err) == 0
        && esbx_remote_head_read (&rm, project, &h, err) == 0)
      {
        if (!h.exists)
          esbx_make_error_kind (err, ESBX_ERR_NOT_FOUND, 0, "no head in etcd `%s` (push it first)",
                                rm.etcd);
        else
          r = esbx_remote_sync_locked (store, &reg, project, &h, fetched, err);
      }
    esbx_remote_head_free (&h);
    esbx_registry_close (&reg);
    esbx_remote_free (&rm);
    if (r < 0)
      goto fail;
  }
  return 0;

fail:
  esbx_error_wrap (err, "project pull `%s`", project);
  if (esbx_rm_rf_at (store->rootfd, rel, &ignored) < 0)
    esbx_error_free (&ignored);
  return -1;
}

int
esbx_remote_pull_absent (esbx_store_t *store, const char *project, esbx_error_t *err)
{
  struct esbx_remote rm = { 0 };
  struct esbx_remote_head h = { 0 };
  esbx_error_t ignored = NULL;
  int ret = 0;

  if (!esbx_name_valid (project) || esbx_remote_load (store, &rm, &ignored) < 0)
    {
      /* No remote here: the project simply does not exist.  */
      esbx_error_free (&ignored);
      return 0;
    }
  if (esbx_remote_head_read (&rm, project, &h, err) < 0)
    ret = esbx_error_wrap (err, "project `%s` is not here and its head could not be read", project);
  else if (h.exists && esbx_project_pull (store, project, NULL, err) < 0)
    {
      /* Another create pulled it meanwhile.  */
      if (esbx_project_exists (store, project))
        esbx_error_free (err);
      else
        ret = -1;
    }
  esbx_remote_head_free (&h);
  esbx_remote_free (&rm);
  return ret;
}
