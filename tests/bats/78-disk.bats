#!/usr/bin/env bats
# The store's disk: sparse files stay sparse wherever esbx copies file
# contents (snapshots, forks, publish, export, import), a session's expiry
# that keeps failing backs off and still retires the session.  Every test
# runs on a small loop-mounted filesystem of its own (disk_helpers.bash),
# never on the machine's disk.

load disk_helpers
load gateway_helpers

setup() { :; }
teardown() {
  if [ -n "${GW_DIR:-}" ]; then
    esbxd_down
    esbxd_log_if_failed "$GW_LOG"
    rm -rf "$GW_DIR"
  fi
  teardown_small_store
}

# Project p with ignore rules for build/.
setup_build_project() {
  mkdir -p "$BATS_TEST_TMPDIR/src"
  printf 'build/\n' >"$BATS_TEST_TMPDIR/src/.gitignore"
  echo hello >"$BATS_TEST_TMPDIR/src/README"
  esbx_ok project create p --from "$BATS_TEST_TMPDIR/src"
}

snapshots_of() { ls "$ESBX_ROOT/projects/p/snapshots" 2>/dev/null; }
# The top frozen layer of snapshot $1 (frozen.c).
snapshot_diff() {
  echo "$ESBX_ROOT/projects/p/frozen/$(jq -r '.frozen[-1]' "$ESBX_ROOT/projects/p/snapshots/$1/record.json")/diff"
}

# Wait up to $2 seconds for session $1 to be gone.
wait_session_gone() {
  local i
  for i in $(seq 1 $(($2 * 5))); do
    [ -d "$ESBX_ROOT/sessions/$1" ] || return 0
    sleep 0.2
  done
  return 1
}

@test "on-expiry snapshot of a 2 GiB sparse file: kept sparse, the session retires" {
  setup_small_store 256
  setup_build_project
  esbx_ok session create p --name big --ttl 3s --on-expiry snapshot
  m=$(path_of big)
  mkdir "$m/build"
  truncate -s 2G "$m/build/cache.bin"
  echo tail >>"$m/build/cache.bin"
  echo result >"$m/result.txt"
  # esbxd retires it: started once the files are written.
  ESBXD_EXPIRY_INTERVAL_MS=200 setup_gateway
  wait_session_gone big 15
  snap=$(snapshots_of)
  [ -n "$snap" ]
  f=$(snapshot_diff "$snap")/build/cache.bin
  [ "$(stat -c %s "$f")" -eq $((2 * 1024 * 1024 * 1024 + 5)) ]
  [ "$(allocated "$f")" -lt $((1024 * 1024)) ]
  [ "$(tail -c 5 "$f")" = tail ]
  # One retirement, no retry loop in the log.
  run grep -c "could not be retired" "$GW_LOG"
  assert_output 0
}

@test "fork, publish, export and import keep a 2 GiB sparse file sparse" {
  setup_small_store 256
  setup_build_project
  esbx_ok session create p --name s
  m=$(path_of s)
  truncate -s 2G "$m/sparse.bin"
  printf 'middle' | dd of="$m/sparse.bin" bs=1 seek=$((1024 * 1024 * 1024)) conv=notrunc status=none
  echo tail >>"$m/sparse.bin"
  size=$(stat -c %s "$m/sparse.bin")
  # Fork: the snapshot under it is sparse, and so is what the fork sees.
  esbx_ok session fork s --name f
  f=$(path_of f)
  [ "$(stat -c %s "$f/sparse.bin")" -eq "$size" ]
  for d in "$ESBX_ROOT"/projects/p/frozen/*/diff; do
    [ "$(allocated "$d/sparse.bin")" -lt $((1024 * 1024)) ]
  done
  # Export: a sparse tar entry, a small archive, the same file out of it.
  esbx_ok export s -o "$BATS_TEST_TMPDIR/s.tar"
  [ "$(stat -c %s "$BATS_TEST_TMPDIR/s.tar")" -lt $((1024 * 1024)) ]
  mkdir "$BATS_TEST_TMPDIR/out"
  tar -xf "$BATS_TEST_TMPDIR/s.tar" -C "$BATS_TEST_TMPDIR/out" sparse.bin
  out=$BATS_TEST_TMPDIR/out/sparse.bin
  [ "$(stat -c %s "$out")" -eq "$size" ]
  [ "$(dd if="$out" bs=1 skip=$((1024 * 1024 * 1024)) count=6 status=none)" = middle ]
  [ "$(tail -c 5 "$out")" = tail ]
  rm -rf "$BATS_TEST_TMPDIR/out"
  # Publish: the layer's copy is sparse and its hash is the content's.
  want=$(sha256sum "$m/sparse.bin" | cut -d' ' -f1)
  esbx_ok publish s -m sparse
  l=$(find "$ESBX_ROOT/projects/p/layers" -path '*/diff/sparse.bin')
  [ "$(allocated "$l")" -lt $((1024 * 1024)) ]
  [ "$(stat -c %s "$l")" -eq "$size" ]
  jq -e --arg h "$want" '.changes[] | select(.path == "/sparse.bin") | .sha256 == $h' \
    "${l%/diff/sparse.bin}/record.json"
  # Import: a project made from a directory with the file keeps it sparse.
  mkdir "$BATS_TEST_TMPDIR/src2"
  truncate -s 1G "$BATS_TEST_TMPDIR/src2/hole.bin"
  esbx_ok project create q --from "$BATS_TEST_TMPDIR/src2"
  i=$(find "$ESBX_ROOT/projects/q/layers" -path '*/diff/hole.bin' | head -n 1)
  [ "$(stat -c %s "$i")" -eq $((1024 * 1024 * 1024)) ]
  [ "$(allocated "$i")" -lt $((1024 * 1024)) ]
}

