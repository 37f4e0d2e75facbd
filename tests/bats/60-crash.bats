#!/usr/bin/env bats
# Crash consistency (issue 7): esbx publish (directly and through esbxd's
# gateway), project create --from, project squash and gc killed with SIGKILL
# at every failpoint of their durability protocol and after random delays.  tests/crash/crash-harness runs the
# trials and checks the store after each one; CRASH_TRIALS=N runs N trials
# of each kind instead (quick runs); CI runs the full counts.

load helpers

setup_file() {
  [ -x "$ESBX" ] || skip "esbx not built at $ESBX"
  # The failpoints are compiled in with -DESBX_FAILPOINTS=ON (the default).
  if ! strings "$ESBX" | grep -qx 'ESBX_FAILPOINT'; then
    skip "esbx built without ESBX_FAILPOINTS"
  fi
}

trials() {
  echo "${CRASH_TRIALS:-$1}"
}

harness() {
  run "$ESBX_SRC/tests/crash/crash-harness" "$1" "$(trials "$2")"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *" all consistent "* ]]
}

@test "publish killed at every failpoint and at random instants: 200 trials" {
  harness publish 200
  # Both outcomes happened.
  [[ "$output" != *" 0 landed,"* ]]
  [[ "$output" != *" 0 did not,"* ]]
}

@test "esbxd killed while publishing through the gateway" {
  [ -x "$ESBX_BUILD/volume-plugin/esbxd" ] || skip "esbxd not built"
  ESBXD=$ESBX_BUILD/volume-plugin/esbxd harness gateway 40
  [[ "$output" != *" 0 landed,"* ]]
}

@test "project create --from killed at every failpoint and at random instants" {
  harness create 40
  [[ "$output" != *" 0 landed,"* ]]
}

@test "project squash killed at every failpoint and at random instants" {
  harness squash 30
  [[ "$output" != *" 0 landed,"* ]]
}

@test "gc killed while removing leftovers" {
  harness gc 40
}
