/* esbx: allocation that cannot fail, cleanup attributes, syscall hygiene.  */
#ifndef ESBX_UTILS_H
#define ESBX_UTILS_H

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#ifndef TEMP_FAILURE_RETRY
#define TEMP_FAILURE_RETRY(expression)                                                             \
  (__extension__({                                                                                 \
    long int __result;                                                                             \
    do                                                                                             \
      __result = (long int)(expression);                                                           \
    while (__result == -1L && errno == EINTR);                                                     \
    __result;                                                                                      \
  }))
#endif

#define ESBX_PUBLIC   __attribute__ ((visibility ("default")))
#define ARRAY_SIZE(a) (sizeof (a) / sizeof ((a)[0]))

void *xmalloc (size_t size);
void *xmalloc0 (size_t size);
void *xrealloc (void *ptr, size_t size);
char *xstrdup (const char *s);
char *xstrndup (const char *s, size_t n);
char *xasprintf (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));
char *xvasprintf (const char *fmt, va_list ap) __attribute__ ((format (printf, 1, 0)));

static inline void
cleanup_freep (void *p)
{
  void **pp = (void **)p;
  free (*pp);
}

static inline void
cleanup_closep (int *fd)
{
  if (*fd >= 0)
    {
      int saved = errno;
      close (*fd);
      errno = saved;
    }
}

static inline void
cleanup_filep (FILE **f)
{
  if (*f)
    fclose (*f);
}

static inline void
cleanup_dirp (DIR **d)
{
  if (*d)
    closedir (*d);
}

/* A NULL-terminated vector of strings.  */
static inline void
cleanup_strvp (char ***v)
{
  char **p;

  if (*v == NULL)
    return;
  for (p = *v; *p; p++)
    free (*p);
  free (*v);
}

#define _cleanup_free_  __attribute__ ((cleanup (cleanup_freep)))
#define _cleanup_close_ __attribute__ ((cleanup (cleanup_closep)))
#define _cleanup_file_  __attribute__ ((cleanup (cleanup_filep)))
#define _cleanup_dir_   __attribute__ ((cleanup (cleanup_dirp)))
#define _cleanup_strv_  __attribute__ ((cleanup (cleanup_strvp)))

static inline void *
steal_ptr (void **pp)
{
  void *p = *pp;
  *pp = NULL;
  return p;
}
#define steal_pointer(pp) ((__typeof__ (*(pp)))steal_ptr ((void **)(pp)))

static inline int
take_fd (int *fd)
{
  int r = *fd;
  *fd = -1;
  return r;
}

/* qsort, for N elements at BASE that may be none at a NULL BASE (which
   qsort's declaration does not allow).  */
static inline void
esbx_sort (void *base, size_t n, size_t size, int (*cmp) (const void *, const void *))
{
  if (n > 1)
    qsort (base, n, size, cmp);
}

/* A growable NULL-terminated vector of strings.  */
struct strv
{
  char **v;
  size_t n;
  size_t cap;
};
void strv_push (struct strv *s, char *owned);
void strv_free (struct strv *s);
size_t strv_len (char *const *v);

#endif