@test "an expiry that keeps failing backs off, is reported, and ends in a discard" {
  setup_small_store 256
  setup_build_project
  # On a disk of its own the upper is copied into the store, where real
  # data does not fit a second time.  esbxd, which retires it, starts once
  # the data is written: a loaded host may take longer than the ttl to
  # write it, and a snapshot of half of it fits.
  esbx_ok session create p --name full --ttl 2s --on-expiry snapshot --disk 200M
  m=$(path_of full)
  mkdir "$m/build"
  head -c $((150 * 1024 * 1024)) /dev/urandom >"$m/build/blob"
  echo unpublished >"$m/work.txt"
  ESBXD_EXPIRY_INTERVAL_MS=200 setup_gateway
  wait_session_gone full 40
  wait_log "$GW_LOG" "retired session \`full\` \(ttl\): discarded after 5 failed attempts"
  # Five attempts, each put off twice as long as the one before, then the
  # fallback; not one attempt per interval.
  run grep -c "expiry of session \`full\` failed: " "$GW_LOG"
  assert_output 5
  grep -q "expiry of session \`full\` failed: .*No space left on device" "$GW_LOG"
  grep -q "attempt 1 of 5, the next in 0.2 s" "$GW_LOG"
  grep -q "attempt 4 of 5, the next in 1.6 s" "$GW_LOG"
  grep -q "the next attempt discards it" "$GW_LOG"
  grep -q "retired session \`full\` (ttl): discarded after 5 failed attempts" "$GW_LOG"
  run curl -sf "http://127.0.0.1:$METRICS_PORT/metrics"
  assert_output --partial "esbx_session_expiry_failures_total 5"
  assert_output --partial "esbx_session_expiries_total 1"
  # No snapshot was left behind, half or whole.
  [ -z "$(snapshots_of)" ]
  [ -z "$(ls "$ESBX_ROOT/projects/p/tmp" 2>/dev/null)" ]
}

@test "esbx gc reports a failed expiry, counts it, and discards after five" {
  setup_small_store 256
  setup_build_project
  esbx_ok session create p --name full --ttl 1s --on-expiry snapshot --disk 200M
  m=$(path_of full)
  mkdir "$m/build"
  head -c $((150 * 1024 * 1024)) /dev/urandom >"$m/build/blob"
  sleep 2
  esbx_fails 1 gc
  assert_output --partial "expiry of session \`full\` failed: "
  assert_output --partial "attempt 1 of 5"
  esbx_ok --json session inspect full
  echo "$output" | jq -e '.lifetime.expiry_failures == 1 and (.lifetime.expiry_error | test("No space"))'
  esbx_ok --json events full
  echo "$output" | jq -se '[.[] | select(.type == "expiry.failed")] | length == 1'
  for _ in 2 3 4 5; do esbx_fails 1 gc; done
  assert_output --partial "the next attempt discards it"
  esbx_ok gc
  assert_output --partial "retired session \`full\` (ttl): discarded after 5 failed attempts"
  esbx_fails 1 session inspect full
}

# Write $2 MiB of data that does not compress or dedupe into session $1.
fill() { head -c $(($2 * 1024 * 1024)) /dev/urandom >"$(path_of "$1")/$3"; }

@test "the trash does not keep a full store full: a large discard skips it" {
  setup_small_store 256
  setup_build_project
  make_sessions p big other
  fill big 180 blob
  # The store's filesystem is nearly full: the other session cannot write.
  run fill other 100 blob
  assert_failure
  rm -f "$(path_of other)/blob"
  esbx_ok discard big
  assert_output --partial "deleted without the trash"
  # A quarter of the filesystem by default.
  assert_output --regexp "180\.0 MiB, larger than the [0-9.]+ MiB the trash keeps"
  esbx_ok --json trash list
  assert_output "[]"
  # Its space is free again (removed in the background: wait for it).
  for _ in $(seq 50); do
    [ "$(small_free)" -gt $((180 * 1024 * 1024)) ] && break
    sleep 0.2
  done
  [ "$(small_free)" -gt $((180 * 1024 * 1024)) ]
  fill other 100 blob
}

@test "the trash purges its oldest entries to stay above the free-space floor" {
  setup_small_store 256
  setup_build_project
  export ESBX_TRASH_MAX_ENTRY=0 ESBX_TRASH_MIN_FREE=60M
  make_sessions p a b c
  fill a 60 blob
  esbx_ok discard a
  assert_output --partial "kept in the trash"
  sleep 1
  fill b 60 blob
  esbx_ok discard b
  assert_output --partial "kept in the trash"
  sleep 1
  fill c 60 blob
  # c in the trash too would leave less than 60M free: a, the oldest, goes.
  esbx_ok discard c
  assert_output --regexp "trash: purged \`a\.[0-9TZ]+\` \(60\.[0-9] MiB\) early"
  assert_output --partial "kept in the trash"
  esbx_ok --json trash list
  echo "$output" | jq -e 'map(.session) | sort == ["b", "c"]'
  for _ in $(seq 50); do
    [ "$(small_free)" -ge $((60 * 1024 * 1024)) ] && break
    sleep 0.2
  done
  [ "$(small_free)" -ge $((60 * 1024 * 1024)) ]
  # A bad setting is one line and changes nothing.
  make_session p d
  echo change >"$m/file"
  ESBX_TRASH_MIN_FREE=lots run "$ESBX" discard d
  assert_failure
  assert_output --partial "ESBX_TRASH_MIN_FREE: invalid size \`lots\`"
  esbx_ok session inspect d
}
