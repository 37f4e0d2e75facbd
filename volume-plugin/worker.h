/* A background thread of esbxd (expiry.c, prefetch.c): it works in
   rounds, pauses between them, and is woken (start over: SIGHUP) or
   stopped from other threads.  */
#ifndef ESBX_WORKER_H
#define ESBX_WORKER_H

#include "error.h"
#include "thread.h"

#include <pthread.h>
#include <stdbool.h>

struct esbx_worker
{
  struct esbx_thread thread;
  pthread_mutex_t lock; /* guards STOP and WAKE and what the owner adds */
  pthread_cond_t cond;
  bool stop;
  bool wake;
};

/* Run MAIN (ARG) on a new thread; WHAT names it in the error.  */
int esbx_worker_start (struct esbx_worker *w, void *(*main) (void *), void *arg, const char *what,
                       esbx_error_t *err);
/* Set WAKE and wake the thread from its pause.  */
void esbx_worker_wake (struct esbx_worker *w);
/* Set STOP, wake the thread and wait for it to end.  */
void esbx_worker_stop (struct esbx_worker *w);
/* With W's lock held: wait MS milliseconds, or less when STOP or WAKE is
   set.  */
void esbx_worker_pause_locked (struct esbx_worker *w, long ms);
/* Whether STOP or WAKE is set (takes the lock).  */
bool esbx_worker_interrupted (struct esbx_worker *w);

#endif
