/* A git project in the store: its marker (ROOT/projects/P/git.json) and a
   bare repository plain git can read (ROOT/projects/P/git), so that a
   person fetches and reviews what the agents did with their own tools:
   `git fetch "$(esbx project git-dir P)" esbx/head`.  Its objects are the
   layers' (objects/info/alternates names each layer's `.git/objects`), its
   refs/heads/esbx/head the head's commit; it is written again whenever the
   head moves, and holds nothing a layer does not.  */
#include "internal.h"
#include "git.h"
#include "fs.h"
#include "log.h"
#include "utils.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool
esbx_project_is_git (esbx_store_t *store, const char *project)
{
  _cleanup_free_ char *rel = esbx_project_file (project, "git.json");

  return esbx_exists_at (store->rootfd, rel);
}

char *
esbx_project_git_dir (esbx_store_t *store, const char *project)
{
  _cleanup_free_ char *rel = esbx_project_file (project, "git");

  return esbx_store_abs (store, rel);
}

/* The hex digits of a commit id (git's SHA-1).  */
#define COMMIT_HEX 40

static bool
blank (char c)
{
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* The commit of layer ID read from the end of its record, or NULL.
   esbx_layer_to_json writes "git_commit" last, so the record ends in
   `,\n    "git_commit": "HEX"\n}`; reading that spares parsing the whole
   change list for one field (layer 0's lists every file of the import:
   27 MB and half a second at 100k files, in every session create and
   publish).  The match is the record's own member: a JSON string holds no
   raw newline, so the key after one is not inside a string, and the brace
   that ends the file closes the record.  NULL for any other ending (the
   caller parses the record, and says what is wrong with it).  */
static char *
commit_at_end (esbx_store_t *store, const char *project, const char *id)
{
  static const char key[] = "\"git_commit\": \"";
  const size_t klen = sizeof key - 1;
  _cleanup_free_ char *rel = esbx_layer_file (project, id, "record.json");
  _cleanup_close_ int fd = esbx_open_regular_at (store->rootfd, rel, NULL);
  char buf[256];
  struct stat st;
  ssize_t n;
  char *end, *hex, *p;

  if (fd < 0 || fstat (fd, &st) < 0)
    return NULL;
  n = TEMP_FAILURE_RETRY (pread (
      fd, buf, sizeof buf, st.st_size > (off_t)sizeof buf ? st.st_size - (off_t)sizeof buf : 0));
  if (n <= 0)
    return NULL;
  end = buf + n;
  while (end > buf && blank (end[-1]))
    end--;
  if (end == buf || *--end != '}')
    return NULL;
  while (end > buf && blank (end[-1]))
    end--;
  if ((size_t)(end - buf) < klen + COMMIT_HEX + 2 || end[-1] != '"')
    return NULL;
  hex = end - 1 - COMMIT_HEX;
  for (p = hex; p < end - 1; p++)
    if (!strchr ("0123456789abcdef", *p) || *p == '\0')
      return NULL;
  p = hex - klen;
  if (memcmp (p, key, klen) != 0)
    return NULL;
  while (p > buf && (p[-1] == ' ' || p[-1] == '\t'))
    p--;
  if (p - buf < 2 || p[-1] != '\n')
    return NULL;
  for (p--; p > buf && blank (p[-1]); p--)
    ;
  if (p == buf || p[-1] != ',')
    return NULL;
  return xstrndup (hex, COMMIT_HEX);
}

int
esbx_git_layer_commit (esbx_store_t *store, const char *project, const char *id, char **commit,
                       esbx_error_t *err)
{
  struct esbx_layer *l = NULL;

  *commit = commit_at_end (store, project, id);
  if (*commit)
    return 0;
  if (esbx_layer_load (store, project, id, &l, err) < 0)
    return -1;
  if (l->git_commit == NULL)
    {
      esbx_layer_free (l);
      return esbx_make_error (err, 0, "project `%s`: layer `%s` has no git commit", project, id);
    }
  *commit = steal_pointer (&l->git_commit);
  esbx_layer_free (l);
  return 0;
}

static int
update (esbx_store_t *store, const char *project, esbx_error_t *err)
{
  static const char *const dirs[] = { "",      "/objects",    "/objects/info",    "/objects/pack",
                                      "/refs", "/refs/heads", "/refs/heads/esbx", "/refs/tags" };
  static const char config[] = "[core]\n\trepositoryformatversion = 0\n\tbare = true\n";
  _cleanup_free_ char *rel = esbx_project_file (project, "git");
  _cleanup_strv_ char **ids = NULL;
  _cleanup_free_ char *commit = NULL, *line = NULL;
  _cleanup_close_ int gfd = -1;
  struct strv alt = { 0 };
  _cleanup_free_ char *text = NULL;
  size_t n, i, len = 0;
  int ret = -1;

  for (i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
    {
      _cleanup_free_ char *d = xasprintf ("%s%s", rel, dirs[i]);
      if (mkdirat (store->rootfd, d, 0755) < 0 && errno != EEXIST)
        return esbx_make_error (err, errno, "mkdir `%s`", d);
    }
  gfd = esbx_open_dir_at (store->rootfd, rel, err);
  if (gfd < 0 || esbx_project_stack (store, project, &ids, &n, err) < 0
      || esbx_git_layer_commit (store, project, ids[n - 1], &commit, err) < 0)
    return -1;
  if (esbx_write_file_atomic_at (gfd, "HEAD", "ref: refs/heads/esbx/head\n", 26, 0644, err) < 0
      || esbx_write_file_atomic_at (gfd, "config", config, strlen (config), 0644, err) < 0)
    return -1;
  for (i = 0; i < n; i++)
    {
      _cleanup_free_ char *objects = esbx_layer_file (project, ids[i], "diff/.git/objects");
      if (esbx_exists_at (store->rootfd, objects))
        strv_push (&alt, xasprintf ("%s/%s\n", store->root, objects));
    }
  for (i = 0; i < alt.n; i++)
    len += strlen (alt.v[i]);
  text = xmalloc0 (len + 1);
  for (i = 0; i < alt.n; i++)
    strcat (text, alt.v[i]);
  line = xasprintf ("%s\n", commit);
  {
    _cleanup_close_ int info = esbx_open_dir_at (gfd, "objects/info", err);
    _cleanup_close_ int heads = info < 0 ? -1 : esbx_open_dir_at (gfd, "refs/heads/esbx", err);

    if (heads >= 0 && esbx_write_file_atomic_at (info, "alternates", text, len, 0644, err) == 0
        && esbx_write_file_atomic_at (heads, "head", line, strlen (line), 0644, err) == 0)
      ret = 0;
  }
  strv_free (&alt);
  return ret;
}

void
esbx_git_project_dir_update (esbx_store_t *store, const char *project)
{
  esbx_error_t err = NULL;

  if (update (store, project, &err) < 0)
    {
      esbx_warn ("project `%s`: the git directory for readers is not up to date: %s", project,
                 err->msg);
      esbx_error_free (&err);
    }
}
