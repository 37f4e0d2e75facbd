#!/usr/bin/env bats
# The session boundary: each test tries one way out of a session for real
# (docs/SECURITY.md lists them item by item) and checks that the host, the
# caller and other sessions are untouched.  Items 10-14 and 16-18 have their
# own suites (71-boundary-gateway.bats, 72-boundary-store.bats).

bats_require_minimum_version 1.5.0
# In a user namespace, the default (helpers.bash).
ESBX_USERNS=auto
load helpers

setup() {
  setup_session
  CANARY=/var/tmp/esbx-canary.$$.$RANDOM
  export CANARY
}

teardown() {
  [ -n "${SAVED_CORE_PATTERN:-}" ] && printf '%s\n' "$SAVED_CORE_PATTERN" >/proc/sys/kernel/core_pattern
  [ -n "${BG_PID:-}" ] && kill -KILL "$BG_PID" 2>/dev/null
  [ -n "${LOOPDEV:-}" ] && losetup -d "$LOOPDEV" 2>/dev/null
  rm -rf "$CANARY" "${HOST_FILES[@]}" 2>/dev/null
  teardown_store
  [ -n "${LINKED_STORE:-}" ] && rm -rf "$LINKED_STORE" "$LINKED_STORE.link"
  true
}

HOST_FILES=()

# bats-file's assert_file_not_exists checks only for regular files.
assert_absent() {
  [ ! -e "$1" ] && [ ! -L "$1" ] || fail "$1 exists on the host"
}

# A python3 one-liner in session s1 (python3 from the host's /usr).
py() { run "$ESBX" exec s1 -- python3 -c "$1"; }

@test "boundary 1: /proc/sys is read-only: core_pattern cannot run a workspace script on the host" {
  SAVED_CORE_PATTERN=$(cat /proc/sys/kernel/core_pattern)
  printf '#!/bin/sh\ntouch %s\n' "$CANARY" | session_put s1 evil.sh
  (cd "$m" && as_session_root s1 chmod +x evil.sh)
  run "$ESBX" exec s1 -- sh -c "echo '|$m/evil.sh' >/proc/sys/kernel/core_pattern"
  assert_failure
  assert_equal "$(cat /proc/sys/kernel/core_pattern)" "$SAVED_CORE_PATTERN"
  run "$ESBX" exec s1 -- sh -c 'ulimit -c unlimited; kill -SEGV $$'
  sleep 0.5
  assert_absent "$CANARY"
  # The rest of Docker's read-only and masked paths.
  run "$ESBX" exec s1 -- sh -c 'echo h >/proc/sysrq-trigger'
  assert_failure
  # gVisor's /proc/sys/kernel/hostname is its own kernel's: the sandbox's
  # name, not the host's.
  WRITABLE="/proc/sys/kernel/hostname /proc/irq/default_smp_affinity"
  [ "${ESBX_TEST_ISOLATION:-}" != gvisor ] || WRITABLE=/proc/irq/default_smp_affinity
  esbx_ok exec --env WRITABLE="$WRITABLE" s1 -- sh -c 'for f in /proc/kcore /proc/keys /proc/timer_list /proc/sched_debug; do
      [ -e $f ] && [ -s $f ] && head -c 1 $f >/dev/null 2>&1 && echo "readable $f"; done
    for d in /proc/acpi /proc/scsi /sys/firmware; do
      [ -d $d ] && [ -n "$(ls -A $d 2>/dev/null)" ] && echo "listed $d"; done
    for f in $WRITABLE; do
      [ -e $f ] && (: >>$f) 2>/dev/null && echo "writable $f"; done; true'
  assert_output ""
}

@test "boundary 2: no host unix socket is reachable from a session" {
  sock=/run/esbx-test-$$.sock
  HOST_FILES+=("$sock")
  python3 -c '
import os, socket, sys
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o600); s.listen(8)
a = socket.socket(socket.AF_UNIX); a.bind("\0" + sys.argv[1]); a.listen(8)
while True: s.accept()' "$sock" &
  BG_PID=$!
  for _ in $(seq 50); do [ -S "$sock" ] && break; sleep 0.1; done
  for path in "$sock" "/var$sock"; do
    py "import socket; s = socket.socket(socket.AF_UNIX); s.connect('$path'); print('connected')"
    refute_output --partial connected
  done
  py "import socket; s = socket.socket(socket.AF_UNIX); s.connect('\0$sock'); print('connected')"
  refute_output --partial connected
  # Nothing of the host's /run is there at all.
  esbx_ok exec s1 -- sh -c 'find /run /var/run /tmp -type s 2>/dev/null; true'
  assert_output ""
}

