#!/usr/bin/env bats
# Sessions in a user namespace of their own (the default where the store's
# filesystem can idmap): root inside is an unprivileged id range of the
# host, files keep their real owners in the layers, and a store that
# cannot idmap falls back with a warning.

ESBX_USERNS=auto
load gateway_helpers

setup() { setup_project; }

teardown() {
  [ -z "${GW_DIR:-}" ] || teardown_gateway
  [ -z "${RAMFS:-}" ] || { teardown_store; umount -l "$RAMFS" 2>/dev/null || true; rmdir "$RAMFS" 2>/dev/null || true; }
  teardown_store
}

# The host uid of the session's root, from session inspect.
userns_uid() {
  "$ESBX" session inspect "$1" | sed -n 's/^ *"uid": *\([0-9]*\).*/\1/p' | head -n1
}

# The host pid of the process of session S whose command line is exactly CMD.
host_pid_of() {
  local pid i
  for i in $(seq 100); do
    for pid in $(pgrep -x -f "$1"); do
      echo "$pid"
      return 0
    done
    sleep 0.1
  done
  return 1
}

@test "root of a session is not root of the host: its uid_map is not the identity" {
  esbx_ok session create p --name s1
  esbx_ok exec s1 -- cat /proc/self/uid_map
  read -r inside outside count <<<"$output"
  [ "$inside" = 0 ]
  [ "$outside" != 0 ]
  [ "$count" = 65536 ]
  esbx_ok exec s1 -- id -u
  [ "$output" = 0 ]
  # The holder and the command are that uid on the host.
  pid=$(holder_pid s1)
  run awk '/^Uid:/ {print $2}' "/proc/$pid/status"
  [ "$output" = "$outside" ]
  esbx_ok session inspect s1
  assert_output --partial '"mode": "userns"'
  [ "$(userns_uid s1)" = "$outside" ]
}

@test "two sessions get ranges that do not overlap" {
  # Slots of the test's own: the host's are shared with every store here,
  # and another one's session could take a freed slot first.
  export ESBX_USERNS_RUN_DIR=$BATS_TEST_TMPDIR/userns
  esbx_ok session create p --name s1
  esbx_ok session create p --name s2
  a=$(userns_uid s1)
  b=$(userns_uid s2)
  [ -n "$a" ] && [ -n "$b" ]
  [ $((a > b ? a - b : b - a)) -ge 65536 ]
  # A discarded session's range is free again and taken by the next one.
  esbx_ok discard s1
  esbx_ok session create p --name s3
  [ "$(userns_uid s3)" = "$a" ]
}

@test "a file written as root in the session is owned by 0 in the layer and in export" {
  esbx_ok session create p --name s1
  esbx_ok exec s1 -- sh -c 'echo x >/workspace/by-root && mkdir /workspace/app && echo y >/workspace/app/f && chown -R 1000:1001 /workspace/app'
  # The upper holds the real ids, not the host's view of them.
  run stat -c '%u:%g' "$ESBX_ROOT/sessions/s1/upper/by-root" "$ESBX_ROOT/sessions/s1/upper/app/f"
  assert_output $'0:0\n1000:1001'
  esbx_ok export s1 -o "$BATS_TEST_TMPDIR/s1.tar"
  run tar -tvf "$BATS_TEST_TMPDIR/s1.tar" --numeric-owner
  assert_success
  assert_line --regexp '^-rw-r--r-- 0/0 .* by-root$'
  assert_line --regexp '^-rw-r--r-- 1000/1001 .* app/f$'
  esbx_ok publish s1
  head=$(head_of)
  run stat -c '%u:%g' "$ESBX_ROOT/projects/p/layers/$head/diff/by-root" \
    "$ESBX_ROOT/projects/p/layers/$head/diff/app/f"
  assert_output $'0:0\n1000:1001'
  esbx_ok export p -o "$BATS_TEST_TMPDIR/p.tar"
  run tar -tvf "$BATS_TEST_TMPDIR/p.tar" --numeric-owner
  assert_line --regexp '^-rw-r--r-- 0/0 .* by-root$'
  # And a new session sees the project's files with the owners they have.
  esbx_ok session create p --name s2
  esbx_ok exec s2 -- stat -c '%u:%g %n' /workspace/by-root /workspace/app/f /workspace/README
  assert_output $'0:0 /workspace/by-root\n1000:1001 /workspace/app/f\n0:0 /workspace/README'
}

