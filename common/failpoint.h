/* esbx: failpoints for the crash tests.  In builds with ESBX_FAILPOINTS, a
   process whose $ESBX_FAILPOINT names a point kills itself with SIGKILL
   when it reaches that point, so tests can stop publish, create, squash or
   gc at each step of their durability protocol.  Other builds compile the
   points away.  */
#ifndef ESBX_FAILPOINT_H
#define ESBX_FAILPOINT_H

#ifdef ESBX_FAILPOINTS
void esbx_failpoint (const char *name);
#else
static inline void
esbx_failpoint (const char *name)
{
  (void)name;
}
#endif

#endif