@test "boundary 3: a session cannot reach esbxd's plugin socket to discard another session" {
  [ -x "$ESBX_BUILD/volume-plugin/esbxd" ] || skip "esbxd not built"
  mkdir -p /run/docker/plugins
  psock=/run/docker/plugins/esbxt-b3-$$.sock
  HOST_FILES+=("$psock")
  setsid "$ESBX_BUILD/volume-plugin/esbxd" --root "$ESBX_ROOT" --plugin-socket "$psock" \
    --gateway-socket none --metrics none </dev/null >"$BATS_TEST_TMPDIR/esbxd.log" 2>&1 &
  BG_PID=$!
  for _ in $(seq 100); do [ -S "$psock" ] && break; sleep 0.1; done
  assert [ -S "$psock" ]
  run curl -s --unix-socket "$psock" -d '{"Name":"victim","Opts":{"project":"p"}}' http://p/VolumeDriver.Create
  assert_output '{}'
  echo work | session_put victim precious
  run "$ESBX" exec s1 -- sh -c "curl -s --max-time 5 --unix-socket $psock -d '{\"Name\":\"victim\"}' http://p/VolumeDriver.Remove; curl -s --max-time 5 --unix-socket /var$psock -d '{}' http://p/VolumeDriver.List"
  # No answer at all: the socket is not there.
  refute_output --partial '{'
  esbx_ok session inspect victim
  assert_file_exists "$ESBX_ROOT/sessions/victim/upper/precious"
}

# `on_pty SCRIPT`: run SCRIPT with sh under a new pty that is its
# controlling terminal, typing nothing until SCRIPT prints READY (so that
# what it runs before cannot read what is typed, however slow it is under
# load), then "clean" and a newline; prints what appeared on the terminal.
# SCRIPT gets 60 s, then it is killed.
on_pty() {
  python3 - "$1" <<'EOF'
import os, pty, select, signal, sys, time
pid, fd = pty.fork()
if pid == 0:
    os.execvp("sh", ["sh", "-c", sys.argv[1]])
out, typed, t0, done = b"", False, time.time(), False
while time.time() - t0 < 60:
    if not typed and b"READY" in out:
        os.write(fd, b"clean\n")
        typed = True
    r, _, _ = select.select([fd], [], [], 0.2)
    if r:
        try:
            data = os.read(fd, 4096)
        except OSError:
            break
        if not data:
            break
        out += data
if os.waitpid(pid, os.WNOHANG) == (0, 0):
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
sys.stdout.write(out.decode(errors="replace"))
EOF
}

@test "boundary 4: a session command never holds the caller's terminal (TIOCSTI, /dev/pts)" {
  inject='import fcntl, termios
for c in b"echo INJECTED\n": fcntl.ioctl(0, termios.TIOCSTI, bytes([c]))'
  for user in "" "--user 1000"; do
    run on_pty "\"$ESBX\" exec $user s1 -- python3 -c '$inject'; echo READY; read line; echo \"GOT:\$line\""
    assert_output --partial "GOT:clean"
    refute_output --partial "GOT:echo INJECTED"
  done
  # The caller's pty is not in the session's /dev/pts, and writing to it
  # from the session does not reach the caller's terminal.
  run on_pty "tty >$BATS_TEST_TMPDIR/tty; \"$ESBX\" exec s1 -- sh -c 'ls /dev/pts; for p in /dev/pts/[0-9]*; do echo FORGED >\$p; done' >/dev/null 2>&1; echo READY; read line"
  refute_output --partial FORGED
  [ "${ESBX_TEST_ISOLATION:-}" != gvisor ] || return 0 # no exec --tty there
  # With -t the command gets a terminal of the session's own.
  run on_pty "\"$ESBX\" exec -t s1 -- sh -c 'tty; test -t 0 && echo interactive'"
  assert_output --partial interactive
  assert_output --regexp "/dev/pts/[0-9]+"
  # The filter refuses TIOCSTI even on the session's own terminal.
  run on_pty "\"$ESBX\" exec -t s1 -- python3 -c '$inject' 2>&1; echo rc=\$?"
  assert_output --partial "Operation not permitted"
}

