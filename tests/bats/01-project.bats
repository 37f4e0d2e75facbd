#!/usr/bin/env bats
# Projects: create from nothing and from a directory, list, log, rm.

load helpers

@test "project create without --from makes an empty layer 0" {
  esbx_ok project create empty
  assert_output "empty"
  esbx_ok project log empty
  assert_line --partial "empty project"
  esbx_ok --json project list
  assert_output --partial '"name": "empty"'
  assert_output --partial '"layers": 1'
}

@test "project create --from DIR records every file with its hash" {
  make_tree "$BATS_TEST_TMPDIR/src"
  esbx_ok project create p --from "$BATS_TEST_TMPDIR/src"
  esbx_ok --json project log p
  assert_output --partial '"changes": 6'
  sha=$(sha256sum "$BATS_TEST_TMPDIR/src/README" | cut -d' ' -f1)
  grep -q "$sha" "$ESBX_ROOT"/projects/p/layers/*/record.json
  esbx_ok fsck p
}

@test "project names outside the rule are refused and nothing is created" {
  for bad in "../x" ".hidden" "a/b" "" "$(printf 'x%.0s' {1..129})" "sp ace" "x:y" "é"; do
    esbx_fails 2 project create "$bad"
    assert_output --partial "must match"
  done
  esbx_fails 2 project create -dash
  run ls "$ESBX_ROOT/projects"
  assert_output ""
}

@test "creating a project twice fails and keeps the first" {
  esbx_ok project create p
  esbx_fails 1 project create p
  assert_output --partial "already exists"
  esbx_ok project log p
}

@test "project create from a missing source fails cleanly" {
  esbx_fails 1 project create p --from /nonexistent/src
  assert_output --partial "/nonexistent/src"
  run ls "$ESBX_ROOT/projects"
  assert_output ""
}

@test "project rm refuses while sessions exist, then removes" {
  esbx_ok project create p
  esbx_ok session create p --name s1
  esbx_fails 1 project rm p
  assert_output --partial "s1"
  esbx_ok discard s1
  esbx_ok project rm p
  esbx_fails 1 project log p
  assert_output --partial "does not exist"
}

@test "unknown commands and options are usage errors" {
  esbx_fails 2 frobnicate
  esbx_fails 2 project create p --bogus
  esbx_fails 2 session create
  esbx_fails 2 --nope project list
}
