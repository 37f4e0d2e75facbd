/* esbx: the progress of long operations on stderr, as git and docker show
 * it.  On a terminal one line is redrawn in place ten times a second and
 * ends with ", done."; elsewhere nothing, unless --progress asks for it
 * (for logs: one line a second); --quiet silences it.  The library counts
 * (layerstore.h, esbx_progress); only this file draws.  */
#include "cli.h"
#include "utils.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static struct esbx_progress sink;

static const char *
label (const char *phase)
{
  static const struct
  {
    const char *phase, *label;
  } labels[] = {
    { "import", "Importing" },    { "scan", "Scanning" },         { "export", "Exporting" },
    { "patch", "Writing patch" }, { "gc", "Collecting garbage" },
  };

  for (size_t i = 0; i < ARRAY_SIZE (labels); i++)
    if (strcmp (labels[i].phase, phase) == 0)
      return labels[i].label;
  return phase;
}

/* 41023 -> "41,023".  */
static void
thousands (char *buf, size_t size, uint64_t n)
{
  char digits[32];
  size_t len, i, o = 0;

  len = (size_t)snprintf (digits, sizeof digits, "%" PRIu64, n);
  for (i = 0; i < len && o + 2 < size; i++)
    {
      if (i > 0 && (len - i) % 3 == 0)
        buf[o++] = ',';
      buf[o++] = digits[i];
    }
  buf[o] = '\0';
}

static void
human_bytes (char *buf, size_t size, uint64_t n)
{
  static const char *const units[] = { "KiB", "MiB", "GiB", "TiB" };
  double v = (double)n;
  size_t u = 0;

  if (n < 1024)
    {
      snprintf (buf, size, "%" PRIu64 " bytes", n);
      return;
    }
  for (v /= 1024; v >= 1024 && u + 1 < ARRAY_SIZE (units); u++)
    v /= 1024;
  snprintf (buf, size, "%.*f %s", v < 10 ? 1 : 0, v, units[u]);
}

/* "Importing: 41% (41,023 files, 233 MiB), 2.1 s", the percentage when a
   total is known, the bytes when there are any.  */
static void
format_line (char *line, size_t size, const struct esbx_progress *p)
{
  char done[32], total[32] = "", bytes[40] = "", count[128];
  double secs = (double)p->elapsed_ns / 1e9;
  int pct = -1;

  thousands (done, sizeof done, p->done);
  if (p->bytes)
    {
      memcpy (bytes, ", ", 3);
      human_bytes (bytes + 2, sizeof bytes - 2, p->bytes);
    }
  if (p->total)
    {
      total[0] = '/';
      thousands (total + 1, sizeof total - 1, p->total);
      pct = (int)(p->done * 100 / p->total);
    }
  else if (p->in_total)
    pct = (int)(p->in * 100 / p->in_total);
  if (pct > 100)
    pct = 100;
  snprintf (count, sizeof count, "%s%s %s%s", done, total, p->unit, bytes);
  if (pct >= 0)
    snprintf (line, size, "%s: %3d%% (%s), %.1f s", label (p->phase), pct, count, secs);
  else
    snprintf (line, size, "%s: %s, %.1f s", label (p->phase), count, secs);
}

struct drawer
{
  bool tty;
  bool drawn; /* a line is on the terminal, not ended */
};

static struct drawer drawer;

static void
draw (const struct esbx_progress *p, void *data)
{
  struct drawer *d = data;
  char line[256];

  format_line (line, sizeof line, p);
  if (d->tty)
    {
      /* \033[K clears what a longer line left.  */
      fprintf (stderr, "\r%s%s\033[K%s", line, p->final ? ", done." : "", p->final ? "\n" : "");
      d->drawn = !p->final;
    }
  else
    fprintf (stderr, "%s%s\n", line, p->final ? ", done." : "");
  fflush (stderr);
}

bool
cli_progress_option (struct esbx_cli *cli, int c)
{
  if (c == CLI_OPT_PROGRESS)
    cli->progress = CLI_PROGRESS_ON;
  else if (c == CLI_OPT_QUIET)
    cli->progress = CLI_PROGRESS_OFF;
  else
    return false;
  return true;
}

void
cli_progress_start (struct esbx_cli *cli, bool stdout_busy)
{
  bool automatic;

  drawer.tty = isatty (STDERR_FILENO) == 1;
  automatic = drawer.tty && !(stdout_busy && isatty (STDOUT_FILENO) == 1);
  if (cli->progress == CLI_PROGRESS_OFF || (cli->progress == CLI_PROGRESS_AUTO && !automatic))
    return;
  memset (&sink, 0, sizeof sink);
  sink.report = draw;
  sink.data = &drawer;
  sink.interval_ms = drawer.tty ? 100 : 1000;
  esbx_progress_set (&sink);
}

void
cli_progress_stop (void)
{
  esbx_progress_set (NULL);
  if (drawer.drawn)
    fputc ('\n', stderr);
  drawer.drawn = false;
}
