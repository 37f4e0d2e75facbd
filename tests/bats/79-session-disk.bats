#!/usr/bin/env bats
# A session's own disk (`--disk SIZE`): its upper and work directories on a
# filesystem of that size, so that a session at its limit gets ENOSPC and
# nobody else does.  Every test runs on a small loop-mounted store of its
# own (disk_helpers.bash), never on the machine's disk.

load disk_helpers
load gateway_helpers

setup() { :; }
teardown() {
  if [ -n "${GW_DIR:-}" ]; then
    esbxd_down
    if [ -z "${BATS_TEST_COMPLETED:-}" ] && [ -f "${GW_LOG:-}" ]; then
      echo "--- last lines of the esbxd log"
      tail -n 30 "$GW_LOG"
    fi
    rm -rf "$GW_DIR"
  fi
  teardown_small_store
}

# Write $2 MiB into file $3 of session $1's workspace from inside it; the
# status is the writer's.
fill_inside() {
  esbx_ok exec "$1" -- sh -c "head -c $(($2 * 1024 * 1024)) /dev/zero >/workspace/$3"
}

@test "without a limit, one session fills the store and another session's writes fail" {
  setup_small_store 256
  setup_project
  make_sessions p filler other
  run "$ESBX" exec filler -- sh -c 'head -c 400M /dev/zero >/workspace/blob'
  assert_failure
  assert_output --partial "No space left on device"
  run "$ESBX" exec other -- sh -c 'head -c 10M /dev/zero >/workspace/small'
  assert_failure
}

@test "a store default of 20M: the filler gets ENOSPC at its limit, the other session writes" {
  setup_small_store 256
  setup_project
  export ESBX_SESSION_DISK=20M
  make_sessions p filler other
  run "$ESBX" exec filler -- sh -c 'head -c 400M /dev/zero >/workspace/blob'
  assert_failure
  assert_output --partial "No space left on device"
  # It got about its 20 MiB, no more.
  size=$(stat -c %s "$(path_of filler)/blob")
  [ "$size" -gt $((18 * 1024 * 1024)) ]
  [ "$size" -le $((21 * 1024 * 1024)) ]
  # The other session and the store have room.
  run "$ESBX" exec other -- sh -c 'head -c 10M /dev/zero >/workspace/small'
  assert_success
  [ "$(small_free)" -gt $((150 * 1024 * 1024)) ]
  echo more >"$BATS_TEST_TMPDIR/store-fs/x"
}

@test "--disk 20M: ENOSPC inside the session only, df inside shows the limit" {
  setup_small_store 256
  setup_project
  make_session p filler --disk 20M
  make_sessions p other
  run "$ESBX" exec filler -- sh -c 'head -c 400M /dev/zero >/workspace/blob'
  assert_failure
  assert_output --partial "No space left on device"
  size=$(stat -c %s "$m/blob")
  [ "$size" -gt $((18 * 1024 * 1024)) ]
  [ "$size" -le $((21 * 1024 * 1024)) ]
  fill_inside other 50 big
  # The filler's own workspace is full, its other files still read.
  run "$ESBX" exec filler -- cat /workspace/README
  assert_output hello
  run "$ESBX" exec filler -- df -k /workspace
  assert_output --regexp " 2[01][0-9]{3} "
  # Removing the blob gives its room back, inside and on the store.
  rm "$m/blob"
  fill_inside filler 15 again
}
