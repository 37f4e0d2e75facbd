#!/usr/bin/env bats
# The remote CLI: every verb through the gateway prints the same bytes and
# exits with the same status as embedded mode.

load gateway_helpers

setup() {
  setup_gateway
  REMOTE_TOKEN=$(token manage,runtime,observe)
}

# `same ARGS`: run esbx embedded and remote; stdout and status must match.
# Listings print ages in seconds: a second that turns between the two runs
# changes them, so a pair that differs is run once more (both runs of the
# second pair must agree byte for byte).
same() {
  local lstatus lout try
  for try in 1 2; do
    run "$ESBX" "$@"
    lstatus=$status lout=$output
    run env ESBX_HOST="unix://$GW_SOCK" ESBX_TOKEN="$REMOTE_TOKEN" "$ESBX" "$@"
    [ "$status" = "$lstatus" ] && [ "$output" = "$lout" ] && return 0
  done
  [ "$status" = "$lstatus" ] || { echo "esbx $*: remote exited $status, embedded $lstatus: $output" >&2; return 1; }
  printf 'esbx %s differs:\n--- embedded\n%s\n--- remote\n%s\n' "$*" "$lout" "$output" >&2
  return 1
}

remote() {
  ESBX_HOST="unix://$GW_SOCK" ESBX_TOKEN="$REMOTE_TOKEN" "$ESBX" "$@"
}

@test "remote CLI: listings, log, blame, diff and inspect match embedded mode byte for byte" {
  make_demo
  mkdir -p "$ESBX_ROOT/sessions/s1/merged/new"
  printf 'x\n' >"$ESBX_ROOT/sessions/s1/merged/new/file"
  rm "$ESBX_ROOT/sessions/s1/merged/docs/guide.txt"
  same project list
  assert_line --index 0 "$(printf 'NAME\tLAYERS\tHEAD')"
  same --json project list
  same project log demo
  assert_line --index 0 --regexp '^LAYER +# CREATED +SESSION +CHANGES +MESSAGE$'
  same --json project log demo
  same session list
  assert_line --index 0 "$(printf 'NAME\tPROJECT\tBASE\tSTATE\tAGE\tIDLE\tEXPIRES')"
  same --json session list --project demo
  same diff s1
  same diff s1 --json
  same diff s1 --patch
  same blame demo /README
  same --json blame demo /src/main.c
  same events s1
  same session path s1
  same project log nosuch
  same diff nosuch
  same blame demo /no/such/file
  same session create nosuch
  same session --help
  # Empty JSON reads the same: [] and {}.
  esbx_ok project create empty
  same --json session list --project empty
  assert_output "[]"
  same --json blame demo /README
  assert_output --partial '"labels": {},'
  # stdout and status match; the stderr lines name the same cause.
  run remote diff nosuch
  assert_output --partial "nosuch"
}

@test "remote CLI: diff --ignored and --include-ignored, publish --include-ignored through the gateway" {
  make_demo
  m=$ESBX_ROOT/sessions/s1/merged
  printf '*.o\n' >"$m/.gitignore"
  echo obj >"$m/main.o"
  same diff s1
  refute_output --partial "main.o"
  same diff s1 --ignored
  assert_output "A /main.o"
  same --json diff s1 --include-ignored
  assert_output --partial '"/main.o"'
  run remote publish s1
  assert_success
  run remote diff s1 --ignored
  assert_output "A /main.o"
  run remote publish --include-ignored s1
  assert_success
  run remote diff s1 --include-ignored
  assert_output ""
}

@test "remote CLI: the lifecycle through the gateway, publish conflicts exit 3 with the same lines" {
  make_tree "$BATS_TEST_TMPDIR/tree"
  esbx_ok project create demo --from "$BATS_TEST_TMPDIR/tree"
  run remote session create demo --name a --label agent=a1
  assert_success
  assert_output a
  run remote session create demo --name b
  assert_output b
  run remote exec a -- sh -c 'echo from a >README; echo made'
  assert_success
  assert_output made
  run remote exec b -- sh -c 'echo from b >README; exit 7'
  assert_equal "$status" 7
  run remote exec b --cwd /nonexistent -- true
  assert_failure
  run remote publish a -m "agent a"
  assert_success
  layer=$output
  [[ "$layer" =~ ^[0-9a-f]{16}$ ]]

  # The conflict: remote and embedded report it identically.
  run remote publish b
  assert_equal "$status" 3
  remote_err=$output
  run "$ESBX" publish b
  assert_equal "$status" 3
  assert_equal "$remote_err" "$output"
  assert_output --partial "conflict: /README (layer $layer, session a)"
  same --json publish b
  # Rebase merges /README, which both edited on the same line: markers,
  # exit 4 and the base moved, reported as embedded mode reports it.
  run remote rebase b
  assert_equal "$status" 4
  assert_output --partial "conflict: /README (layer $layer, session a): merged with conflict markers"
  same rebase b
  same --json rebase b
  same --json publish b
  run remote rebase --show b /README --ours
  assert_success
  remote_err=$output
  run "$ESBX" rebase --show b /README --ours
  assert_equal "$remote_err" "$output"

  same project log demo
  same blame demo /README
  run remote export a -o "$BATS_TEST_TMPDIR/remote.tar"
  assert_success
  "$ESBX" export a -o "$BATS_TEST_TMPDIR/local.tar"
  cmp "$BATS_TEST_TMPDIR/remote.tar" "$BATS_TEST_TMPDIR/local.tar"
  run remote discard b
  assert_success
  run "$ESBX" session list
  refute_output --partial "b	demo"
  run remote publish a --discard
  assert_success
  run remote token list
  assert_equal "$status" 2
  run remote project create x --from /etc
  assert_failure
}

