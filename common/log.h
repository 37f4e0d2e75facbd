/* esbx: one-line diagnostics on stderr for the daemons and the CLI.  Each
   message is escaped whole (esbx_escape_line): a message is one line,
   whatever the names and paths in it hold.  */
#ifndef ESBX_LOG_H
#define ESBX_LOG_H

void esbx_log_set_prog (const char *prog);
void esbx_warn (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));
void esbx_info (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));

#endif