@test "a process of one session cannot signal, trace or read another session's, though both are root inside" {
  esbx_ok session create p --name s1
  esbx_ok session create p --name s2
  esbx_ok exec -d s1 -- sleep 4243
  esbx_ok exec s2 -- true
  victim=$(host_pid_of "sleep 4243")
  [ -n "$victim" ]
  # What escapes the mount view of s2 keeps its credentials: s2's root,
  # here in the host's pid namespace where it can name s1's process.
  # Without a user namespace of its own (the old behaviour) that is root
  # of the host.
  ns=/proc/$(holder_pid s2)/ns/user
  attacker=(nsenter --user="$ns" --setuid 0 --setgid 0 --)
  [ "$(readlink "$ns")" != "$(readlink /proc/self/ns/user)" ] || attacker=(env)
  run "${attacker[@]}" cat "/proc/$victim/environ"
  assert_failure
  run "${attacker[@]}" kill -9 "$victim"
  assert_failure
  assert_output --partial 'not permitted'
  # gdb and strace are not on every host: ptrace's attach check is the one
  # /proc/PID/mem opening goes through.
  run "${attacker[@]}" dd if="/proc/$victim/mem" bs=1 count=1 skip=4096
  assert_failure
  kill -0 "$victim"
  # s1's own root can still end it.
  esbx_ok exec s1 -- pkill -x sleep
}

@test "a small C build and npm-style chown and chmod work as root inside" {
  command -v cc >/dev/null || skip "no C compiler on this host"
  esbx_ok session create p --name s1
  esbx_ok exec s1 -- sh -c '
    set -e
    mkdir -p /workspace/build /workspace/node_modules/pkg/bin
    cd /workspace/build
    for i in 1 2 3; do printf "int f%s (void) { return %s; }\n" $i $i >f$i.c; done
    printf "int f1 (void); int f2 (void); int f3 (void);\nint main (void) { return f1 () + f2 () + f3 () - 6; }\n" >main.c
    cc -c f1.c f2.c f3.c main.c
    cc -o app f1.o f2.o f3.o main.o
    ./app
    echo "#!/bin/sh" >/workspace/node_modules/pkg/bin/run
    chmod 0755 /workspace/node_modules/pkg/bin/run
    chown -R 1000:1000 /workspace/node_modules
    chmod -R g+w /workspace/node_modules
    stat -c "%u:%g %a" /workspace/node_modules/pkg/bin/run
    touch -d @0 /workspace/build/app'
  assert_output '1000:1000 775'
  run stat -c '%u:%g %a' "$ESBX_ROOT/sessions/s1/upper/node_modules/pkg/bin/run"
  assert_output '1000:1000 775'
  esbx_ok exec --user 1000:1000 s1 -- sh -c 'echo ok >/workspace/node_modules/pkg/x && id -u'
  assert_output 1000
}

@test "session create --userns off runs as root of the host, as before" {
  esbx_ok session create p --name s1 --userns off
  esbx_ok exec s1 -- cat /proc/self/uid_map
  read -r inside outside count <<<"$output"
  [ "$inside:$outside:$count" = "0:0:4294967295" ]
  esbx_ok session inspect s1
  assert_output --partial '"requested": "off"'
  assert_output --partial '"mode": "off"'
  esbx_fails 2 session create p --name s2 --userns maybe
  assert_output --partial 'invalid --userns `maybe`'
  # The store's default.
  echo 'userns = off' >"$ESBX_ROOT/defaults.conf"
  esbx_ok session create p --name s3
  esbx_ok session inspect s3
  assert_output --partial '"mode": "off"'
}

@test "a store whose filesystem cannot idmap (ramfs) falls back with a warning and still works" {
  RAMFS=$(mktemp -d /tmp/esbx-ramfs.XXXXXX)
  mount -t ramfs none "$RAMFS"
  teardown_store
  ESBX_ROOT=$RAMFS/store
  export ESBX_ROOT
  make_tree "$BATS_TEST_TMPDIR/src2"
  esbx_ok project create p --from "$BATS_TEST_TMPDIR/src2"
  run "$ESBX" session create p --name s1
  assert_success
  assert_output --partial 'no user namespace'
  assert_output --partial 'ramfs cannot be idmapped'
  esbx_ok session inspect s1
  assert_output --partial '"requested": "auto"'
  assert_output --partial '"mode": "off"'
  assert_output --partial '"reason"'
  esbx_ok exec s1 -- sh -c 'cat /proc/self/uid_map; echo x >/workspace/f'
  assert_output --partial '4294967295'
  esbx_ok publish s1
}

@test "the gateway's file writes act as the session's root: a new file is uid 0 in the upper" {
  setup_gateway
  esbx_ok session create p --name g1
  t=$(token runtime)
  gw_expect 200 PUT "/v1/sessions/g1/files?path=new.txt" "$t" 'data'
  run stat -c '%u:%g' "$ESBX_ROOT/sessions/g1/upper/new.txt"
  assert_output 0:0
  esbx_ok exec g1 -- stat -c '%u:%g' /workspace/new.txt
  assert_output 0:0
  # And the daemon's own thread is root again afterwards: a session
  # without a user namespace is still written as host root.
  esbx_ok session create p --name g2 --userns off
  gw_expect 200 PUT "/v1/sessions/g2/files?path=new.txt" "$t" 'data'
  run stat -c '%u:%g' "$ESBX_ROOT/sessions/g2/upper/new.txt"
  assert_output 0:0
}

