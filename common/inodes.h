/* Sets of files by device and inode: the names of one file met in a walk
   (hard links), so that it is copied, archived or counted once.  */
#ifndef ESBX_INODES_H
#define ESBX_INODES_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct esbx_inode
{
  dev_t dev;
  ino_t ino;
  char *path;   /* the first name met */
  size_t index; /* the caller's, given with it */
};

struct esbx_inode_set
{
  void *tree; /* tsearch */
};

/* The entry of DEV and INO: the one already there (*FOUND true), or a new
   one with a copy of PATH (may be NULL) and INDEX.  */
const struct esbx_inode *esbx_inode_set_add (struct esbx_inode_set *s, dev_t dev, ino_t ino,
                                             const char *path, size_t index, bool *found);
void esbx_inode_set_free (struct esbx_inode_set *s);

#endif
