/* esbx shim: the network programs an egress session is built with (ip,
   nft, iptables, dnsmasq), run as children and waited for.  */
#ifndef ESBX_NETCMD_H
#define ESBX_NETCMD_H

#include "error.h"

/* Run ARGV (ARGV[0] a bare name looked up in /usr/sbin, /sbin, /usr/bin,
   /bin) in the net namespace NETNS_FD when >= 0, with INPUT on its stdin
   when not NULL; its stdout goes to *OUT when OUT is not NULL.  An exit
   other than 0 is an error naming the program and the first line of its
   stderr.  */
int esbx_netcmd (char *const *argv, int netns_fd, const char *input, char **out, esbx_error_t *err);
/* The same with RLIMIT_FSIZE at FSIZE bytes (0: none) for the program and
   what it forks (a daemon): no file it writes grows past FSIZE; a write
   past it fails with EFBIG (SIGXFSZ is ignored).  */
int esbx_netcmd_limited (char *const *argv, int netns_fd, const char *input, char **out,
                         unsigned long long fsize, esbx_error_t *err);

#endif