@test "boundary 5: no host device is reachable; the workspace is nodev" {
  img=$BATS_TEST_TMPDIR/disk.img
  printf 'SECRET-BLOCK-DATA' >"$img"
  truncate -s 1M "$img"
  LOOPDEV=$(losetup -f --show "$img")
  read -r maj min < <(stat -c '%t %T' "$LOOPDEV" | while read -r a b; do echo $((16#$a)) $((16#$b)); done)
  run "$ESBX" exec s1 -- sh -c "head -c 17 $LOOPDEV"
  refute_output --partial SECRET
  for dir in /tmp /workspace /dev /dev/shm; do
    run "$ESBX" exec s1 -- sh -c "mknod $dir/blk b $maj $min && head -c 17 $dir/blk"
    refute_output --partial SECRET
  done
  if [ "${ESBX_TEST_ISOLATION:-}" = gvisor ]; then
    # gVisor's /dev is a tmpfs of its kernel: no kmsg device to reach.
    run "$ESBX" exec s1 -- test -c /dev/kmsg
  else
    run "$ESBX" exec s1 -- sh -c 'echo "<0>forged" >/dev/kmsg'
  fi
  assert_failure
  # A minimal /dev that works.
  esbx_ok exec s1 -- sh -c 'find /dev -mindepth 1 -maxdepth 1 -printf "%f\n" | sort | tr "\n" " "'
  for n in null zero full random urandom tty ptmx pts shm fd stdin stdout stderr; do
    assert_output --partial "$n "
  done
  refute_output --partial loop
  refute_output --partial kmsg
  esbx_ok exec s1 -- sh -c 'head -c 4 /dev/urandom | wc -c; echo x >/dev/null; head -c 2 /dev/zero | wc -c'
  assert_output $'4\n2'
}

@test "boundary 6: the session's root is built from an allow-list; host secrets are absent" {
  secret=/root/esbx-secret-$$
  HOST_FILES+=("$secret" /var/lib/esbx-secret-$$ /opt/esbx-secret-$$)
  echo TOPSECRET >"$secret"
  echo TOPSECRET >/var/lib/esbx-secret-$$
  mkdir -p /opt && echo TOPSECRET >/opt/esbx-secret-$$
  chmod 600 "$secret" /var/lib/esbx-secret-$$ /opt/esbx-secret-$$
  for f in /etc/shadow /etc/gshadow "$secret" /var/lib/esbx-secret-$$ /opt/esbx-secret-$$ \
    /etc/sudoers /etc/machine-id /etc/ssh/ssh_host_ed25519_key; do
    run "$ESBX" exec s1 -- cat "$f"
    refute_output --partial TOPSECRET
    refute_output --regexp 'root:[^:]*:[0-9]+:'
    [ -f "$f" ] && refute_output "$(cat "$f")"
  done
  esbx_ok exec s1 -- sh -c 'ls / | tr "\n" " "'
  for gone in var opt srv mnt media boot; do
    [[ " $output " != *" $gone "* ]] || fail "/$gone of the host is in the session: $output"
  done
  # /root is the session's own (HOME of uid 0): an empty tmpfs, not the host's.
  esbx_ok exec s1 -- sh -c 'find /root -mindepth 1 -maxdepth 1 | wc -l; stat -f -c %T /root'
  assert_output $'0\ntmpfs'
  # What agents need still works.
  esbx_ok exec s1 -- sh -c 'id -un; head -1 /etc/passwd; printf "int main(void){return 3;}" >t.c && cc -o t t.c; ./t; echo cc=$?'
  assert_line "root"
  assert_line --regexp "^root:x:0:0:"
  assert_line "cc=3"
  esbx_ok exec s1 -- python3 -c 'print(6*7)'
  assert_output 42
  esbx_ok exec s1 -- sh -c 'echo x >/home/f && echo y >/run/f && echo z >/tmp/f && cat /home/f /run/f /tmp/f'
  assert_output $'x\ny\nz'
}

@test "boundary 7: the store stays out of sight when a parent of its root is a symlink" {
  teardown_store
  LINKED_STORE=/var/lib/esbx-real-$$
  mkdir -p "$LINKED_STORE"
  ln -s "$LINKED_STORE" "$LINKED_STORE.link"
  ESBX_ROOT=$LINKED_STORE.link/store
  export ESBX_ROOT
  make_tree "$BATS_TEST_TMPDIR/src7"
  esbx_ok project create p --from "$BATS_TEST_TMPDIR/src7"
  make_session p a
  make_session p b
  echo SESSION-B-SECRET | session_put b secret
  for root in "$ESBX_ROOT" "$LINKED_STORE/store"; do
    run "$ESBX" exec a -- cat "$root/sessions/b/upper/secret"
    refute_output --partial SESSION-B-SECRET
    run "$ESBX" exec a -- cat "$root/sessions/b/merged/secret"
    refute_output --partial SESSION-B-SECRET
  done
}

@test "boundary 8: kill 0 reaches only the command's own process group; the event outlives the caller" {
  cat >"$BATS_TEST_TMPDIR/caller.sh" <<EOF
sleep 300 &
echo \$! >"$BATS_TEST_TMPDIR/canary.pid"
"$ESBX" exec s1 -- sh -c 'kill -KILL 0'
echo "exec=\$?" >"$BATS_TEST_TMPDIR/result"
EOF
  setsid sh "$BATS_TEST_TMPDIR/caller.sh" </dev/null >/dev/null 2>&1 &
  for _ in $(seq 100); do [ -s "$BATS_TEST_TMPDIR/result" ] && break; sleep 0.1; done
  canary=$(cat "$BATS_TEST_TMPDIR/canary.pid")
  BG_PID=$canary
  assert [ -d "/proc/$canary" ]
  run cat "$BATS_TEST_TMPDIR/result"
  assert_output "exec=137"
  # The caller dies while the command runs: the exec event is still written.
  "$ESBX" exec s1 -- sh -c 'sleep 2; echo done' >/dev/null &
  caller=$!
  sleep 0.7
  kill -KILL "$caller"
  sleep 3
  esbx_ok --json events s1
  run python3 -c '
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
done = [e for e in ev if e["type"] == "exec" and "sleep 2" in " ".join(e["argv"])]
print(done[0]["exit_status"] if done else "no event")' "$ESBX_ROOT/sessions/s1/events.jsonl"
  assert_output "0"
}

@test "boundary 9: seccomp is an allow-list: io_uring, AF_VSOCK, READ_IMPLIES_EXEC, NUMA calls, sysfs, ustat, new syscalls" {
  skip_gvisor "the syscalls reach gVisor's kernel (io_uring is its own), not the host's"
  # x86_64 numbers; each call must fail with EPERM or ENOSYS.
  py '
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
buf = ctypes.create_string_buffer(512)
calls = {
  "io_uring_setup": (425, 8, buf),
  "io_uring_enter": (426, 0, 0, 0, 0, 0, 0),
  "io_uring_register": (427, 0, 0, 0, 0),
  "socket(AF_VSOCK)": (41, 40, 1, 0),
  "socket(AF_VSOCK, upper bits set)": (41, ctypes.c_long(0x100000028), 1, 0),
  "personality(READ_IMPLIES_EXEC, upper bits set)": (135, ctypes.c_long(0x100000000)),
  "personality(READ_IMPLIES_EXEC)": (135, 0x0400000),
  "set_mempolicy": (238, 0, 0, 0),
  "mbind": (237, 0, 0, 0, 0, 0, 0),
  "move_pages": (279, 0, 0, 0, 0, 0, 0),
  "sysfs": (139, 3),
  "ustat": (136, 0, buf),
  "file_getattr (newer than the profile)": (468, 0, 0, 0, 0, 0),
}
for name, args in calls.items():
    ctypes.set_errno(0)
    r = libc.syscall(*args)
    e = ctypes.get_errno()
    if r >= 0 or e not in (errno.EPERM, errno.ENOSYS):
        print("passed: %s (r=%d errno=%d)" % (name, r, e))
print("checked")'
  assert_output "checked"
  # The allowed side still works: a normal socket, personality query, threads.
  py 'import socket, threading, os; socket.socket(socket.AF_INET).close(); t = threading.Thread(target=print, args=("thread",)); t.start(); t.join()'
  assert_output "thread"
}

@test "boundary 15: --workspace through a host symlink creates nothing on the host" {
  ws=/var/run/esbx-ws-$$
  HOST_FILES+=("/run/esbx-ws-$$")
  esbx_ok session create p --name w15 --workspace "$ws"
  run "$ESBX" exec w15 -- sh -c 'pwd; echo hi >f; cat f'
  assert_absent "/run/esbx-ws-$$"
  ws2=/usr/esbx-ws-$$
  HOST_FILES+=("$ws2")
  if [ "${ESBX_TEST_ISOLATION:-}" = gvisor ]; then
    # runsc would make the mount point in the host's /usr it binds.
    esbx_fails 2 session create p --name w16 --workspace "$ws2"
    assert_output --partial 'beneath the host'
    assert_absent "$ws2"
    return 0
  fi
  esbx_ok session create p --name w16 --workspace "$ws2"
  run "$ESBX" exec w16 -- true
  assert_absent "$ws2"
}

@test "boundary 11 (logs): what a command writes is kept up to the log limit, and the event says it was cut" {
  run "$ESBX" exec --log-limit 1M s1 -- sh -c 'head -c 50000000 /dev/zero; echo done >&2'
  assert_success
  assert_equal "$(stat -c %s "$ESBX_ROOT/sessions/s1/logs/1.out")" 1048576
  run cat "$ESBX_ROOT/sessions/s1/logs/1.err"
  assert_output "done"
  esbx_ok --json events s1
  assert_output --regexp '"stdout_bytes": ?50000000'
  assert_output --regexp '"stdout_truncated": ?true'
  # The default (ESBX_EXEC_LOG_LIMIT) applies without the option.
  ESBX_EXEC_LOG_LIMIT=4K run "$ESBX" exec s1 -- sh -c 'head -c 100000 /dev/zero'
  assert_equal "$(stat -c %s "$ESBX_ROOT/sessions/s1/logs/2.out")" 4096
}

# A busybox root in DIR: sh and friends, one passwd line.
make_busybox_root() {
  local dir=$1 a
  mkdir -p "$dir/bin" "$dir/etc"
  cp "$(command -v busybox)" "$dir/bin/busybox"
  for a in sh cat ls echo id; do ln -s busybox "$dir/bin/$a"; done
  echo 'root:x:0:0:image root:/root:/bin/sh' >"$dir/etc/passwd"
}

@test "boundary 6 (rootfs): --rootfs DIR|IMAGE.tar runs an image's userland, shared in the store, gc'd when unused" {
  skip_gvisor "no --rootfs"
  command -v busybox >/dev/null || skip "busybox not installed"
  make_busybox_root "$BATS_TEST_TMPDIR/img"
  tar -C "$BATS_TEST_TMPDIR/img" -cf "$BATS_TEST_TMPDIR/img.tar" .
  make_session p r1 --rootfs "$BATS_TEST_TMPDIR/img"
  make_session p r2 --rootfs "$BATS_TEST_TMPDIR/img"
  make_session p r3 --rootfs "$BATS_TEST_TMPDIR/img.tar"
  esbx_ok exec r1 -- sh -c 'cat /etc/passwd; ls /usr 2>&1; echo made >/workspace/new; cat /workspace/README'
  assert_line "root:x:0:0:image root:/root:/bin/sh"
  assert_line --partial "/usr: No such file or directory"
  assert_line "hello"
  assert_file_exists "$ESBX_ROOT/sessions/r1/upper/new"
  esbx_ok exec r3 -- cat /etc/passwd
  assert_output "root:x:0:0:image root:/root:/bin/sh"
  # One tree for both sessions of the directory, one for the archive.
  run ls "$ESBX_ROOT/rootfs"
  assert_equal "${#lines[@]}" 2
  esbx_ok --json session inspect r1
  key=$(json_field rootfs <<<"$output")
  [ -d "$ESBX_ROOT/rootfs/$key/root/bin" ]
  # The image root is read-only inside.
  run "$ESBX" exec r1 -- sh -c 'echo x >/bin/new'
  assert_failure
  esbx_ok discard r1
  esbx_ok gc
  [ -d "$ESBX_ROOT/rootfs/$key" ]
  esbx_ok discard r2
  esbx_ok gc
  assert_output --partial "removed rootfs \`$key\`"
  [ ! -e "$ESBX_ROOT/rootfs/$key" ]
  esbx_fails 2 session create p --rootfs "$BATS_TEST_TMPDIR/missing"
  assert_output --partial "missing"
}
