#!/usr/bin/env bats
# Rebase as the loop "rejected → rebase → test → publish": text files both
# sides changed are merged three ways (diff3), overlapping hunks leave
# conflict markers and exit 4, anything else it cannot merge is left
# unmerged for a person (exit 4, tests/bats/06-gate.bats has more); a
# running holder is stopped and started again; `session stop`.

load helpers

setup() {
  setup_store
  mkdir -p "$BATS_TEST_TMPDIR/src"
  seq 1 20 | sed 's/^/line /' >"$BATS_TEST_TMPDIR/src/notes.txt"
  printf 'keep\n' >"$BATS_TEST_TMPDIR/src/other.txt"
  esbx_ok project create p --from "$BATS_TEST_TMPDIR/src"
  make_sessions p a b
}

base_of() { sed -n 's/^ *"base": *"\([0-9a-f]*\)".*/\1/p' "$ESBX_ROOT/sessions/$1/session.json"; }

@test "edits of one file that do not overlap are merged by rebase, then publish" {
  sed -i 's/^line 1$/line 1 from a/' "$(path_of a)/notes.txt"
  sed -i 's/^line 19$/line 19 from b/' "$(path_of b)/notes.txt"
  esbx_ok publish a
  # The gate stays strict: b changed a path a published.
  esbx_fails 3 publish b
  assert_output --partial "/notes.txt"
  esbx_ok rebase b
  assert_line "$(head_of)"
  assert_line "merged: /notes.txt"
  run cat "$(path_of b)/notes.txt"
  assert_line "line 1 from a"
  assert_line "line 19 from b"
  assert_line "line 10"
  esbx_ok diff b
  assert_output "M /notes.txt"
  esbx_ok publish b
  esbx_ok session create p --name c
  run cat "$(path_of c)/notes.txt"
  assert_line "line 1 from a"
  assert_line "line 19 from b"
}

@test "overlapping edits: conflict markers and exit 4, nothing published until resolved" {
  sed -i 's/^line 5$/line 5 by a/' "$(path_of a)/notes.txt"
  sed -i 's/^line 5$/line 5 by b/' "$(path_of b)/notes.txt"
  echo "b's own file" >"$(path_of b)/mine.txt"
  esbx_ok publish a
  local before
  before=$(layer_count)
  esbx_fails 4 rebase b
  assert_output --partial "conflict: /notes.txt"
  assert_output --partial "merged with conflict markers"
  run cat "$(path_of b)/notes.txt"
  assert_line "<<<<<<< session b"
  assert_line "line 5 by b"
  assert_line "======="
  assert_line "line 5 by a"
  assert_line --partial ">>>>>>> head "
  # The base moved to the head, as git's rebase stops on the new base.
  assert_equal "$(base_of b)" "$(head_of)"
  assert_equal "$(layer_count)" "$before"
  # Markers left: publish refuses, and nothing lands.
  esbx_fails 4 publish b
  assert_output --partial "conflict markers"
  assert_equal "$(layer_count)" "$before"
  # Resolved by hand: publish takes both.
  sed -i '/^<<<<<<< /d; /^=======$/d; /^>>>>>>> /d; /^line 5 by a$/d' "$(path_of b)/notes.txt"
  esbx_ok publish b
  assert_equal "$(layer_count)" "$((before + 1))"
  assert_file_exists "$(path_of b)/mine.txt"
}

@test "binary files both changed are left unmerged: the session keeps its file" {
  printf 'a\0binary' >"$(path_of a)/blob.bin"
  printf 'b\0binary' >"$(path_of b)/blob.bin"
  esbx_ok publish a
  esbx_fails 4 rebase b
  assert_output --partial "conflict: /blob.bin"
  assert_output --partial "unmerged: /blob.bin (binary"
  refute_output --partial "markers"
  assert_equal "$(base_of b)" "$(head_of)"
  run od -c "$(path_of b)/blob.bin"
  assert_output --partial "b  \\0   b   i   n"
  [ -z "$(ls "$ESBX_ROOT/sessions/b" | grep '^merge\.')" ]
}

@test "a deletion against an edit is left unmerged beside a file that merges" {
  rm "$(path_of a)/other.txt"
  sed -i 's/^line 2$/line 2 by a/' "$(path_of a)/notes.txt"
  echo changed >"$(path_of b)/other.txt"
  sed -i 's/^line 18$/line 18 by b/' "$(path_of b)/notes.txt"
  esbx_ok publish a
  esbx_fails 4 rebase b
  assert_output --partial "unmerged: /other.txt (modify/delete"
  assert_output --partial "merged: /notes.txt"
  assert_equal "$(base_of b)" "$(head_of)"
  run cat "$(path_of b)/notes.txt"
  assert_line "line 2 by a"
}

@test "rebase with only the holder running stops it, rebases and starts a new one" {
  esbx_ok exec b -- true
  local old
  old=$(holder_pid b)
  [ -n "$old" ]
  echo x >"$(path_of a)/x"
  esbx_ok publish a
  esbx_ok rebase b
  assert_line "$(head_of)"
  # Nothing but the holder ran: nothing to say about it.
  refute_output --partial "stopped the session's holder"
  local new
  new=$(holder_pid b)
  [ -n "$new" ]
  [ "$new" != "$old" ]
  # The new holder sees the rebased files.
  esbx_ok exec b -- cat /workspace/x
  assert_output x
}

@test "rebase refuses while a command runs in the session; --restart ends it" {
  esbx_ok exec --detach b -- sleep 300
  echo x >"$(path_of a)/x"
  esbx_ok publish a
  esbx_fails 1 rebase b
  assert_output --partial "1 process besides the holder"
  assert_output --partial "--restart"
  assert_file_not_exists "$(path_of b)/x"
  esbx_ok rebase --restart b
  assert_output --partial "stopped the session's holder and its processes"
  esbx_ok ps b
  refute_output --partial "sleep"
  assert_file_exists "$(path_of b)/x"
}

@test "session stop ends the holder and its processes and keeps the files" {
  echo kept >"$(path_of b)/kept"
  esbx_ok exec --detach b -- sleep 300
  local pid
  pid=$(holder_pid b)
  esbx_ok session stop b
  wait_gone "$pid"
  assert_file_not_exists "$ESBX_ROOT/sessions/b/holder.json"
  assert_file_exists "$(path_of b)/kept"
  esbx_ok exec b -- cat /workspace/kept
  assert_output kept
  esbx_fails 1 session stop nosuch
  assert_output --partial "does not exist"
}
