#!/usr/bin/env bats
# Hostile session content at diff, publish and blame: symlinks are data,
# never followed; devices refused; setuid stripped; reserved names refused.

load helpers

setup() { setup_session; }

@test "symlinks to host files are published as symlinks, never followed" {
  ln -s /etc/shadow "$m/shadow"
  ln -s ../../../../etc "$m/up"
  ln -s loop "$m/loop"
  esbx_ok publish s1
  id=$output
  diff=$ESBX_ROOT/projects/p/layers/$id/diff
  [ -L "$diff/shadow" ]
  [ "$(readlink "$diff/shadow")" = /etc/shadow ]
  [ -L "$diff/up" ]
  [ -L "$diff/loop" ]
  run grep -c root: "$ESBX_ROOT/projects/p/layers/$id/record.json"
  assert_output 0
  esbx_ok fsck p
}

@test "a directory replaced by a symlink is not walked through" {
  rm -rf "$m/docs"
  ln -s /etc "$m/docs"
  esbx_ok diff s1 --json
  echo "$output" | jq -e 'length == 1 and .[0].type == "symlink" and .[0].target == "/etc"'
}

@test "device nodes are refused with a one-line error and nothing is published" {
  mknod "$m/dev0" c 1 3
  esbx_fails 1 publish s1
  assert_output "esbx: publish \`s1\`: session \`s1\`: \`/dev0\` is a device node: refused"
  [ "$(wc -l <"$ESBX_ROOT/projects/p/stack")" -eq 1 ]
}

@test "setuid and setgid bits are stripped and reported" {
  cp /bin/true "$m/suid"
  chmod 6755 "$m/suid"
  esbx_ok diff s1
  assert_output "A /suid  (setuid/setgid stripped)"
  esbx_ok publish s1
  id=$output
  [ "$(stat -c %a "$ESBX_ROOT/projects/p/layers/$id/diff/suid")" = 755 ]
  esbx_ok fsck p
}

@test "names that are not UTF-8, hold newlines or look like whiteouts are refused" {
  touch "$m/$(printf 'bad\nname')"
  esbx_fails 1 diff s1
  assert_output --partial "control character"
  rm "$m/$(printf 'bad\nname')"
  touch "$m/$(printf 'x\xff')"
  esbx_fails 1 publish s1
  assert_output --partial "not UTF-8"
  rm "$m/$(printf 'x\xff')"
  touch "$m/.wh.README"
  esbx_fails 1 publish s1
  assert_output --partial "reserved for whiteouts"
  [ "$(wc -l <"$ESBX_ROOT/projects/p/stack")" -eq 1 ]
}

@test "FIFOs are published as FIFOs; sockets are skipped with a warning" {
  mkfifo "$m/fifo"
  python3 -c "import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])" "$m/sock"
  run "$ESBX" publish s1
  assert_success
  assert_line --partial "is a socket"
  id=${lines[-1]}
  [ -p "$ESBX_ROOT/projects/p/layers/$id/diff/fifo" ]
  [ ! -e "$ESBX_ROOT/projects/p/layers/$id/diff/sock" ]
}

@test "hard links to files outside the upper are copied, not linked" {
  echo secret >"$BATS_TEST_TMPDIR/outside"
  ln "$BATS_TEST_TMPDIR/outside" "$ESBX_ROOT/sessions/s1/upper/hl" 2>/dev/null || skip "upper on another filesystem"
  esbx_ok publish s1
  id=$output
  [ "$(stat -c %h "$ESBX_ROOT/projects/p/layers/$id/diff/hl")" -eq 1 ]
  echo changed >"$BATS_TEST_TMPDIR/outside"
  [ "$(cat "$ESBX_ROOT/projects/p/layers/$id/diff/hl")" = secret ]
}

@test "blame and diff of paths with .. are refused" {
  esbx_fails 1 blame p ../../etc/passwd
  assert_output --partial "\`..\` is not allowed"
}

@test "100k files in one directory" {
  mkdir "$m/many"
  (cd "$m/many" && seq 1 100000 | xargs touch)
  esbx_ok publish s1
  id=$output
  [ "$(jq '.changes | length' "$ESBX_ROOT/projects/p/layers/$id/record.json")" -eq 100001 ]
}
