#include "devices.h"
#include "fs.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ANY -1

struct rule
{
  char type; /* 'c', 'b' */
  int major, minor;
  const char *access; /* of "rwm" */
};

static const struct rule rules[] = {
  { 'c', ANY, ANY, "m" }, /* mknod of anything; opening it is another matter */
  { 'b', ANY, ANY, "m" },   { 'c', 1, 3, "rwm" }, /* null */
  { 'c', 1, 5, "rwm" },                           /* zero */
  { 'c', 1, 7, "rwm" },                           /* full */
  { 'c', 1, 8, "rwm" },                           /* random */
  { 'c', 1, 9, "rwm" },                           /* urandom */
  { 'c', 5, 0, "rwm" },                           /* tty */
  { 'c', 5, 1, "rwm" },                           /* console (containers) */
  { 'c', 5, 2, "rwm" },                           /* ptmx */
  { 'c', 136, ANY, "rwm" },                       /* ptys */
  { 'c', 10, 200, "rwm" },                        /* net/tun (containers) */
};

static void
number (char *buf, size_t size, int n)
{
  if (n == ANY)
    snprintf (buf, size, "*");
  else
    snprintf (buf, size, "%d", n);
}

static int
write_rule (const char *dir, const char *file, const char *line, esbx_error_t *err)
{
  _cleanup_free_ char *path = xasprintf ("%s/%s", dir, file);
  _cleanup_close_ int fd = TEMP_FAILURE_RETRY (open (path, O_WRONLY | O_CLOEXEC));

  if (fd < 0 || esbx_write_all (fd, line, strlen (line)) < 0)
    return esbx_make_error (err, errno, "cgroup: write `%s` to `%s`", line, path);
  return 0;
}

int
esbx_devices_apply_v1 (const char *dir, esbx_error_t *err)
{
  char maj[16], min[16], line[64];
  size_t i;

  if (write_rule (dir, "devices.deny", "a", err) < 0)
    return -1;
  for (i = 0; i < ARRAY_SIZE (rules); i++)
    {
      number (maj, sizeof maj, rules[i].major);
      number (min, sizeof min, rules[i].minor);
      snprintf (line, sizeof line, "%c %s:%s %s", rules[i].type, maj, min, rules[i].access);
      if (write_rule (dir, "devices.allow", line, err) < 0)
        return -1;
    }
  return 0;
}

/* ---- cgroup v2: the same rules as an eBPF program ----------------------- */

#define INSN(c, d, s, o, i)                                                                        \
  ((struct bpf_insn){ .code = (c), .dst_reg = (d), .src_reg = (s), .off = (o), .imm = (i) })

struct prog
{
  struct bpf_insn insns[8 * ARRAY_SIZE (rules) + 16];
  size_t n;
};

static void
emit (struct prog *p, struct bpf_insn insn)
{
  p->insns[p->n++] = insn;
}

static int
access_bits (const char *access)
{
  int bits = 0;

  for (; *access; access++)
    bits |= *access == 'm'   ? BPF_DEVCG_ACC_MKNOD
            : *access == 'r' ? BPF_DEVCG_ACC_READ
                             : BPF_DEVCG_ACC_WRITE;
  return bits;
}

/* R2 = type, R3 = access, R4 = major, R5 = minor.  One block per rule: each
   test jumps past the block's end when it fails; the block's end returns 1.  */
static void
emit_rule (struct prog *p, const struct rule *r)
{
  size_t start = p->n, i, len;
  int type = r->type == 'c' ? BPF_DEVCG_DEV_CHAR : BPF_DEVCG_DEV_BLOCK;

  emit (p, INSN (BPF_JMP | BPF_JNE | BPF_K, BPF_REG_2, 0, 0, type));
  emit (p, INSN (BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_1, BPF_REG_3, 0, 0));
  emit (p, INSN (BPF_ALU64 | BPF_AND | BPF_K, BPF_REG_1, 0, 0, ~access_bits (r->access)));
  emit (p, INSN (BPF_JMP | BPF_JNE | BPF_K, BPF_REG_1, 0, 0, 0));
  if (r->major != ANY)
    emit (p, INSN (BPF_JMP | BPF_JNE | BPF_K, BPF_REG_4, 0, 0, r->major));
  if (r->minor != ANY)
    emit (p, INSN (BPF_JMP | BPF_JNE | BPF_K, BPF_REG_5, 0, 0, r->minor));
  emit (p, INSN (BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 1));
  emit (p, INSN (BPF_JMP | BPF_EXIT, 0, 0, 0, 0));
  len = p->n - start;
  /* A failed test lands on the next block.  */
  for (i = start; i < p->n; i++)
    if (p->insns[i].code == (BPF_JMP | BPF_JNE | BPF_K))
      p->insns[i].off = (short)(start + len - i - 1);
}

