#!/usr/bin/env bats
# Durability order (README, "Durability"), checked on the system calls that
# esbx makes, traced with strace: every file and directory of a new layer is
# durable before the rename that installs it (fsynced, or flushed by a syncfs
# of the store's filesystem after the last write into the layer), record.json
# and the stack file are fsynced before their renames, layers/ is fsynced
# after the layer's rename, and the project directory is fsynced after the
# head's rename and before the command reports success.  Writing a layer
# costs a bounded number of flushes, not one per file.

load helpers

setup_file() {
  [ -x "$ESBX" ] || skip "esbx not built at $ESBX"
  command -v strace >/dev/null || skip "strace is not installed"
}

# Trace `esbx ARGS` into $BATS_TEST_TMPDIR/trace (paths of fds shown, -y).
traced() {
  run strace -f -y -qq -s 256 -o "$BATS_TEST_TMPDIR/trace" \
    -e trace=fsync,fdatasync,syncfs,sync,rename,renameat,renameat2,openat,mkdirat,mknodat,symlinkat,linkat,write,pwrite64,copy_file_range,fchmod,fchmodat,fchown,fchownat,utimensat,exit_group \
    "$ESBX" "$@"
  [ "$status" -eq 0 ] || { echo "esbx $* exited $status: $output" >&2; return 1; }
}

