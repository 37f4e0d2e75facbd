#!/usr/bin/env bats
# The session boundary, store side: what a session's content can do to the
# commands that read it (publish, diff, export, discard, gc) and to
# esbx-runtime.  Items 13, 14 and 18 of the boundary list (docs/SECURITY.md);
# 70-boundary.bats and 71-boundary-gateway.bats have the others.

bats_require_minimum_version 1.5.0
load helpers
load runtime_helpers

setup() {
  setup_store
  BG_PIDS=()
  IMMUTABLE=()
}

teardown() {
  local pid child id
  # Whatever the test left running in the background, children first (an
  # esbx blocked on a FIFO holds the session lock that discard waits for).
  for pid in "${BG_PIDS[@]}"; do
    for child in $(pgrep -P "$pid" 2>/dev/null); do
      kill -KILL "$child" 2>/dev/null || true
    done
    kill -KILL "$pid" 2>/dev/null || true
  done
  for id in $(runc --root "${RUNC_ROOT:-/nonexistent}" list -q 2>/dev/null); do
    runc --root "$RUNC_ROOT" delete -f "$id" >/dev/null 2>&1 || true
  done
  for f in "${IMMUTABLE[@]}"; do chattr -i "$f" 2>/dev/null || true; done
  stop_holders
  # rm -rf copes with trees of any depth, whatever the build under test
  # left behind.
  teardown_store
}

# `low_fds ARGS`: esbx under systemd's default of 1,024 open files.
low_fds() {
  (ulimit -n 1024 && exec "$ESBX" "$@")
}