static void
build (struct prog *p)
{
  size_t i;

  p->n = 0;
  /* struct bpf_cgroup_dev_ctx: access_type (access << 16 | type), major,
     minor.  */
  emit (p, INSN (BPF_LDX | BPF_MEM | BPF_W, BPF_REG_2, BPF_REG_1, 0, 0));
  emit (p, INSN (BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_3, BPF_REG_2, 0, 0));
  emit (p, INSN (BPF_ALU64 | BPF_AND | BPF_K, BPF_REG_2, 0, 0, 0xffff));
  emit (p, INSN (BPF_ALU64 | BPF_RSH | BPF_K, BPF_REG_3, 0, 0, 16));
  emit (p, INSN (BPF_LDX | BPF_MEM | BPF_W, BPF_REG_4, BPF_REG_1, 4, 0));
  emit (p, INSN (BPF_LDX | BPF_MEM | BPF_W, BPF_REG_5, BPF_REG_1, 8, 0));
  for (i = 0; i < ARRAY_SIZE (rules); i++)
    emit_rule (p, &rules[i]);
  emit (p, INSN (BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 0));
  emit (p, INSN (BPF_JMP | BPF_EXIT, 0, 0, 0, 0));
}

static int
bpf (int cmd, union bpf_attr *attr)
{
  return (int)syscall (SYS_bpf, cmd, attr, sizeof *attr);
}

static int
load (const struct prog *p, char *log, size_t size)
{
  union bpf_attr attr;

  memset (&attr, 0, sizeof attr);
  attr.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
  attr.insns = (__u64)(uintptr_t)p->insns;
  attr.insn_cnt = (__u32)p->n;
  attr.license = (__u64)(uintptr_t) "Apache-2.0";
  if (log)
    {
      attr.log_buf = (__u64)(uintptr_t)log;
      attr.log_size = (__u32)size;
      attr.log_level = 1;
    }
  return bpf (BPF_PROG_LOAD, &attr);
}

int
esbx_devices_apply_v2 (const char *dir, esbx_error_t *err)
{
  static struct prog p;
  _cleanup_close_ int cg = -1, prog = -1;
  union bpf_attr attr;
  char log[4096] = "";

  cg = TEMP_FAILURE_RETRY (open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (cg < 0)
    return esbx_make_error (err, errno, "cgroup: open `%s`", dir);
  /* Created again for a new holder: attached once is enough.  */
  memset (&attr, 0, sizeof attr);
  attr.query.target_fd = (__u32)cg;
  attr.query.attach_type = BPF_CGROUP_DEVICE;
  attr.query.prog_cnt = 0;
  if (bpf (BPF_PROG_QUERY, &attr) == 0 && attr.query.prog_cnt > 0)
    return 0;
  build (&p);
  prog = load (&p, NULL, 0);
  if (prog < 0)
    {
      /* Again with the verifier's log, to say why.  */
      load (&p, log, sizeof log);
      log[strcspn (log, "\n")] = '\0';
      return esbx_make_error (err, errno, "cgroup: load the device program for `%s`%s%s", dir,
                              log[0] ? ": " : "", log);
    }
  memset (&attr, 0, sizeof attr);
  attr.target_fd = (__u32)cg;
  attr.attach_bpf_fd = (__u32)prog;
  attr.attach_type = BPF_CGROUP_DEVICE;
  attr.attach_flags = BPF_F_ALLOW_MULTI;
  if (bpf (BPF_PROG_ATTACH, &attr) < 0)
    return esbx_make_error (err, errno, "cgroup: attach the device program to `%s`", dir);
  return 0;
}
