#!/usr/bin/env bats
# Conflict-aware publish and rebase.

load helpers

setup() { setup_project; }

@test "publish makes exactly one layer with provenance and prints its id" {
  esbx_ok session create p --name s1 --label agent=a1
  echo new >"$(path_of s1)/new"
  esbx_ok publish s1 -m "add new"
  id=$output
  [[ "$id" =~ ^[0-9a-f]{16}$ ]]
  [ "$(head_of)" = "$id" ]
  [ "$(wc -l <"$ESBX_ROOT/projects/p/stack")" -eq 2 ]
  jq -e '.session == "s1" and .labels.agent == "a1" and .message == "add new" and (.changes | length) == 1' \
    "$ESBX_ROOT/projects/p/layers/$id/record.json"
  esbx_ok session create p --name s2
  assert_file_exists "$(path_of s2)/new"
  esbx_ok fsck p
}

@test "disjoint sessions both land; an overlapping one is rejected with exit 3 and keeps its changes" {
  make_sessions p a b c
  echo a >"$(path_of a)/a.txt"
  echo b >"$(path_of b)/b.txt"
  echo c >>"$(path_of c)/README"
  echo a2 >>"$(path_of a)/README"
  esbx_ok publish a
  la=$output
  esbx_ok publish b
  esbx_fails 3 publish c
  assert_output --partial "conflict: /README (layer $la, session a)"
  esbx_fails 3 --json publish c
  echo "$output" | grep -v '^esbx:' | jq -e ".conflicts[0] | .path == \"/README\" and .layer == \"$la\" and .session == \"a\""
  [ "$(wc -l <"$ESBX_ROOT/projects/p/stack")" -eq 3 ]
  esbx_ok diff c
  assert_output "M /README"
}

@test "identical changes on both sides are not conflicts" {
  make_sessions p a b
  echo same >"$(path_of a)/same"
  echo same >"$(path_of b)/same"
  esbx_ok publish a
  esbx_ok publish b
}

@test "deleting a directory conflicts with changes beneath it, both ways" {
  make_sessions p del edit del2
  rm -rf "$(path_of del)/docs"
  echo edit >>"$(path_of edit)/docs/guide.txt"
  esbx_ok publish edit
  esbx_fails 3 publish del
  assert_output --partial "/docs"
  echo x >"$(path_of del2)/src/added.c"
  rm -rf "$(path_of del2)/src/main.c"
  esbx_ok session create p --name rmsrc
  rm -rf "$(path_of rmsrc)/src"
  esbx_ok publish rmsrc
  esbx_fails 3 publish del2
  assert_output --partial "/src/added.c"
}

@test "a second publish from one session carries only what changed since the first" {
  esbx_ok session create p --name s1
  echo one >"$(path_of s1)/one"
  esbx_ok publish s1
  first=$output
  echo two >"$(path_of s1)/two"
  esbx_ok publish s1
  second=$output
  jq -e '(.changes | map(.path)) == ["/two"]' "$ESBX_ROOT/projects/p/layers/$second/record.json"
  jq -e ".parent == \"$first\"" "$ESBX_ROOT/projects/p/layers/$second/record.json"
  run "$ESBX" publish s1
  assert_success
  assert_output --partial "nothing to publish"
}

@test "a second publish after others landed checks only against them" {
  make_sessions p s1 s2
  echo one >"$(path_of s1)/one"
  esbx_ok publish s1
  echo other >"$(path_of s2)/other"
  esbx_ok publish s2
  echo more >>"$(path_of s1)/one"
  esbx_ok publish s1
  esbx_ok session create p --name check
  run cat "$(path_of check)/one"
  assert_output "one
more"
  assert_file_exists "$(path_of check)/other"
}

@test "rebase moves the base to the head; what it cannot merge is left unmerged (exit 4)" {
  make_sessions p a b
  echo a >"$(path_of a)/a"
  echo same >"$(path_of b)/b"
  esbx_ok publish a
  assert_file_not_exists "$(path_of b)/a"
  esbx_ok rebase b
  [ "$output" = "$(head_of)" ]
  assert_file_exists "$(path_of b)/a"
  esbx_ok diff b
  assert_output "A /b"
  echo conflict >"$(path_of b)/a"
  esbx_ok session create p --name c
  echo c >"$(path_of c)/a"
  esbx_ok publish c
  esbx_fails 4 rebase b
  assert_output --partial "unmerged: /a"
}

