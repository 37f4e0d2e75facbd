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

#endif
