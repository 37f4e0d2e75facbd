#!/usr/bin/env bats
# A session's memory: every tmpfs it writes (/tmp, /run, /home, /root,
# /dev/shm) has a size, what it writes there counts in its memory limit,
# and a session that asks for no limit gets the store's default.

# In a user namespace, the default (helpers.bash).
ESBX_USERNS=auto
load helpers

setup() {
  setup_project
}

teardown() {
  teardown_store
}

# The size= of the tmpfs on PATH inside session S, in KiB ("" when none).
# In KiB, as Linux shows it ("65536k"; gVisor's kernel shows bytes).
tmpfs_size() {
  "$ESBX" exec "$1" -- awk -v p="$2" '$2 == p && $3 == "tmpfs" {
    n = split($4, o, ","); for (i = 1; i <= n; i++) if (o[i] ~ /^size=/) {
      s = substr(o[i], 6); if (s ~ /^[0-9]+$/) s = (s / 1024) "k"; print s } }' \
    /proc/mounts
}

# The session cgroup's memory limit in bytes (v1 or v2).
cgroup_memory_limit() {
  local cg
  cg=$(jq -r .cgroup "$ESBX_ROOT/sessions/$1/holder.json")
  cat "/sys/fs/cgroup/memory/$cg/memory.limit_in_bytes" 2>/dev/null ||
    cat "/sys/fs/cgroup/$cg/memory.max"
}

@test "resources: each tmpfs of a session has its documented default size" {
  make_session p s1
  # Docker's /dev/shm: 64 MiB, then ENOSPC.
  run "$ESBX" exec s1 -- sh -c 'head -c 70000000 /dev/zero >/dev/shm/fill; echo "status $?"; du -k /dev/shm/fill'
  assert_output --partial "No space left on device"
  assert_output --partial "status 1"
  assert_line --regexp '^6553[0-9]	/dev/shm/fill$'
  assert_equal "$(tmpfs_size s1 /dev/shm)" 65536k
  # An eighth of the 4 GiB default memory limit each for the others
  # (written past in the next test, with a smaller size: the same kernel
  # limit).
  local d
  for d in /tmp /run /home /root; do
    assert_equal "$(tmpfs_size s1 "$d")" 524288k
  done
}

@test "resources: --tmpfs-size and --shm-size: writing past each size fails with ENOSPC" {
  make_session p s1 --tmpfs-size 16M --shm-size 8M
  local d
  for d in /tmp /run /home /root; do
    assert_equal "$(tmpfs_size s1 "$d")" 16384k
    run "$ESBX" exec s1 -- sh -c "head -c 20000000 /dev/zero >$d/fill; echo status \$?"
    assert_output --partial "No space left on device"
    assert_output --partial "status 1"
  done
  assert_equal "$(tmpfs_size s1 /dev/shm)" 8192k
  run "$ESBX" exec s1 -- sh -c 'head -c 10000000 /dev/zero >/dev/shm/fill; echo status $?'
  assert_output --partial "No space left on device"
  # What is written stays after the writer exits: the next write finds
  # the space taken.
  run "$ESBX" exec s1 -- sh -c 'head -c 1000000 /dev/zero >/tmp/more; echo status $?'
  assert_output --partial "No space left on device"
  # Bad sizes: one line, no session.
  esbx_fails 2 session create p --name bad --tmpfs-size lots
  assert_output --partial "invalid size \`lots\`"
  esbx_fails 2 session create p --name bad --shm-size 0
  assert_output --partial "--shm-size"
  [ ! -d "$ESBX_ROOT/sessions/bad" ]
}

