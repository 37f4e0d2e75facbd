/* esbx: its threads, the one way (esbxd's background workers, the gateway's
   progress streams and connection gate, a remote publish's side tasks):
   started, joined and counted here, so that whoever forks a child that
   allocates (layerstore/remove_detached.c) asks esbx_threads_running
   instead of a convention.  */
#ifndef ESBX_THREAD_H
#define ESBX_THREAD_H

#include "error.h"

#include <pthread.h>
#include <stdbool.h>

struct esbx_thread
{
  pthread_t id;
  bool started;
};

/* Run FN (ARG) on a new thread; WHAT names it in the error.  */
int esbx_thread_start (struct esbx_thread *t, void *(*fn) (void *), void *arg, const char *what,
                       esbx_error_t *err);
/* The same, or FN (ARG) here and now when no thread can be made (work
   that may go faster beside, never must).  */
void esbx_thread_start_or_run (struct esbx_thread *t, void *(*fn) (void *), void *arg);
/* Run FN (ARG) on a detached thread with a stack of STACK bytes (0: the
   default), counted while it runs (a server's thread per connection).  */
int esbx_thread_detached (void *(*fn) (void *), void *arg, size_t stack, const char *what,
                          esbx_error_t *err);
/* Wait for T when it was started; a second join does nothing.  */
void esbx_thread_join (struct esbx_thread *t);
/* Threads started here and not yet joined, and every thread a library
   runs that esbx_threads_foreign declared (libmicrohttpd's in esbxd).  */
unsigned esbx_threads_running (void);
/* This process runs threads of a library's making from now on.  */
void esbx_threads_foreign (void);

#endif