# check_order PROJECT LAYER: the trace against the layer as it now is.
check_order() {
  python3 - "$BATS_TEST_TMPDIR/trace" "$ESBX_ROOT" "$1" "$2" <<'PY'
import os, re, sys

trace, root, project, layer = sys.argv[1:]
proj = os.path.realpath(os.path.join(root, "projects", project))
final = os.path.join(proj, "layers", layer)
lines = open(trace).read().splitlines()
fd_path = re.compile(r"^\d+\s+(\w+)\((\d+)<([^>]*)>(.*)$")
problems = []

def ev(i):
    m = fd_path.match(lines[i])
    return m.groups() if m else (None, None, None, None)

# The head moves by the rename of the stack's temp file to "stack".
head = [i for i, l in enumerate(lines)
        if re.search(r"rename\w*\(.*<%s>, \"\.stack\.tmp-[0-9a-f]+\", .*\"stack\"" % re.escape(proj), l)]
if len(head) != 1:
    sys.exit("expected one rename of the stack, found %d" % len(head))
head = head[0]

# Where the layer was staged: the rename of projects/P/tmp/X to layers/ID.
install = [i for i, l in enumerate(lines)
           if re.search(r"renameat2?\(.*\"projects/%s/tmp/([0-9a-f]+)\", .*\"projects/%s/layers/%s\"" %
                        (re.escape(project), re.escape(project), layer), l)]
if len(install) != 1:
    sys.exit("expected one rename installing layer %s, found %d" % (layer, len(install)))
install = install[0]
staged = os.path.join(proj, "tmp",
                      re.search(r"/tmp/([0-9a-f]+)\"", lines[install]).group(1))

fsynced = {}  # path -> first line index of an fsync
for i, l in enumerate(lines):
    op, fd, path, rest = ev(i)
    if op in ("fsync", "fdatasync") and path not in fsynced:
        fsynced.setdefault(os.path.realpath(path) if os.path.exists(path) else path, i)
        fsynced.setdefault(path, i)

def synced_before(path, limit, what):
    i = fsynced.get(path)
    if i is None or i > limit:
        problems.append("%s `%s` not fsynced before line %d" % (what, path, limit + 1))

# A syncfs of the store's filesystem after the last write into the staged
# diff (creation, data, mode, owner, times; by the importing child too) and
# before the install flushes every entry of the layer at once.
layer_ops = ("openat", "mkdirat", "mknodat", "symlinkat", "linkat", "write", "pwrite64",
             "copy_file_range", "fchmod", "fchmodat", "fchown", "fchownat", "utimensat")
staged_diff = staged + "/diff"
writes = [i for i in range(install) if ev(i)[0] in layer_ops or
          re.match(r"^\d+\s+(%s)\(" % "|".join(layer_ops), lines[i])]
writes = [i for i in writes if staged_diff in lines[i] or
          "projects/%s/tmp/%s/diff" % (project, os.path.basename(staged)) in lines[i]]
# Reading the layer back (the scan of an import) writes nothing.
writes = [i for i in writes if not re.match(r"^\d+\s+openat\(", lines[i]) or
          re.search(r"O_(CREAT|WRONLY|RDWR|TRUNC)", lines[i])]
last_write = writes[-1] if writes else -1
store = os.path.realpath(root)
flushed = [i for i in range(last_write + 1, install)
           if ev(i)[0] == "syncfs" and os.path.realpath(ev(i)[2]).startswith(store + "/")]

def entry_durable(path, limit):
    if flushed:
        return
    synced_before(path, limit, "layer entry")

# Every regular file and directory of the layer, under its staged name.
for d, dirs, files in os.walk(final):
    for n in [d] + [os.path.join(d, f) for f in files]:
        st = os.lstat(n)
        import stat
        if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
            continue
        staged_name = staged + n[len(final):]
        if n.endswith("/record.json") and d == final:
            continue  # written atomically under another name, checked below
        if n == final:
            continue  # its content reaches disk with layers/ and the record's dir fsync
        entry_durable(staged_name, install)

# record.json: its temp file fsynced, renamed, the layer dir fsynced, all
# before the install.
rec = [i for i, l in enumerate(lines) if re.search(r"\"\.record\.json\.tmp-[0-9a-f]+\", .*\"record\.json\"", l)]
if len(rec) != 1 or rec[0] > install:
    problems.append("record.json not renamed into place before the install")
else:
    tmpname = re.search(r"\"(\.record\.json\.tmp-[0-9a-f]+)\"", lines[rec[0]]).group(1)
    synced_before(os.path.join(staged, tmpname), rec[0], "record temp file")
    after = [i for i in range(rec[0], install) if ev(i)[0] == "fsync" and ev(i)[2] == staged]
    if not after:
        problems.append("the staged layer directory is not fsynced after record.json's rename")

# layers/ fsynced after the install and before the head moves.
if not [i for i in range(install, head) if ev(i)[0] == "fsync" and ev(i)[2] == os.path.join(proj, "layers")]:
    problems.append("layers/ not fsynced between the install and the head's rename")

# The stack's temp file fsynced before its rename.
tmpname = re.search(r"\"(\.stack\.tmp-[0-9a-f]+)\"", lines[head]).group(1)
synced_before(os.path.join(proj, tmpname), head, "stack temp file")

# The project directory fsynced after the head's rename, before any output
# to stdout and before the process exits.
out = [i for i in range(head, len(lines)) if re.match(r"^\d+\s+write\(1<", lines[i])]
end = out[0] if out else len(lines)
if not [i for i in range(head, end) if ev(i)[0] == "fsync" and ev(i)[2] == proj]:
    problems.append("the project directory is not fsynced after the head's rename and before success")

for p in problems:
    print(p)
sys.exit(1 if problems else 0)
PY
}