@test "resources: tmpfs pages count in the session's memory limit" {
  # 64 MiB of memory: each tmpfs gets an eighth (/dev/shm a sixteenth), so
  # all of them full leave a quarter for the processes.
  make_session p s1 --memory 64M
  assert_equal "$(tmpfs_size s1 /tmp)" 8192k
  assert_equal "$(tmpfs_size s1 /dev/shm)" 4096k
  local d
  for d in /tmp /run /home /root /dev/shm; do
    run "$ESBX" exec s1 -- sh -c "head -c 10000000 /dev/zero >$d/fill; echo status \$?"
    assert_output --partial "No space left on device"
  done
  # 36 MiB on tmpfs, charged to the session though no process holds them.
  esbx_ok --json session inspect s1
  local mem
  mem=$(jq -r '.runtime.memory.current' <<<"$output")
  [ "$mem" -ge $((36 << 20)) ] || fail "memory.current $mem does not count the 36 MiB of tmpfs"
  # A process that wants 100 MB on top meets the cgroup's OOM killer: it
  # is killed, the holder is not, and the next command runs.
  run "$ESBX" exec s1 -- python3 -c 'b = bytearray(100 << 20); print("allocated")'
  refute_output --partial allocated
  if [ "${ESBX_TEST_ISOLATION:-}" = gvisor ]; then
    # gVisor's memory is the sandbox's: the OOM killer ends the sandbox,
    # its tmpfs with it (docs/SECURITY.md, "Isolation tiers"); the next
    # command gets a new one.
    assert_failure
    esbx_ok exec s1 -- true
    return 0
  fi
  assert_equal "$status" 137
  run grep -c '"oom_killed":true' "$ESBX_ROOT/sessions/s1/events.jsonl"
  assert_output 1
  esbx_ok exec s1 -- sh -c 'du -k /tmp/fill; echo ok'
  assert_line ok
  assert_line --regexp '^819[0-9]	/tmp/fill$'
  # tmpfs that could fill the memory limit are refused: one line, no
  # session.
  esbx_fails 2 session create p --name s2 --memory 48M --tmpfs-size 256M
  assert_output --partial "exceed 3/4 of the memory limit 48 MiB"
  [ ! -d "$ESBX_ROOT/sessions/s2" ]
}

@test "resources: a session without --memory or --pids gets the store's default" {
  make_session p s1
  esbx_ok --json session inspect s1
  assert_equal "$(jq -r .limits.memory <<<"$output")" $((4 << 30))
  assert_equal "$(jq -r .limits.pids <<<"$output")" 4096
  esbx_ok exec s1 -- true
  assert_equal "$(cgroup_memory_limit s1)" $((4 << 30))
  # ROOT/defaults.conf sets the store's own; --memory and --pids win.
  printf 'memory = 256M\npids = 300\ntmpfs_size = 32M\nshm_size = 16M\n' >"$ESBX_ROOT/defaults.conf"
  make_session p s2
  esbx_ok --json session inspect s2
  assert_equal "$(jq -r .limits.memory <<<"$output")" $((256 << 20))
  assert_equal "$(jq -r .limits.pids <<<"$output")" 300
  assert_equal "$(tmpfs_size s2 /tmp)" 32768k
  assert_equal "$(tmpfs_size s2 /dev/shm)" 16384k
  make_session p s3 --memory 1G --pids 50 --tmpfs-size 8M
  esbx_ok --json session inspect s3
  assert_equal "$(jq -r .limits.memory <<<"$output")" $((1 << 30))
  assert_equal "$(jq -r .limits.pids <<<"$output")" 50
  assert_equal "$(tmpfs_size s3 /root)" 8192k
  # unlimited in the file: no limit for sessions that ask for none, and
  # tmpfs of their largest default size.
  printf 'memory = unlimited\npids = unlimited\n' >"$ESBX_ROOT/defaults.conf"
  make_session p s4
  esbx_ok --json session inspect s4
  assert_equal "$(jq -r .limits.memory <<<"$output")" null
  assert_equal "$(jq -r .limits.pids <<<"$output")" null
  assert_equal "$(tmpfs_size s4 /home)" 1048576k
  # A bad file: one line naming it, no session.
  printf 'memory = lots\n' >"$ESBX_ROOT/defaults.conf"
  esbx_fails 1 session create p --name s5
  assert_output --partial "defaults.conf"
  [ ! -d "$ESBX_ROOT/sessions/s5" ]
}
