/* The configuration files of esbx (/etc/esbx/esbxd.conf,
   /etc/esbx/runtime.conf): one `key = value` a line, blanks around either
   side ignored, `#` starts a comment, empty lines skipped.  */
#ifndef ESBX_CONFFILE_H
#define ESBX_CONFFILE_H

#include "error.h"

#include <stdbool.h>

/* One setting; WHERE is "PATH:LINE" for messages.  Returns -1 with ERR set
   to refuse it.  */
typedef int (*esbx_conf_fn) (const char *key, const char *value, const char *where, void *data,
                             esbx_error_t *err);

/* Call FN for every setting of PATH.  A missing file has none unless
   MUST_EXIST.  A line without `=` is an error naming the file and line.  */
int esbx_conf_read (const char *path, bool must_exist, esbx_conf_fn fn, void *data,
                    esbx_error_t *err);

#endif