@test "remote CLI: session create --env and --env-file go through the gateway" {
  make_tree "$BATS_TEST_TMPDIR/tree"
  esbx_ok project create demo --from "$BATS_TEST_TMPDIR/tree"
  printf '# comment\nFROM_FILE=f\nCALLER_VAR\nSHARED=file\n' >"$BATS_TEST_TMPDIR/env"
  export CALLER_VAR=caller
  run remote session create demo --name e1 --env-file "$BATS_TEST_TMPDIR/env" --env SHARED=flag
  assert_success
  assert_output e1
  run remote exec e1 -- sh -c 'echo "$FROM_FILE $CALLER_VAR $SHARED"'
  assert_success
  assert_output "f caller flag"
  run remote --json session inspect e1
  assert_success
  jq -e '.env == {"FROM_FILE": "f", "CALLER_VAR": "caller", "SHARED": "flag"}' <<<"$output"
  run remote session create demo --name bad --env 9X=y
  assert_equal "$status" 2
  assert_output --partial '`9X`'
  [ ! -e "$ESBX_ROOT/sessions/bad" ]
}

@test "remote CLI: session create --network egress --allow goes through the gateway" {
  make_tree "$BATS_TEST_TMPDIR/tree"
  esbx_ok project create demo --from "$BATS_TEST_TMPDIR/tree"
  run remote session create demo --name g1 --network egress --allow a.test:8080 --allow '*.wild.test'
  assert_success
  assert_output g1
  run remote --json session inspect g1
  assert_success
  jq -e '.egress.allow == ["a.test:8080", "*.wild.test"]' <<<"$output"
  run remote session create demo --name bad --network egress --allow '10.0.0.0/33'
  assert_equal "$status" 2
  assert_output --partial '10.0.0.0/33'
  [ ! -e "$ESBX_ROOT/sessions/bad" ]
}

@test "remote CLI: project network sets and prints a project's defaults through the gateway" {
  make_tree "$BATS_TEST_TMPDIR/tree"
  esbx_ok project create demo --from "$BATS_TEST_TMPDIR/tree"
  same project network demo
  run remote project network demo --allow a.test:8080 --allow '*.wild.test'
  assert_success
  assert_output ""
  same project network demo
  jq -e '. == {"network": "egress", "allow": ["a.test:8080", "*.wild.test"]}' <<<"$output"
  run remote project network demo --network host --allow a.test
  assert_equal "$status" 2
  same project network nope
  same project network demo
  jq -e '.allow == ["a.test:8080", "*.wild.test"]' <<<"$output"
}

@test "remote CLI: diff --patch into a reader that stops early ends as embedded mode does" {
  make_demo
  for i in $(seq 1 40); do seq 1 3000 >"$ESBX_ROOT/sessions/s1/merged/f$i"; done
  for mode in embedded remote; do
    host=
    [ "$mode" = remote ] && host="unix://$GW_SOCK"
    run env ESBX_HOST="$host" ESBX_TOKEN="$REMOTE_TOKEN" bash -c \
      'set -o pipefail; "$ESBX" diff --patch s1 2>"$1" | head -n 1' _ "$BATS_TEST_TMPDIR/err"
    assert_equal "$status" 141
    assert_output -- "--- a/README"
    run cat "$BATS_TEST_TMPDIR/err"
    assert_output ""
  done
}

@test "remote CLI: a bad token or host fails with one line and status 1" {
  ESBX_HOST="unix://$GW_SOCK" ESBX_TOKEN=esbx_bad run "$ESBX" project list
  assert_equal "$status" 1
  assert_output --partial unauthorized
  ESBX_HOST="unix://$GW_SOCK" run env -u ESBX_TOKEN "$ESBX" project list
  assert_equal "$status" 1
  assert_output --partial ESBX_TOKEN
  ESBX_TOKEN=$REMOTE_TOKEN run "$ESBX" --host "unix://$GW_DIR/none.sock" project list
  assert_equal "$status" 1
  ESBX_TOKEN=$REMOTE_TOKEN run "$ESBX" --host "ftp://x" project list
  assert_equal "$status" 2
}