# `deep_tree DIR DEPTH`: DEPTH nested directories `d` under DIR, made with
# one directory fd at a time (mkdir -p would need a path of 2*DEPTH bytes).
deep_tree() {
  python3 - "$1" "$2" <<'EOF'
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
for _ in range(int(sys.argv[2])):
    os.mkdir("d", dir_fd=fd)
    sub = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
    os.close(fd)
    fd = sub
with open(os.open("leaf", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "w") as f:
    f.write("bottom\n")
os.close(fd)
EOF
}

# `one_line_error NAME`: $output is one line that names NAME (a session).
one_line_error() {
  [ "${#lines[@]}" -eq 1 ] || fail "expected one line, got ${#lines[@]}: ${output:0:300}"
  [ "${#output}" -lt 400 ] || fail "error line of ${#output} bytes: ${output:0:300}"
  assert_output --partial "\`$1\`"
}

# ---- 13 ---------------------------------------------------------------------

# `swapper DIR SECONDS`: inside a session, swap every fN of DIR between a
# regular file of the same size as the base's and a FIFO, as fast as
# possible, for SECONDS.
swapper() {
  python3 - "$1" "$2" <<'EOF' &
import os, sys, time
d, secs = sys.argv[1], float(sys.argv[2])
os.mkfifo(d + "/.p")
with open(d + "/.r", "w") as f:
    f.write("world\n")
names = sorted(d + "/" + n for n in os.listdir(d) if n.startswith("f"))
end = time.time() + secs
rounds = 0
while time.time() < end:
    rounds += 1
    for n in names:
        os.link(d + "/.r", d + "/.t")
        os.rename(d + "/.t", n)
        os.link(d + "/.p", d + "/.t")
        os.rename(d + "/.t", n)
print("# swapper: %d rounds" % rounds, file=open("/dev/fd/3", "w") if os.path.exists("/dev/fd/3") else sys.stderr)
os.unlink(d + "/.p")
os.unlink(d + "/.r")
EOF
  SWAPPER=$!
  BG_PIDS+=("$SWAPPER")
}

# `count_refusal VERB STATUS`: a run that lost the race (its stderr in
# $BATS_TEST_TMPDIR/err) must say why in one line; counted in the test's
# `lost`, and in `fifo` when the cause is the FIFO.
count_refusal() {
  [ "$(wc -l <"$BATS_TEST_TMPDIR/err")" -eq 1 ] ||
    fail "esbx $1 exited $2: $(cat "$BATS_TEST_TMPDIR/err")"
  lost=$((lost + 1))
  cp "$BATS_TEST_TMPDIR/err" "$BATS_TEST_TMPDIR/lost"
  if grep -q "is a fifo, not a regular file" "$BATS_TEST_TMPDIR/err"; then fifo=$((fifo + 1)); fi
}

@test "boundary 13: a FIFO swapped for a same-size file never blocks publish, diff or discard" {
  local i hung=0 runs=0 lost=0 fifo=0 rc verb pid
  # Deep files: a longer lookup in the base between the scan's stat and its
  # open, a wider window for the swap.
  local dir=a/b/c/d/e/f/g/h
  mkdir -p "$BATS_TEST_TMPDIR/src/$dir"
  for i in $(seq 20); do echo hello >"$BATS_TEST_TMPDIR/src/$dir/f$i"; done
  esbx_ok project create p --from "$BATS_TEST_TMPDIR/src"
  # Every publish of s1 conflicts with s0's, so that the base of its files
  # stays the same-size regular files the race needs.
  make_session p s0
  echo other >"$m/$dir/f1"
  esbx_ok publish s0 -m first
  make_session p s1

  swapper "$m/$dir" 8
  while kill -0 "$SWAPPER" 2>/dev/null; do
    for verb in "diff s1" "diff s1" "diff --patch s1"; do
      runs=$((runs + 1))
      # shellcheck disable=SC2086
      timeout -s KILL 4 "$ESBX" $verb >/dev/null 2>"$BATS_TEST_TMPDIR/err" && rc=0 || rc=$?
      if [ "$rc" -ge 124 ]; then
        hung=$((hung + 1))
        echo "# esbx $verb blocked (killed after 4 s)" >&3
      elif [ "$rc" -ne 0 ]; then
        count_refusal "$verb" "$rc"
      fi
    done
    # Nothing kills a publish that blocks: it keeps the session lock, as it
    # did inside esbxd, and discard below has to wait for it.
    "$ESBX" publish s1 -m race >/dev/null 2>"$BATS_TEST_TMPDIR/err" &
    pid=$!
    BG_PIDS+=("$pid")
    for _ in $(seq 400); do kill -0 "$pid" 2>/dev/null || break; sleep 0.01; done
    runs=$((runs + 1))
    if kill -0 "$pid" 2>/dev/null; then
      hung=$((hung + 1))
      echo "# esbx publish still blocked after 4 s" >&3
      continue
    fi
    wait "$pid" && rc=0 || rc=$?
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 3 ]; then
      count_refusal publish "$rc"
    fi
  done

  # Nothing holds the session lock: discard finishes within seconds.
  run timeout -s KILL 5 "$ESBX" discard s1
  echo "# $runs diff/publish runs during the swap race: $hung blocked, $lost refused ($fifo of them on a FIFO opened for a file)" >&3
  [ "$lost" -eq 0 ] || echo "# last refusal: $(cat "$BATS_TEST_TMPDIR/lost")" >&3
  echo "# discard after the race exited $status" >&3
  assert_equal "$hung" 0
  assert_success
  # The swap did land between a stat and an open, and was refused.
  [ "$fifo" -gt 0 ] || fail "the race was never won: the test proved nothing"
  assert_file_not_exists "$ESBX_ROOT/sessions/s1/session.json"
}

# ---- 14 ---------------------------------------------------------------------

