#!/usr/bin/env bats
# Deterministic cleanup: discard, gc after crashes, resource limits.

# In a user namespace, the default (helpers.bash).
ESBX_USERNS=auto
load helpers

setup() { setup_project; }

session_cgroup() {
  printf 'esbx/%s.%s' "$(printf %s "$ESBX_ROOT" | sha256sum | cut -c1-8)" "$1"
}

# No cgroup directory of session $1 in any hierarchy.
no_cgroup() {
  local cg d
  cg=$(session_cgroup "$1")
  for d in /sys/fs/cgroup/*/"$cg" /sys/fs/cgroup/"$cg"; do
    if [ -e "$d" ]; then
      echo "left: $d" >&2
      return 1
    fi
  done
}

# The session's processes by their host pids, from the cgroup.
session_pids() {
  local cg
  cg=$(session_cgroup "$1")
  cat /sys/fs/cgroup/pids/"$cg"/cgroup.procs /sys/fs/cgroup/"$cg"/cgroup.procs 2>/dev/null || true
}

@test "discard leaves nothing in mountinfo, /proc or the cgroup tree" {
  esbx_ok session create p --name s1
  esbx_ok exec --detach s1 -- sleep 300
  pid=$(holder_pid s1)
  pids=$(session_pids s1)
  [ -n "$pids" ]
  esbx_ok discard s1
  wait_gone "$pid"
  for p in $pids; do wait_gone "$p"; done
  run grep -F "$ESBX_ROOT/sessions/s1" /proc/self/mountinfo
  assert_failure
  no_cgroup s1
  assert_file_not_exists "$ESBX_ROOT/sessions/s1"
  esbx_fails 1 exec s1 -- true
}

@test "gc after kill -9 of the holder: no mounts, processes or cgroups left; the files stay" {
  esbx_ok session create p --name s1
  esbx_ok exec s1 -- sh -c 'echo keep >/workspace/kept'
  esbx_ok exec --detach s1 -- sleep 300
  pid=$(holder_pid s1)
  pids=$(session_pids s1)
  kill -9 "$pid"
  wait_gone "$pid"
  esbx_ok gc
  assert_output --partial "s1"
  for p in $pids; do wait_gone "$p"; done
  no_cgroup s1
  run grep -F "$ESBX_ROOT/sessions/s1/" /proc/self/mountinfo
  assert_failure
  assert_file_not_exists "$ESBX_ROOT/sessions/s1/holder.json"
  # At rest, not lost: the next exec brings it back with its files.
  esbx_ok exec s1 -- cat /workspace/kept
  assert_output "keep"
}

@test "gc after kill -9 of esbx exec mid-run" {
  esbx_ok session create p --name s1
  "$ESBX" exec s1 -- sleep 300 3>&- &
  cli=$!
  for _ in $(seq 50); do grep -q '"exec.start"' "$ESBX_ROOT/sessions/s1/events.jsonl" 2>/dev/null && break; sleep 0.1; done
  sleep 0.2
  pid=$(holder_pid s1)
  pids=$(session_pids s1)
  [ -n "$pids" ]
  kill -9 "$cli"
  wait "$cli" || true
  esbx_ok gc
  assert_output --partial "owner crashed"
  wait_gone "$pid"
  for p in $pids; do wait_gone "$p"; done
  no_cgroup s1
  run grep -F "$ESBX_ROOT/sessions/s1/" /proc/self/mountinfo
  assert_failure
  # A second gc finds nothing more to do.
  esbx_ok gc
  refute_output --partial "s1"
}

@test "gc after kill -9 of esbx while it starts a holder" {
  esbx_ok session create p --name s1
  # Each kill lands at a different point after esbx marked the session as
  # being worked on: before, during and after the holder's setup.
  for delay in 0 0.002 0.005 0.01 0.02 0.05; do
    "$ESBX" exec s1 -- sleep 300 3>&- &
    cli=$!
    for _ in $(seq 2000); do
      compgen -G "$ESBX_ROOT/sessions/s1/owners/*" >/dev/null && break
    done
    sleep "$delay"
    kill -9 "$cli" 2>/dev/null || true
    wait "$cli" || true
    esbx_ok gc
    sleep 0.2
    esbx_ok gc
    [ -z "$(session_pids s1)" ]
    # Nor a child the killed esbx forked (the user namespace's maker):
    # left, it held the session's holder.lock and the next discard hung.
    for _ in $(seq 20); do pgrep -f "esbx exec s1 -- sleep 300" >/dev/null || break; sleep 0.1; done
    run pgrep -af "esbx exec s1 -- sleep 300"
    assert_failure
    no_cgroup s1
    run grep -F "$ESBX_ROOT/sessions/s1/" /proc/self/mountinfo
    assert_failure
  done
}

@test "gc leaves live sessions alone, and is safe twice and concurrently" {
  make_sessions p live dead idle
  esbx_ok exec --detach live -- sleep 300
  esbx_ok exec --detach dead -- sleep 300
  live=$(holder_pid live)
  livepids=$(session_pids live)
  kill -9 "$(holder_pid dead)"
  "$ESBX" gc >"$BATS_TEST_TMPDIR/gc1" 2>&1 3>&- &
  g1=$!
  "$ESBX" gc >"$BATS_TEST_TMPDIR/gc2" 2>&1 3>&- &
  g2=$!
  wait "$g1"
  wait "$g2"
  esbx_ok gc
  no_cgroup dead
  for p in "$live" $livepids; do
    proc_gone "$p" && fail "process $p of the live session was ended by gc"
  done
  esbx_ok exec live -- ps -eo args
  assert_line "sleep 300"
  esbx_ok session list
  assert_output --partial "idle"
  assert_output --partial "dead"
}

@test "a pids limit stops a fork bomb and is reported" {
  esbx_ok session create p --name s1 --pids 20
  run "$ESBX" exec s1 -- sh -c 'for i in $(seq 100); do sleep 5 & done 2>/dev/null; wait'
  [ "$status" -ne 0 ]
  [ "$(session_pids s1 | wc -l)" -le 20 ]
  esbx_ok --json events s1
  echo "$output" | grep '"type":"limit.pids"' | jq -e '.limit == 20 and .forks_denied > 0'
  esbx_ok session inspect s1
  assert_output --partial '"limit": 20'
}

@test "a memory limit kills a command that exceeds it, and the event says so" {
  esbx_ok session create p --name s1 --memory 32M
  run "$ESBX" exec s1 -- sh -c 'head -c 256M /dev/zero | tail >/dev/null'
  [ "$status" -ne 0 ]
  esbx_ok --json events s1
  echo "$output" | grep '"type":"limit.memory"' | jq -e '.oom_kills >= 1 and .limit == 33554432'
  echo "$output" | grep '"type":"exec"' | tail -1 | jq -e '.oom_killed == true'
  # The session survives its command's OOM.
  esbx_ok exec s1 -- echo alive
  assert_output "alive"
}

@test "a cpu limit becomes a CFS quota" {
  esbx_ok session create p --name s1 --cpus 0.5
  esbx_ok exec s1 -- true
  cg=$(session_cgroup s1)
  if [ -e /sys/fs/cgroup/cpu/"$cg"/cpu.cfs_quota_us ]; then
    [ "$(cat /sys/fs/cgroup/cpu/"$cg"/cpu.cfs_quota_us)" = 50000 ]
  else
    [ "$(cat /sys/fs/cgroup/"$cg"/cpu.max)" = "50000 100000" ]
  fi
  esbx_ok session inspect s1
  assert_output --partial '"usage_usec"'
}