@test "MCP's file writes act as the session's root: a new file is uid 0 in the upper" {
  esbx_ok session create p --name m1
  esbx_ok session create p --name m2 --userns off
  run python3 - "$ESBX" <<'EOF'
import json, subprocess, sys
p = subprocess.Popen([sys.argv[1], "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
def call(i, s):
    return json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {
        "name": "file_write", "arguments": {"session": s, "path": "d/new.txt", "contents": "x"}}})
lines = ['{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bats","version":"1"}}}',
         '{"jsonrpc":"2.0","method":"notifications/initialized"}', call(2, "m1"), call(3, "m2")]
print(p.communicate(("\n".join(lines) + "\n").encode())[0].decode())
EOF
  assert_success
  assert_output --partial '"id":2,"result"'
  assert_output --partial '"id":3,"result"'
  refute_output --partial '"isError":true'
  # Made by the session's root: uid 0 in the layer, the directory too; the
  # server's thread is host root again for the session without one.
  for s in m1 m2; do
    run stat -c '%u:%g' "$ESBX_ROOT/sessions/$s/upper/d" "$ESBX_ROOT/sessions/$s/upper/d/new.txt"
    assert_output $'0:0\n0:0'
  done
  esbx_ok exec m1 -- sh -c 'stat -c %u:%g /workspace/d/new.txt; echo y >>/workspace/d/new.txt'
  assert_output 0:0
}

@test "all id ranges in use: a session that asks for one is refused with the cause, and nothing is left" {
  ESBX_USERNS_RUN_DIR=$BATS_TEST_TMPDIR/userns ESBX_USERNS_SLOTS=1 "$ESBX" session create p --name s1
  run env ESBX_USERNS_RUN_DIR="$BATS_TEST_TMPDIR/userns" ESBX_USERNS_SLOTS=1 "$ESBX" session create p --name s2
  assert_failure
  assert_output --partial "all 1 user namespace id ranges of this host are in use"
  esbx_fails 1 session inspect s2
  # Once s1 is gone its range is free again.
  ESBX_USERNS_RUN_DIR=$BATS_TEST_TMPDIR/userns ESBX_USERNS_SLOTS=1 "$ESBX" discard s1
  run env ESBX_USERNS_RUN_DIR="$BATS_TEST_TMPDIR/userns" ESBX_USERNS_SLOTS=1 "$ESBX" session create p --name s2
  assert_success
}

@test "a range is taken from the lowest free slot; with every slot claimed, a stale claim is taken back and a live one never" {
  export ESBX_USERNS_RUN_DIR=$BATS_TEST_TMPDIR/userns ESBX_USERNS_SLOTS=3
  esbx_ok session create p --name s1
  # Slot 1: a claim whose session is gone (a crash).  Slot 2 free.
  printf '%s\ngone\n' "$ESBX_ROOT" >"$ESBX_USERNS_RUN_DIR/1"
  esbx_ok session create p --name s2
  [ "$(jq .slot "$ESBX_ROOT/sessions/s2/userns.json")" = 2 ]
  # Every slot claimed: the stale one is taken back, not s1's or s2's.
  esbx_ok session create p --name s3
  [ "$(jq .slot "$ESBX_ROOT/sessions/s3/userns.json")" = 1 ]
  [ "$(sed -n 2p "$ESBX_USERNS_RUN_DIR/1")" = s3 ]
  esbx_fails 1 session create p --name s4
  assert_output --partial "all 3 user namespace id ranges of this host are in use"
  # Its view unmounted behind its back (a crash between claim and
  # release) and mounted again, s2 keeps its slot and the range of it.
  esbx_ok session stop s2
  umount "$ESBX_ROOT/sessions/s2/merged"
  esbx_ok exec s2 -- true
  [ "$(jq .slot "$ESBX_ROOT/sessions/s2/userns.json")" = 2 ]
  [ "$(jq .uid "$ESBX_ROOT/sessions/s2/userns.json")" = $((1073741824 + 2 * 65536)) ]
  [ "$(ls "$ESBX_USERNS_RUN_DIR")" = "$(printf '0\n1\n2')" ]
  # gc frees the claims of sessions of this store that are gone, and only those.
  printf '%s\ngone\n' "$ESBX_ROOT" >"$ESBX_USERNS_RUN_DIR/2000"
  printf '/elsewhere\ngone\n' >"$ESBX_USERNS_RUN_DIR/2001"
  esbx_ok gc
  assert_output --partial "freed user namespace range 2000 of session \`gone\`"
  [ "$(ls "$ESBX_USERNS_RUN_DIR")" = "$(printf '0\n1\n2\n2001')" ]
  rm "$ESBX_USERNS_RUN_DIR/2001"
  for s in s1 s2 s3; do esbx_ok discard --force "$s"; done
  [ -z "$(find "$ESBX_USERNS_RUN_DIR" -name '[0-9]*')" ]
}
