#include "inodes.h"
#include "utils.h"

#include <search.h>
#include <stdlib.h>

static int
inode_cmp (const void *a, const void *b)
{
  const struct esbx_inode *x = a, *y = b;

  if (x->dev != y->dev)
    return x->dev < y->dev ? -1 : 1;
  if (x->ino != y->ino)
    return x->ino < y->ino ? -1 : 1;
  return 0;
}

const struct esbx_inode *
esbx_inode_set_add (struct esbx_inode_set *s, dev_t dev, ino_t ino, const char *path, size_t index,
                    bool *found)
{
  struct esbx_inode key = { .dev = dev, .ino = ino };
  struct esbx_inode **slot = tfind (&key, &s->tree, inode_cmp);
  struct esbx_inode *e;

  *found = slot != NULL;
  if (slot)
    return *slot;
  e = xmalloc0 (sizeof *e);
  e->dev = dev;
  e->ino = ino;
  e->path = path ? xstrdup (path) : NULL;
  e->index = index;
  if (tsearch (e, &s->tree, inode_cmp) == NULL)
    abort (); /* out of memory, as xmalloc */
  return e;
}

static void
inode_free (void *p)
{
  struct esbx_inode *e = p;

  free (e->path);
  free (e);
}

void
esbx_inode_set_free (struct esbx_inode_set *s)
{
  tdestroy (s->tree, inode_free);
  s->tree = NULL;
}
