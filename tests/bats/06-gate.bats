#!/usr/bin/env bats
# The gate as an unattended retry loop drives it: conflict markers never
# land, "rebase again" (exit 3) and "a person must look" (exit 4) are told
# apart, the three versions of an unmerged path can be read, directory
# modes survive, renames are followed, ignored paths are named.

load helpers
bats_require_minimum_version 1.5.0

setup() {
  setup_store
  mkdir -p "$BATS_TEST_TMPDIR/src/tests"
  seq 1 20 | sed 's/^/line /' >"$BATS_TEST_TMPDIR/src/notes.txt"
  printf 'keep\n' >"$BATS_TEST_TMPDIR/src/other.txt"
  printf 'int main (void) { return 0; }\n' >"$BATS_TEST_TMPDIR/src/tests/t1.c"
  chmod 0755 "$BATS_TEST_TMPDIR/src/tests"
  esbx_ok project create p --from "$BATS_TEST_TMPDIR/src"
}

# Fails naming the file when a layer of p holds a line esbx's merge markers
# start with.
no_markers_in_layers() {
  local hits
  hits=$(grep -rlE '^(<<<<<<< |>>>>>>> )' "$ESBX_ROOT"/projects/p/layers/*/diff 2>/dev/null || true)
  if [ -n "$hits" ]; then
    echo "markers in layers: $hits" >&2
    return 1
  fi
}

edit_line() { sed -i "s/^line $2\$/line $2 $3/" "$(path_of "$1")/notes.txt"; }

@test "markers a rebase left stay refused across later rebases until written without them" {
  make_sessions p a b c
  edit_line a 5 by-a
  edit_line b 5 by-b
  esbx_ok publish a
  esbx_fails 3 publish b
  esbx_fails 4 rebase b
  grep -q '^<<<<<<< session b' "$(path_of b)/notes.txt"
  # The head moves on a path b did not touch: the marker file is no
  # change for this rebase, and still no publish takes it.
  echo c >"$(path_of c)/c.txt"
  esbx_ok publish c
  local before
  before=$(layer_count)
  esbx_fails 4 publish b
  assert_output --partial "unmerged: /notes.txt"
  esbx_fails 4 rebase b
  assert_output --partial "unmerged: /notes.txt"
  esbx_fails 4 publish b
  assert_equal "$(layer_count)" "$before"
  no_markers_in_layers
  # Rewritten with a marker line still in it: refused.
  sed -i '/^<<<<<<< /d' "$(path_of b)/notes.txt"
  esbx_fails 4 publish b
  # Without them: it lands.
  sed -i '/^=======$/d; /^>>>>>>> /d; /^line 5 by-a$/d' "$(path_of b)/notes.txt"
  esbx_ok publish b
  assert_equal "$(layer_count)" "$((before + 1))"
  no_markers_in_layers
}

@test "exit 3 means rebase again, exit 4 a person must look; --json says which paths block" {
  make_sessions p a b
  edit_line a 5 by-a
  edit_line b 5 by-b
  printf 'a\0bin' >"$(path_of a)/blob.bin"
  printf 'b\0bin' >"$(path_of b)/blob.bin"
  esbx_ok publish a
  run --separate-stderr "$ESBX" publish --json b
  [ "$status" -eq 3 ]
  local json=$output
  [ "$(json_field conflicts.0.path <<<"$json")" = /blob.bin ]
  [ "$(json_field conflicts.0.kind <<<"$json")" = binary ]
  [ "$(json_field conflicts.0.blocking <<<"$json")" = True ]
  [ "$(json_field conflicts.1.path <<<"$json")" = /notes.txt ]
  [ "$(json_field conflicts.1.kind <<<"$json")" = content ]
  [ "$(json_field conflicts.1.blocking <<<"$json")" = False ]
  run --separate-stderr "$ESBX" rebase --json b
  [ "$status" -eq 4 ]
  json=$output
  [ "$(json_field base <<<"$json")" = "$(tail -n1 "$ESBX_ROOT/projects/p/stack")" ]
  [ "$(json_field unmerged.0.path <<<"$json")" = /blob.bin ]
  [ "$(json_field unmerged.0.kind <<<"$json")" = binary ]
  [ "$(json_field unmerged.0.base <<<"$json")" = "" ]
  [ "$(json_field unmerged.0.ours <<<"$json")" = file ]
  [ "$(json_field unmerged.1.path <<<"$json")" = /notes.txt ]
  [ "$(json_field unmerged.1.kind <<<"$json")" = content ]
  [ "$(json_field unmerged.1.base <<<"$json")" = file ]
  run --separate-stderr "$ESBX" publish --json b
  [ "$status" -eq 4 ]
  [ "$(json_field unmerged.0.path <<<"$output")" = /blob.bin ]
  # Nothing to rebase onto: the base and what is left are said again.
  run --separate-stderr "$ESBX" rebase --json b
  [ "$status" -eq 4 ]
  [ "$(json_field base <<<"$output")" = "$(tail -n1 "$ESBX_ROOT/projects/p/stack")" ]
}

@test "rebase --show prints base, ours and theirs; --resolved takes a path as it is" {
  make_sessions p a b
  edit_line a 5 by-a
  edit_line b 5 by-b
  printf 'a\0bin' >"$(path_of a)/blob.bin"
  printf 'b\0bin' >"$(path_of b)/blob.bin"
  esbx_ok publish a
  esbx_fails 4 rebase b
  esbx_ok rebase --show b /notes.txt --base
  assert_line "line 5"
  esbx_ok rebase --show b notes.txt --ours
  assert_line "line 5 by-b"
  refute_line --partial "<<<<<<<"
  esbx_ok rebase --show b /notes.txt --theirs
  assert_line "line 5 by-a"
  run bash -c '"$1" rebase --show b /blob.bin --theirs | od -c' _ "$ESBX"
  assert_output --partial "a  \\0   b   i   n"
  esbx_fails 1 rebase --show b /blob.bin --base
  assert_output --partial "has no base version"
  esbx_fails 1 rebase --show b /other.txt --ours
  assert_output --partial "is not a path rebase left unmerged"
  esbx_fails 2 rebase --show b /notes.txt
  # An unknown path changes nothing, the known ones then go.
  esbx_fails 1 rebase --resolved b /blob.bin /nosuch
  esbx_fails 4 publish b
  assert_output --partial "/blob.bin"
  sed -i '/^<<<<<<< /d; /^=======$/d; /^>>>>>>> /d; /^line 5 by-a$/d' "$(path_of b)/notes.txt"
  esbx_fails 4 publish b
  assert_output --partial "esbx rebase --resolved b PATH"
  esbx_ok rebase --resolved b /blob.bin
  esbx_ok publish b
  make_session p fresh
  run od -c "$m/blob.bin"
  assert_output --partial "b  \\0   b   i   n"
  assert_dir_not_exists "$ESBX_ROOT/sessions/b/unmerged"
}

@test "a directory mode changed upstream survives sessions that only wrote beneath it" {
  make_sessions p a b c
  chmod 0775 "$(path_of a)/tests"
  esbx_ok publish a
  # b writes a file into the directory it saw at 0755: publish lands it
  # beside the head's 0775.
  echo new >"$(path_of b)/tests/t2.c"
  esbx_ok publish b
  make_session p d
  [ "$(stat -c %a "$m/tests")" = 775 ]
  assert_file_exists "$m/tests/t2.c"
  # c copied the directory up at 0755 (a file in it touched, not
  # changed): rebase gives it the head's mode, and nothing is a change.
  touch "$(path_of c)/tests/t1.c"
  esbx_ok rebase c
  [ "$(stat -c %a "$(path_of c)/tests")" = 775 ]
  esbx_ok diff c
  assert_output ""
}

@test "two umasks: a directory both created takes the head's mode; both chmodded is unmerged" {
  make_sessions p a b c d
  mkdir -m 0775 "$(path_of a)/gen"
  echo a >"$(path_of a)/gen/a"
  mkdir -m 0755 "$(path_of b)/gen"
  echo b >"$(path_of b)/gen/b"
  esbx_ok publish a
  esbx_fails 3 publish b
  assert_output --partial "conflict: /gen"
  esbx_ok rebase b
  assert_output --partial "merged: /gen"
  esbx_ok diff b
  assert_output "A /gen/b"
  esbx_ok publish b
  make_session p e
  [ "$(stat -c %a "$m/gen")" = 775 ]
  assert_file_exists "$m/gen/a"
  assert_file_exists "$m/gen/b"
  # Both changed an existing directory's mode, each its own way.
  chmod 0700 "$(path_of c)/tests"
  chmod 0750 "$(path_of d)/tests"
  esbx_ok publish c
  esbx_fails 4 rebase d
  assert_output --partial "unmerged: /tests (mode"
  [ "$(stat -c %a "$(path_of d)/tests")" = 750 ]
}

@test "a file's mode changed on one side and its content on the other merge" {
  make_sessions p a b
  chmod +x "$(path_of a)/other.txt"
  echo more >>"$(path_of b)/other.txt"
  esbx_ok publish a
  esbx_fails 3 publish b
  esbx_ok rebase b
  [ "$(stat -c %a "$(path_of b)/other.txt")" = 755 ]
  run cat "$(path_of b)/other.txt"
  assert_output "$(printf 'keep\nmore')"
}

@test "a rename upstream and an edit in the session: the edit follows the rename" {
  make_sessions p a b
  edit_line a 1 by-a
  mkdir "$(path_of a)/doc"
  mv "$(path_of a)/notes.txt" "$(path_of a)/doc/notes.md"
  esbx_ok publish a
  edit_line b 18 by-b
  run --separate-stderr "$ESBX" publish --json b
  [ "$status" -eq 3 ]
  [ "$(json_field conflicts.0.kind <<<"$output")" = rename ]
  [ "$(json_field conflicts.0.renamed <<<"$output")" = /doc/notes.md ]
  [ "$(json_field conflicts.0.blocking <<<"$output")" = False ]
  esbx_ok rebase b
  assert_output --partial "renamed: /notes.txt -> /doc/notes.md"
  assert_file_not_exists "$(path_of b)/notes.txt"
  run cat "$(path_of b)/doc/notes.md"
  assert_line "line 1 by-a"
  assert_line "line 18 by-b"
  esbx_ok diff b
  assert_output "M /doc/notes.md"
  esbx_ok publish b
}

@test "a rename in the session and an edit upstream: the edit comes to the new name" {
  make_sessions p a b
  edit_line a 2 by-a
  esbx_ok publish a
  mv "$(path_of b)/notes.txt" "$(path_of b)/NOTES"
  sed -i 's/^line 19$/line 19 by-b/' "$(path_of b)/NOTES"
  esbx_fails 3 publish b
  esbx_ok rebase b
  assert_output --partial "renamed: /notes.txt -> /NOTES"
  run cat "$(path_of b)/NOTES"
  assert_line "line 2 by-a"
  assert_line "line 19 by-b"
  assert_file_not_exists "$(path_of b)/notes.txt"
  esbx_ok publish b
  make_session p c
  assert_file_not_exists "$m/notes.txt"
  run cat "$m/NOTES"
  assert_line "line 2 by-a"
}

@test "a deletion against an edit blocks alone: every mergeable path is merged and listed" {
  make_sessions p a b
  rm "$(path_of a)/other.txt"
  edit_line a 2 by-a
  echo changed >"$(path_of b)/other.txt"
  edit_line b 18 by-b
  esbx_ok publish a
  run --separate-stderr "$ESBX" rebase --json b
  [ "$status" -eq 4 ]
  [ "$(json_field merged.0 <<<"$output")" = /notes.txt ]
  [ "$(json_field unmerged.0.path <<<"$output")" = /other.txt ]
  [ "$(json_field unmerged.0.kind <<<"$output")" = modify/delete ]
  [ "$(json_field unmerged.0.theirs <<<"$output")" = "" ]
  run cat "$(path_of b)/notes.txt"
  assert_line "line 2 by-a"
  assert_line "line 18 by-b"
  # The session's version stays until it decides.
  run cat "$(path_of b)/other.txt"
  assert_output changed
  rm "$(path_of b)/other.txt"
  esbx_ok rebase --resolved b /other.txt
  esbx_ok publish b
}

@test "publish names the ignored paths it leaves out; discard keeps them in the trash" {
  printf '*.cmake\nbuild/\n' >"$BATS_TEST_TMPDIR/gi"
  make_sessions p a
  cp "$BATS_TEST_TMPDIR/gi" "$(path_of a)/.gitignore"
  esbx_ok publish a
  make_sessions p b
  mkdir -p "$(path_of b)/vendor/dep" "$(path_of b)/build"
  for f in a b c; do echo "set($f)" >"$(path_of b)/vendor/dep/$f.cmake"; done
  echo obj >"$(path_of b)/build/x.o"
  echo src >"$(path_of b)/src.c"
  esbx_ok publish b
  assert_output --partial "4 ignored paths left out"
  assert_output --partial "/build/"
  assert_output --partial "/vendor/dep/a.cmake"
  assert_output --partial "--include-ignored"
  run --separate-stderr "$ESBX" publish --json b
  [ "$(json_field ignored.count <<<"$output")" = 4 ]
  esbx_ok discard b
  assert_output --partial "trash"
  esbx_ok trash list
  [[ $output == *$'\tb\tp\t'* ]]
}

@test "five sessions retrying publish || rebase on one line under a moving head land no marker" {
  local s i
  make_sessions p mover
  for s in 1 2 3 4 5; do
    make_sessions p "r$s"
    edit_line "r$s" 10 "by-r$s"
    echo "$s" >"$(path_of "r$s")/own$s.txt"
  done
  # The loop an unattended agent runs: publish || { rebase; publish; },
  # while others keep landing unrelated work.
  for i in 1 2 3; do
    echo "$i" >"$(path_of mover)/round$i.txt"
    esbx_ok publish mover
    for s in 1 2 3 4 5; do
      "$ESBX" publish "r$s" 2>/dev/null || { "$ESBX" rebase "r$s" 2>/dev/null; "$ESBX" publish "r$s" 2>/dev/null; } || true
      no_markers_in_layers
    done
  done
  # The first landed its line; the others wait for a person, whole.
  make_session p check
  run grep -c '^line 10 by-r' "$m/notes.txt"
  assert_output 1
  assert_file_exists "$m/own1.txt"
  assert_file_exists "$m/round3.txt"
  for s in 2 3 4 5; do
    assert_file_not_exists "$m/own$s.txt"
    esbx_fails 4 publish "r$s"
  done
}

@test "show prints a path at a layer; wait blocks until the head moves" {
  make_sessions p a
  local first
  first=$(tail -n1 "$ESBX_ROOT/projects/p/stack")
  edit_line a 3 by-a
  esbx_ok publish a
  esbx_ok show p:/notes.txt
  assert_line "line 3 by-a"
  esbx_ok show "p@$first:notes.txt"
  assert_line "line 3"
  refute_line "line 3 by-a"
  esbx_ok show p:/tests
  assert_output "t1.c"
  esbx_ok show p:/
  assert_line "tests/"
  esbx_fails 1 show p:/nosuch
  assert_output --partial "no such path"
  esbx_fails 2 show p
  # wait: at once when the head is past --after, else when it moves.
  esbx_ok wait p --after "$first"
  assert_output "$(tail -n1 "$ESBX_ROOT/projects/p/stack")"
  esbx_fails 1 wait p --timeout 1s
  assert_output --partial "the head is still"
  make_sessions p b
  echo b >"$(path_of b)/b.txt"
  (sleep 1 && "$ESBX" publish b >/dev/null 2>&1) &
  esbx_ok wait p --timeout 30s
  wait
  assert_output "$(tail -n1 "$ESBX_ROOT/projects/p/stack")"
  esbx_fails 1 wait p --after nosuchlayer
}

@test "a fork or a snapshot of a session with unmerged paths publishes them only once resolved" {
  make_sessions p a b
  edit_line a 5 by-a
  edit_line b 5 by-b
  esbx_ok publish a
  esbx_fails 4 rebase b
  esbx_ok session fork b --name f
  esbx_fails 4 publish f
  assert_output --partial "unmerged: /notes.txt"
  esbx_ok session snapshot b --name snap
  esbx_ok session create p --from-snapshot snap --name g
  esbx_fails 4 publish g
  no_markers_in_layers
  sed -i '/^<<<<<<< /d; /^=======$/d; /^>>>>>>> /d; /^line 5 by-a$/d' "$(path_of f)/notes.txt"
  esbx_ok publish f
  no_markers_in_layers
}