@test "publish: the new layer, its record and the head are durable in order" {
  make_tree "$BATS_TEST_TMPDIR/src"
  esbx_ok project create p --from "$BATS_TEST_TMPDIR/src"
  esbx_ok session create p
  s=$output
  m=$("$ESBX" session path "$s")
  mkdir -p "$m/new/deep/er" "$m/other"
  for i in 1 2 3; do echo "$i" >"$m/new/deep/er/f$i"; done
  echo changed >>"$m/README"
  echo x >"$m/other/x"
  ln -s ../README "$m/new/link"
  rm "$m/docs/guide.txt"
  traced publish "$s"
  layer=${output##*$'\n'}
  run check_order p "$layer"
  echo "$output"
  [ "$status" -eq 0 ]
}

@test "project create --from: the imported layer is durable before the head names it" {
  make_tree "$BATS_TEST_TMPDIR/src"
  mkdir -p "$BATS_TEST_TMPDIR/src/a/b/c"
  echo deep >"$BATS_TEST_TMPDIR/src/a/b/c/d"
  traced project create p --from "$BATS_TEST_TMPDIR/src"
  layer=$(cat "$ESBX_ROOT/projects/p/stack")
  run check_order p "$layer"
  echo "$output"
  [ "$status" -eq 0 ]
}

# fsync_count: fsync and fdatasync calls of the last trace.
fsync_count() {
  grep -cE '^[0-9]+ +(fsync|fdatasync)\(' "$BATS_TEST_TMPDIR/trace"
}

@test "project create --from of 300 files: a bounded number of flushes, not one per file" {
  make_tree "$BATS_TEST_TMPDIR/src"
  for d in 1 2 3; do
    mkdir -p "$BATS_TEST_TMPDIR/src/d$d"
    for i in $(seq 1 100); do echo "$d $i" >"$BATS_TEST_TMPDIR/src/d$d/f$i.c"; done
  done
  traced project create p --from "$BATS_TEST_TMPDIR/src"
  n=$(fsync_count)
  echo "fsyncs: $n"
  [ "$n" -lt 20 ]
  run check_order p "$(cat "$ESBX_ROOT/projects/p/stack")"
  echo "$output"
  [ "$status" -eq 0 ]
}

@test "publish of 100 changed files: a bounded number of flushes, not one per file" {
  make_tree "$BATS_TEST_TMPDIR/src"
  esbx_ok project create p --from "$BATS_TEST_TMPDIR/src"
  esbx_ok session create p
  s=$output
  m=$("$ESBX" session path "$s")
  mkdir -p "$m/a" "$m/b"
  for i in $(seq 1 50); do echo "$i" >"$m/a/f$i.c" && echo "$i" >"$m/b/f$i.c"; done
  traced publish "$s"
  layer=${output##*$'\n'}
  n=$(fsync_count)
  echo "fsyncs: $n"
  [ "$n" -lt 20 ]
  run check_order p "$layer"
  echo "$output"
  [ "$status" -eq 0 ]
}

@test "project squash: the flattened layer is durable before the head names it" {
  make_tree "$BATS_TEST_TMPDIR/src"
  esbx_ok project create p --from "$BATS_TEST_TMPDIR/src"
  for i in 1 2; do
    esbx_ok session create p
    s=$output
    echo "$i" >"$("$ESBX" session path "$s")/f$i"
    esbx_ok publish "$s"
    esbx_ok discard "$s"
  done
  traced project squash p
  layer=$(cat "$ESBX_ROOT/projects/p/stack")
  run check_order p "$layer"
  echo "$output"
  [ "$status" -eq 0 ]
}

# A session is built in ROOT/tmp and renamed into sessions/: its record is
# written straight into the private temp directory and fsynced (data and
# name in one call), and sessions/ is fsynced after the rename.  Two fsyncs
# and no more: each one waits for a journal commit, which on a busy host is
# most of the time a create takes.
@test "session create: the record is durable before the rename, sessions/ after it, two fsyncs" {
  make_tree "$BATS_TEST_TMPDIR/src"
  esbx_ok project create p --from "$BATS_TEST_TMPDIR/src"
  traced session create p --name s
  run python3 - "$BATS_TEST_TMPDIR/trace" "$(realpath "$ESBX_ROOT")" <<'PY'
import re, sys
lines = open(sys.argv[1]).read().splitlines()
root = sys.argv[2]
syncs = [(i, l) for i, l in enumerate(lines) if re.match(r"^\d+\s+f(data)?sync\(", l)]
moves = [i for i, l in enumerate(lines) if re.search(r'renameat2?\(.*"sessions/s"', l)]
problems = []
if len(moves) != 1:
    sys.exit("expected one rename into sessions/s, found %d" % len(moves))
record = [i for i, l in syncs if re.search(r"<%s/tmp/session-[0-9a-f]+/session\.json>" % re.escape(root), l)]
if not record or record[0] > moves[0]:
    problems.append("session.json is not fsynced before the rename")
after = [i for i, l in syncs if i > moves[0] and "<%s/sessions>" % root in l]
if not after:
    problems.append("sessions/ is not fsynced after the rename")
if len(syncs) != 2:
    problems.append("%d fsyncs, expected 2: %s" % (len(syncs), [l for _, l in syncs]))
for p in problems:
    print(p)
sys.exit(1 if problems else 0)
PY
  echo "$output"
  [ "$status" -eq 0 ]
  assert_file_exists "$ESBX_ROOT/sessions/s/session.json"
}