@test "boundary 14: 3,000 nested directories under ulimit -n 1024: clear errors, discard and gc work" {
  setup_project
  make_session p s1
  deep_tree "$m" 3000
  make_session p s2
  esbx_ok exec s2 -- true
  pid=$(holder_pid s2)
  kill -KILL "$pid"
  for _ in $(seq 100); do proc_gone "$pid" && break; sleep 0.1; done
  make_session p s3
  deep_tree "$m" 1200
  local head
  head=$(tail -n 1 "$ESBX_ROOT/projects/p/stack")

  # Too deep to publish (paths are at most 4,095 bytes): one line that
  # names the session and the cause, no crash, nothing left behind.
  for verb in "diff s1" "diff --json s1" "diff --patch s1" "publish s1 -m deep" \
    "export s1 -o $BATS_TEST_TMPDIR/s1.tar" "export s1 --format oci-layer -o $BATS_TEST_TMPDIR/s1.oci"; do
    # shellcheck disable=SC2086
    run -1 low_fds $verb
    one_line_error s1
    assert_output --partial "too long"
  done
  assert_equal "$(tail -n 1 "$ESBX_ROOT/projects/p/stack")" "$head"
  assert_equal "$(ls -A "$ESBX_ROOT/projects/p/tmp" "$ESBX_ROOT/tmp" | grep -v ':$' | grep -c .)" 0
  [ ! -e "$BATS_TEST_TMPDIR/s1.tar" ]
  [ ! -e "$BATS_TEST_TMPDIR/s1.oci" ]

  # 1,200 levels (2,400-byte paths) is within the rules: every walk works
  # with a bounded number of open files.
  run -0 low_fds diff s3
  assert_equal "${#lines[@]}" 1201
  run -0 low_fds export s3 -o "$BATS_TEST_TMPDIR/s3.tar"
  assert_equal "$(tar -tf "$BATS_TEST_TMPDIR/s3.tar" | grep -c '/leaf$')" 1
  run -0 low_fds publish s3 -m deep
  run -0 low_fds fsck
  run -0 low_fds export p -o "$BATS_TEST_TMPDIR/p.tar"
  assert_equal "$(tar -tf "$BATS_TEST_TMPDIR/p.tar" | grep -c '/leaf$')" 1
  run -0 low_fds export p --format oci-layer -o "$BATS_TEST_TMPDIR/p.oci"

  # What a discard or a publish that died half-way leaves: deep trees in
  # the temp areas.
  mkdir "$ESBX_ROOT/tmp/discard-gone-000000000000" "$ESBX_ROOT/projects/p/tmp/0123456789abcdef"
  deep_tree "$ESBX_ROOT/tmp/discard-gone-000000000000" 3000
  deep_tree "$ESBX_ROOT/projects/p/tmp/0123456789abcdef" 3000

  run -0 low_fds session inspect s1
  run -0 timeout -s KILL 20 bash -c "ulimit -n 1024 && exec \"\$ESBX\" discard s1"
  assert_file_not_exists "$ESBX_ROOT/sessions/s1/session.json"
  run -0 timeout -s KILL 20 bash -c "ulimit -n 1024 && exec \"\$ESBX\" gc"
  assert_output --partial "cleaned session \`s2\`: holder died"
  assert_output --partial "removed tmp/discard-gone-000000000000"
  assert_output --partial "removed projects/p/tmp/0123456789abcdef"
  assert_equal "$(ls -A "$ESBX_ROOT/tmp" "$ESBX_ROOT/projects/p/tmp" | grep -v ':$' | grep -c .)" 0
  run -0 low_fds discard s3

  # One leftover that cannot be removed stops gc of nothing else.
  mkdir -p "$ESBX_ROOT/tmp/discard-a-000000000000" "$ESBX_ROOT/tmp/discard-z-000000000000" \
    "$ESBX_ROOT/projects/p/tmp/fedcba9876543210"
  touch "$ESBX_ROOT/tmp/discard-a-000000000000/stuck"
  chattr +i "$ESBX_ROOT/tmp/discard-a-000000000000/stuck" ||
    skip "chattr +i is not supported on $(stat -f -c %T "$ESBX_ROOT")"
  IMMUTABLE+=("$ESBX_ROOT/tmp/discard-a-000000000000/stuck")
  make_session p s4
  esbx_ok exec s4 -- true
  pid=$(holder_pid s4)
  kill -KILL "$pid"
  for _ in $(seq 100); do proc_gone "$pid" && break; sleep 0.1; done
  run -1 low_fds gc
  assert_output --partial "tmp/discard-a-000000000000"
  assert_output --partial "cleaned session \`s4\`: holder died"
  assert_output --partial "removed tmp/discard-z-000000000000"
  assert_output --partial "removed projects/p/tmp/fedcba9876543210"
}

# ---- 18 ---------------------------------------------------------------------

# A busybox root for runc (as in 40-runtime.bats).
make_rootfs() {
  local busybox=/bin/busybox a
  ROOTFS=$BATS_TEST_TMPDIR/rootfs
  file -L "$busybox" | grep -q 'statically linked' || skip "needs busybox-static"
  mkdir -p "$ROOTFS"/{bin,proc,sys,dev,tmp,etc,work}
  cp "$busybox" "$ROOTFS/bin/busybox"
  for a in $("$busybox" --list); do
    [ "$a" = busybox ] || ln -sf /bin/busybox "$ROOTFS/bin/$a"
  done
}