@test "rebase drops stale identical copy-ups so upstream changes show through" {
  make_sessions p a b
  chmod 600 "$(path_of b)/README" && chmod 644 "$(path_of b)/README"
  echo upstream >>"$(path_of a)/README"
  esbx_ok publish a
  esbx_ok rebase b
  run tail -n1 "$(path_of b)/README"
  assert_output "upstream"
}

@test "publish --discard ends the session" {
  esbx_ok session create p --name s1
  echo x >"$(path_of s1)/x"
  esbx_ok publish s1 --discard
  assert_dir_not_exists "$ESBX_ROOT/sessions/s1"
}

@test "blame names the layer, session, labels, message and time that last changed a path" {
  esbx_ok session create p --name s1 --label agent=alpha
  echo x >>"$(path_of s1)/README"
  esbx_ok publish s1 -m "touch readme"
  id=$output
  esbx_ok blame p /README
  assert_line "layer:   $id (1)"
  assert_line "session: s1"
  assert_line "labels:  agent=alpha"
  assert_line "message: touch readme"
  esbx_ok --json blame p src/main.c
  echo "$output" | jq -e '.index == 0'
  esbx_fails 1 blame p /nope
}

@test "blame names the first layer of an identical run: the first identical write, the first deletion" {
  make_sessions p a b c
  echo same >"$(path_of a)/README"
  echo same >"$(path_of b)/README"
  rm "$(path_of a)/docs/guide.txt" "$(path_of b)/docs/guide.txt"
  esbx_ok publish a -m first
  first=$output
  # b's identical write and deletion are no conflict: b accepted them
  esbx_ok publish b -m second
  esbx_ok blame p /README
  assert_line "layer:   $first (1)"
  assert_line "session: a"
  esbx_ok blame p /docs/guide.txt
  assert_line "session: a"
  # a different state in between: the write back is new again
  esbx_ok rebase c
  echo other >"$(path_of c)/README"
  esbx_ok publish c
  esbx_ok session create p --name d
  echo same >"$(path_of d)/README"
  esbx_ok publish d
  esbx_ok blame p /README
  assert_line "session: d"
  # the mode is part of a file's state
  esbx_ok session create p --name e
  chmod 755 "$(path_of e)/README"
  esbx_ok publish e
  esbx_ok blame p /README
  assert_line "session: e"
}

@test "an owner change alone is a change: diff shows it, publish carries it" {
  esbx_ok session create p --name o1
  chown 1234:2345 "$(path_of o1)/README"
  ln -s README "$(path_of o1)/olink"
  esbx_ok publish o1
  esbx_ok session create p --name o2
  [ "$(stat -c %u:%g "$(path_of o2)/README")" = 1234:2345 ]
  chown -h 4321:5432 "$(path_of o2)/olink"
  # The same owner again: a copy-up, not a change.
  chown 1234:2345 "$(path_of o2)/README"
  esbx_ok diff o2
  assert_output --partial "/olink"
  refute_output --partial "/README"
  esbx_ok publish o2
  esbx_ok session create p --name o3
  [ "$(stat -c %u:%g "$(path_of o3)/olink")" = 4321:5432 ]
  esbx_ok fsck p
}

@test "concurrent publishers from separate processes: every disjoint change lands once" {
  for i in $(seq 1 16); do
    esbx_ok session create p --name w$i
    echo $i >"$(path_of w$i)/file$i"
  done
  for i in $(seq 1 16); do "$ESBX" publish w$i >"$BATS_TEST_TMPDIR/out$i" 2>&1 & done
  wait
  [ "$(wc -l <"$ESBX_ROOT/projects/p/stack")" -eq 17 ]
  [ "$(sort -u "$BATS_TEST_TMPDIR"/out* | grep -cE '^[0-9a-f]{16}$')" -eq 16 ]
  esbx_ok session create p --name check
  for i in $(seq 1 16); do [ "$(cat "$(path_of check)/file$i")" = "$i" ]; done
  esbx_ok fsck p
}