@test "remote CLI: discard keeps unpublished work in the trash; trash list, restore, purge" {
  make_demo
  remote discard s1 2>"$BATS_TEST_TMPDIR/err"
  [ -z "$(cat "$BATS_TEST_TMPDIR/err")" ]
  grep -q "warning: discard \`s1\`: 1 unpublished change kept in the trash" "$GW_LOG"
  same trash list
  same --json trash list
  entry=$("$ESBX" --json trash list | jq -r '.[0].entry')
  run remote trash restore "$entry" --name s9
  assert_success
  assert_output s9
  [ "$(cat "$(path_of s9)/README")" = changed ]
  remote discard s9
  entry=$("$ESBX" --json trash list | jq -r '.[0].entry')
  run remote trash purge "$entry"
  assert_success
  assert_output "purged trash entry \`$entry\`"
  esbx_ok session create demo --name s3
  echo x >"$(path_of s3)/x"
  remote discard --force s3
  [ "$("$ESBX" --json trash list | jq length)" = 0 ]
  esbx_ok session create demo --name s4
  echo x >"$(path_of s4)/x"
  remote discard s4
  run remote trash purge --all
  assert_output --regexp '^purged trash entry `s4\.'
  [ "$("$ESBX" --json trash list | jq length)" = 0 ]
}

@test "remote CLI: snapshot, fork, snapshot list, inspect and rm, gc --snapshots, lifetimes" {
  make_demo
  run remote session snapshot s1 --name snap1
  assert_success
  assert_output snap1
  run remote session fork s1 --name f1 --ttl 2h
  assert_success
  assert_output f1
  run cat "$ESBX_ROOT/sessions/f1/merged/README"
  assert_output changed
  esbx_ok session inspect f1
  assert_output --partial '"ttl"'
  same snapshot list
  same --json snapshot inspect snap1
  run remote session create demo --name s2 --from-snapshot snap1 --idle-ttl 30m
  assert_success
  run cat "$ESBX_ROOT/sessions/s2/merged/README"
  assert_output changed
  # In use: refused as embedded mode refuses it.
  run remote snapshot rm snap1
  assert_failure
  assert_output --partial "snap1"
  run remote discard --force s2
  assert_success
  run remote discard --force f1
  assert_success
  # A token limited to a session reaches no snapshot listing.
  local limited
  limited=$(token observe --session s1)
  run env ESBX_HOST="unix://$GW_SOCK" ESBX_TOKEN="$limited" "$ESBX" snapshot list
  assert_failure
  run remote gc --snapshots
  assert_success
  assert_output --partial "snap1"
  run "$ESBX" snapshot list --json
  refute_output --partial "snap1"
  # Both options in one query, with and without the progress stream.
  run remote gc --snapshots --cache
  assert_success
  run remote gc --cache --progress
  assert_success
}

@test "remote CLI: export shows the gateway's progress and writes the archive embedded mode writes" {
  bats_require_minimum_version 1.5.0
  make_demo
  "$ESBX" export s1 -o "$BATS_TEST_TMPDIR/local.tar"
  run --separate-stderr remote export s1 -o "$BATS_TEST_TMPDIR/remote.tar" --progress
  assert_success
  assert_output ""
  grep -qE '^Exporting: [0-9]+ files, .*, done\.$' <<<"$stderr" || { echo "stderr: $stderr" >&2; return 1; }
  cmp "$BATS_TEST_TMPDIR/remote.tar" "$BATS_TEST_TMPDIR/local.tar"
  # On a terminal without --progress: the line redrawn in place.
  run script -qfec "env ESBX_HOST=unix://$GW_SOCK ESBX_TOKEN=$REMOTE_TOKEN $ESBX export s1 -o $BATS_TEST_TMPDIR/tty.tar" /dev/null
  assert_success
  [[ "$output" == *$'\r'"Exporting: "*", done."* ]]
  cmp "$BATS_TEST_TMPDIR/tty.tar" "$BATS_TEST_TMPDIR/local.tar"
  # -o - writes the archive to stdout, progress still on stderr.
  remote export s1 -o - --progress >"$BATS_TEST_TMPDIR/stdout.tar" 2>"$BATS_TEST_TMPDIR/err"
  cmp "$BATS_TEST_TMPDIR/stdout.tar" "$BATS_TEST_TMPDIR/local.tar"
  grep -q '^Exporting: ' "$BATS_TEST_TMPDIR/err"
  # An error keeps its one line and status, and writes no file.
  run --separate-stderr remote export nosuch -o "$BATS_TEST_TMPDIR/plain.tar"
  plain_status=$status plain_err=$stderr
  [ "$plain_status" != 0 ]
  run --separate-stderr remote export nosuch -o "$BATS_TEST_TMPDIR/bad.tar" --progress
  assert_equal "$status" "$plain_status"
  assert_equal "$stderr" "$plain_err"
  [ ! -e "$BATS_TEST_TMPDIR/bad.tar" ]

  # gc: the reports on stderr, what it removed on stdout as without them.
  esbx_ok discard s1
  run --separate-stderr remote gc --progress
  assert_success
  grep -qE '^Collecting garbage: 100% \(1/1 projects\), .* s, done\.$' <<<"$stderr"
  progress_out=$output
  "$ESBX" session create demo --name s2 >/dev/null
  "$ESBX" discard s2
  run --separate-stderr remote gc
  assert_equal "$output" "$progress_out"
  [ -z "$stderr" ]
}