# `bundle DIR SOURCE`: a bundle running `sleep 1001` with SOURCE bound at /work.
bundle() {
  local dir=$1 source=$2
  mkdir -p "$dir"
  (cd "$dir" && runc spec)
  jq --arg root "$ROOTFS" --arg s "$source" \
    '.root.path = $root | .process.terminal = false | .process.args = ["sleep", "1001"]
     | .mounts += [{"destination": "/work", "type": "bind", "source": $s, "options": ["rbind", "rw"]}]' \
    "$dir/config.json" >"$dir/config.json.new"
  mv "$dir/config.json.new" "$dir/config.json"
  cp "$dir/config.json" "$dir/orig.json"
}

# `create ID DIR`: esbx-runtime create as the containerd shim calls it.
create() {
  "$RT" --root "$RUNC_ROOT" --log "$LOG" --log-format json create --bundle "$2" \
    --pid-file "$BATS_TEST_TMPDIR/$1.pid" "$1" </dev/null >"$BATS_TEST_TMPDIR/$1.out" 2>&1
}

# `refused ID DIR WHAT`: create fails, says why (WHAT), changes nothing, and
# session b gets no holder and no container.
refused() {
  local id=$1 dir=$2 what=$3
  run create "$id" "$dir"
  if [ "$status" -eq 0 ]; then
    fail "create $id succeeded: $(jq -r '.annotations["io.esbx.session"]' "$dir/config.json")"
  fi
  run bash -c 'grep "\"level\":\"error\"" "$LOG" | tail -n 1 | jq -r .msg'
  echo "# $id: $output" >&3
  assert_output --partial "$what"
  assert_output --partial "symlink"
  cmp "$dir/orig.json" "$dir/config.json"
  ! runc --root "$RUNC_ROOT" list -q | grep -qx "$id" || fail "container $id exists"
  assert_file_not_exists "$ESBX_ROOT/sessions/b/holder.json"
  ! grep -qs container-attached "$ESBX_ROOT/sessions/b/events.jsonl" ||
    fail "a container was attached to session b"
}

@test "boundary 18: a symlink planted in session a never attaches a container to session b" {
  command -v runc >/dev/null || skip "runc is not installed"
  [ -x "$RT" ] || skip "esbx-runtime is not built"
  make_rootfs
  RUNC_ROOT=$BATS_TEST_TMPDIR/runc
  LOG=$BATS_TEST_TMPDIR/log.json
  export RUNC_ROOT LOG
  setup_project
  make_session p a
  local ma=$m
  make_session p b
  echo "secret of b" >"$m/secret"
  mkdir "$ma/sub" "$ma/dir"
  # What an agent in session a can plant: relative, absolute, deeper.
  ln -s ../../b/merged "$ma/rel"
  ln -s "$ESBX_ROOT/sessions/b/merged" "$ma/abs"
  ln -s ../../../b/merged "$ma/dir/link"
  ln -s . "$ma/self"
  # And a host symlink (the operator's) that leads into a's content.
  ln -s "$ma/rel" "$BATS_TEST_TMPDIR/host-link"

  bundle "$BATS_TEST_TMPDIR/b1" "$ma/rel"
  refused c1 "$BATS_TEST_TMPDIR/b1" "rel"
  bundle "$BATS_TEST_TMPDIR/b2" "$ma/abs"
  refused c2 "$BATS_TEST_TMPDIR/b2" "abs"
  bundle "$BATS_TEST_TMPDIR/b3" "$ma/dir/link/sub"
  refused c3 "$BATS_TEST_TMPDIR/b3" "dir/link"
  bundle "$BATS_TEST_TMPDIR/b4" "$ma/self/sub"
  refused c4 "$BATS_TEST_TMPDIR/b4" "self"
  bundle "$BATS_TEST_TMPDIR/b5" "$BATS_TEST_TMPDIR/host-link"
  refused c5 "$BATS_TEST_TMPDIR/b5" "rel"

  # A real directory of a's merged view attaches to a, and only a.
  bundle "$BATS_TEST_TMPDIR/b6" "$ma/sub"
  create c6 "$BATS_TEST_TMPDIR/b6" || fail "create c6: $(cat "$BATS_TEST_TMPDIR/c6.out" "$LOG")"
  run jq -r '.annotations["io.esbx.session"]' "$BATS_TEST_TMPDIR/b6/config.json"
  assert_output a
  assert_file_not_exists "$ESBX_ROOT/sessions/b/holder.json"
}
