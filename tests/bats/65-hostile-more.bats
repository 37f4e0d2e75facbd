#!/usr/bin/env bats
# Hostile session content and sources not covered by 04-hostile and
# 10-import (issue 7): paths at PATH_MAX, symlink loops and host symlinks at
# export and diff, FIFOs and sockets at export, reserved names at export,
# hard links to files outside a directory import.

load helpers

setup() { setup_session; }

# Make a chain of 200-character directories below DIR and a file at its
# bottom so that the relative path is LEN characters long (LEN - 1 with the
# leading slash of the path esbx shows); prints the relative path.
deep_path() {
  local dir=$1 len=$2 comp rel="" name c
  (
    cd "$dir" || exit 1
    while [ $((len - ${#rel})) -gt 255 ]; do
      c=200
      [ $((len - ${#rel} - 2)) -lt $c ] && c=$((len - ${#rel} - 2))
      comp=$(printf 'd%.0s' $(seq 1 $c))
      mkdir "$comp" && cd "$comp" || exit 1
      rel=$rel$comp/
    done
    name=$(printf 'f%.0s' $(seq 1 $((len - ${#rel}))))
    echo deep >"$name"
    echo "$rel$name"
  )
}

@test "a path at PATH_MAX inside the session is published, exported and checked" {
  rel=$(deep_path "$m" 4094)
  # "/" + rel is 4095 characters: PATH_MAX less the terminating NUL.
  [ ${#rel} -eq 4094 ]
  # Beneath the store root, the absolute path is longer than PATH_MAX.
  [ $((${#m} + ${#rel})) -gt 4096 ]
  esbx_ok diff s1 --json
  echo "$output" | jq -e --arg p "/$rel" 'any(.[]; .path == $p and .type == "file")'
  esbx_ok publish s1
  id=$output
  esbx_ok fsck p
  jq -e --arg p "/$rel" 'any(.changes[]; .path == $p)' "$ESBX_ROOT/projects/p/layers/$id/record.json"
  esbx_ok export "p@$id" -o "$BATS_TEST_TMPDIR/deep.tar"
  tar -tf "$BATS_TEST_TMPDIR/deep.tar" | grep -q "ffff$"
  esbx_ok blame p "/$rel"
}

@test "a path longer than PATH_MAX is refused with a one-line error and nothing lands" {
  rel=$(deep_path "$m" 4300)
  [ ${#rel} -eq 4300 ]
  run "$ESBX" publish s1
  [ "$status" -eq 1 ]
  [ "${#lines[@]}" -eq 1 ]
  [[ "$output" == "esbx: publish \`s1\`: "* ]]
  [ "$(wc -l <"$ESBX_ROOT/projects/p/stack")" -eq 1 ]
  esbx_ok fsck p
}

@test "symlink loops are exported and diffed as symlinks" {
  ln -s self "$m/self"
  ln -s b "$m/a"
  ln -s a "$m/b"
  mkdir "$m/cyc"
  ln -s .. "$m/cyc/up"
  ln -s ../cyc "$m/cyc/me"
  esbx_ok diff s1 --json
  echo "$output" | jq -e '[.[] | select(.type == "symlink")] | length == 5'
  esbx_ok diff s1 --patch
  esbx_ok export s1 -o "$BATS_TEST_TMPDIR/loops.tar"
  run tar -tvf "$BATS_TEST_TMPDIR/loops.tar"
  assert_output --partial "self -> self"
  assert_output --partial "cyc/up -> .."
  esbx_ok publish s1
  esbx_ok fsck p
  esbx_ok export p -o "$BATS_TEST_TMPDIR/loops2.tar"
}

@test "export and patch never read through a symlink to a host file" {
  ln -s /etc/shadow "$m/shadow"
  ln -s /etc "$m/etc"
  esbx_ok export s1 -o "$BATS_TEST_TMPDIR/s.tar"
  run bash -c 'tar -xOf "$1" 2>/dev/null | grep -c "^root:"' _ "$BATS_TEST_TMPDIR/s.tar"
  assert_output 0
  run tar -tvf "$BATS_TEST_TMPDIR/s.tar"
  assert_output --partial "shadow -> /etc/shadow"
  refute_output --partial "etc/passwd"
  esbx_ok diff s1 --patch
  refute_output --partial "root:"
}

@test "a FIFO does not hang export and is exported as a FIFO; a socket is skipped" {
  mkfifo "$m/pipe"
  python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' "$m/sock"
  run timeout 20 "$ESBX" export s1 -o "$BATS_TEST_TMPDIR/f.tar"
  [ "$status" -eq 0 ]
  tar -tvf "$BATS_TEST_TMPDIR/f.tar" | grep -qE '^p.* pipe$'
  run tar -tf "$BATS_TEST_TMPDIR/f.tar"
  refute_output --partial sock
}

@test "reserved and hostile names: diff and oci-layer export refuse them, a plain tar keeps them as data" {
  touch "$m/.wh.x"
  # In an OCI layer `.wh.x` would delete x wherever the layer is applied.
  esbx_fails 1 export s1 -o "$BATS_TEST_TMPDIR/w.tar" --format oci-layer
  assert_output --partial ".wh.x"
  [ "${#lines[@]}" -eq 1 ]
  [ ! -e "$BATS_TEST_TMPDIR/w.tar" ]
  esbx_fails 1 diff s1
  assert_output --partial ".wh.x"
  # A plain tar of the tree has no whiteout convention: the name is data.
  esbx_ok export s1 -o "$BATS_TEST_TMPDIR/plain.tar"
  tar -tf "$BATS_TEST_TMPDIR/plain.tar" | grep -qx '.wh.x'
  rm "$m/.wh.x"
  touch "$m/$(printf 'new\nline')"
  esbx_fails 1 export s1 -o "$BATS_TEST_TMPDIR/n.tar" --format oci-layer
  [ "${#lines[@]}" -eq 1 ]
  [ ! -e "$BATS_TEST_TMPDIR/n.tar" ]
  esbx_fails 1 publish s1
  [ "$(wc -l <"$ESBX_ROOT/projects/p/stack")" -eq 1 ]
}

@test "a directory import copies a hard link to a file outside the source" {
  echo secret >"$BATS_TEST_TMPDIR/outside"
  mkdir "$BATS_TEST_TMPDIR/tree"
  ln "$BATS_TEST_TMPDIR/outside" "$BATS_TEST_TMPDIR/tree/hl"
  esbx_ok project create h --from "$BATS_TEST_TMPDIR/tree"
  id=$(cat "$ESBX_ROOT/projects/h/stack")
  f=$ESBX_ROOT/projects/h/layers/$id/diff/hl
  [ "$(stat -c %h "$f")" -eq 1 ]
  echo changed >"$BATS_TEST_TMPDIR/outside"
  [ "$(cat "$f")" = secret ]
  esbx_ok fsck h
}

@test "a symlink loop as the import source is refused, not followed forever" {
  ln -s loop "$BATS_TEST_TMPDIR/loop"
  esbx_fails 1 project create l --from "$BATS_TEST_TMPDIR/loop"
  [ "${#lines[@]}" -eq 1 ]
  [ ! -e "$ESBX_ROOT/projects/l" ]
}
