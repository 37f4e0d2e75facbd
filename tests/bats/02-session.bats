#!/usr/bin/env bats
# Sessions: overlay mounts, isolation, diff in its three forms.

load helpers

setup() { setup_project; }

@test "session create prints the name and mounts an overlay with plain options" {
  esbx_ok session create p --name s1
  assert_output "s1"
  merged=$("$ESBX" session path s1)
  run grep -F " $merged " /proc/self/mountinfo
  assert_success
  assert_output --partial "overlay"
  # redirect_dir=off, index=off and metacopy=off are the kernel's defaults
  # here, which mountinfo does not print: check none is on.
  refute_output --partial "redirect_dir=on"
  refute_output --partial "metacopy=on"
  refute_output --partial "index=on"
  assert_file_exists "$merged/src/main.c"
}

@test "generated session names follow the rule" {
  esbx_ok session create p
  [[ "$output" =~ ^p-[0-9a-f]{8}$ ]]
}

@test "writes in one session are invisible in another and in the base" {
  s1=$("$ESBX" session create p)
  s2=$("$ESBX" session create p)
  m1=$("$ESBX" session path "$s1")
  m2=$("$ESBX" session path "$s2")
  echo private >"$m1/new"
  assert_file_not_exists "$m2/new"
  esbx_ok diff "$s2"
  assert_output ""
}

@test "diff shows added, modified and deleted; copy-ups identical to the base are not changes" {
  make_session p s1
  echo x >"$m/new"
  echo more >>"$m/README"
  rm "$m/docs/guide.txt"
  chmod 600 "$m/src/main.c" && chmod 644 "$m/src/main.c"   # copy-up, same state
  touch "$m/link"                                           # follows to README
  esbx_ok diff s1
  assert_output "M /README
D /docs/guide.txt
A /new"
}

@test "diff --json gives path, kind, type, size and sha256" {
  make_session p s1
  printf 'abc' >"$m/new"
  esbx_ok diff s1 --json
  echo "$output" | jq -e '.[0] | .path == "/new" and .kind == "added" and .type == "file" and .size == 3 and .sha256 == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"'
}

@test "diff --patch prints unified diffs of text files" {
  make_session p s1
  printf 'line1\nline two\n' >"$m/docs/guide.txt"
  printf '\0\1\2' >"$m/bin"
  esbx_ok diff s1 --patch
  assert_line -- "--- a/docs/guide.txt"
  assert_line -- "+++ b/docs/guide.txt"
  assert_line -- "-line2"
  assert_line -- "+line two"
  # like git: an added file has no a/ side, a deleted one no b/ side
  assert_line "Binary files /dev/null and b/bin differ"
}

@test "diff --patch names both sides of a file that became binary, and /dev/null for a deleted one" {
  make_session p s1
  printf '\0\1\2' >"$m/README"
  printf '\0\1\2' >"$m/bin"
  esbx_ok publish s1
  make_session p s2
  printf '\0\3' >"$m/README"
  rm "$m/bin"
  esbx_ok diff s2 --patch
  assert_output "Binary files a/README and b/README differ
Binary files a/bin and /dev/null differ"
}

@test "diff --patch into a reader that stops early: its lines, no message, ended by SIGPIPE like git" {
  make_session p s1
  for i in $(seq 1 40); do seq 1 3000 >"$m/f$i"; done
  printf '\0' >"$m/bin"
  run bash -c 'set -o pipefail; "$ESBX" diff --patch s1 2>"$1" | head -n 1' _ "$BATS_TEST_TMPDIR/err"
  assert_equal "$status" 141
  assert_output -- "Binary files /dev/null and b/bin differ"
  run cat "$BATS_TEST_TMPDIR/err"
  assert_output ""
  # the same where diff(1) is the writer that meets the closed pipe
  rm "$m/bin"
  run bash -c 'set -o pipefail; "$ESBX" diff --patch s1 2>"$1" | head -n 1' _ "$BATS_TEST_TMPDIR/err"
  assert_equal "$status" 141
  assert_output -- "--- /dev/null"
  run cat "$BATS_TEST_TMPDIR/err"
  assert_output ""
}

@test "diff lists a directory before its contents, in the order of a sorted walk" {
  make_session p s1
  mkdir -p "$m/new/sub" "$m/new-b"
  echo x >"$m/new/sub/f"
  echo y >"$m/new-b/g"
  esbx_ok diff s1
  assert_output "A /new
A /new/sub
A /new/sub/f
A /new-b
A /new-b/g"
  esbx_ok diff s1 --json
  [ "$(echo "$output" | jq -r '.[].path' | paste -sd' ')" = "/new /new/sub /new/sub/f /new-b /new-b/g" ]
}

@test "symlink, type and mode changes are changes" {
  make_session p s1
  ln -sfn src "$m/link"
  chmod 700 "$m/src"
  rm -r "$m/docs" && echo file >"$m/docs"
  esbx_ok diff s1 --json
  echo "$output" | jq -e 'map(select(.path == "/link"))[0] | .kind == "modified" and .type == "symlink" and .target == "src"'
  echo "$output" | jq -e 'map(select(.path == "/src"))[0] | .kind == "modified" and .mode == 448'
  echo "$output" | jq -e 'map(select(.path == "/docs"))[0] | .kind == "modified" and .type == "file"'
}

@test "opaque directories: rm -rf then mkdir shows the old contents deleted" {
  make_session p s1
  rm -rf "$m/docs" && mkdir "$m/docs" && echo n >"$m/docs/new.txt"
  esbx_ok diff s1
  assert_line "D /docs/guide.txt"
  assert_line "A /docs/new.txt"
}

@test "a session on an older base sees that base" {
  esbx_ok session create p --name s1
  echo v1 >"$("$ESBX" session path s1)/v"
  esbx_ok publish s1
  esbx_ok session create p --name old --base 0
  assert_file_not_exists "$("$ESBX" session path old)/v"
  esbx_ok session create p --name new --base head
  assert_file_exists "$("$ESBX" session path new)/v"
}

@test "session inspect and list" {
  esbx_ok session create p --name s1 --label agent=a1 --network host
  esbx_ok session inspect s1
  echo "$output" | jq -e '.project == "p" and .labels.agent == "a1" and .network == "host" and .mounted == true'
  esbx_ok session list --project p
  assert_output --partial "s1"
  esbx_ok --json session list
  echo "$output" | jq -e 'length == 1'
}

@test "bad session options change nothing" {
  esbx_fails 2 session create p --name "bad/name"
  esbx_fails 2 session create p --network bridge
  esbx_fails 2 session create p --label novalue
  esbx_fails 1 session create nope
  esbx_fails 1 session create p --base deadbeef
  run ls "$ESBX_ROOT/sessions"
  assert_output ""
}

@test "a session is mounted again on demand after an unmount (reboot)" {
  make_session p s1
  echo keep >"$m/kept"
  umount "$m"
  esbx_ok session path s1
  assert_file_exists "$m/kept"
}

@test "a mount that fails names the directory and the kernel's cause" {
  make_session p s1
  umount "$m"
  rm -rf "$ESBX_ROOT/sessions/s1/work"
  esbx_fails 1 session path s1
  assert_output --partial "sessions/s1/work"
  assert_output --partial "No such file or directory"
  refute_output --partial "No data available"
  [ "${#lines[@]}" -eq 1 ]
}

@test "discard returns once the session is gone; a process of its own removes its files and holds no lock" {
  command -v strace >/dev/null || skip "strace is not installed"
  make_session p s1
  mkdir "$m/many"
  for i in $(seq 1 2000); do : >"$m/many/f$i"; done
  esbx_ok publish s1
  strace -f -qq -e trace=execve,unlinkat -o "$BATS_TEST_TMPDIR/strace" "$ESBX" discard s1
  assert_dir_not_exists "$ESBX_ROOT/sessions/s1"
  main=$(head -n 1 "$BATS_TEST_TMPDIR/strace" | cut -d' ' -f1)
  # The CLI itself unlinks none of the session's 2000 files.
  [ "$(grep -c "^$main .*unlinkat(.*\"f[0-9]*\"" "$BATS_TEST_TMPDIR/strace")" -eq 0 ] ||
    fail "the discard removed the files itself"
  [ "$(grep -c 'unlinkat(.*"f[0-9]*"' "$BATS_TEST_TMPDIR/strace")" -ge 2000 ]
  for _ in $(seq 1 100); do
    [ -z "$(ls -A "$ESBX_ROOT/tmp")" ] && break
    sleep 0.1
  done
  [ -z "$(ls -A "$ESBX_ROOT/tmp")" ] || fail "left in tmp/: $(ls -A "$ESBX_ROOT/tmp")"
  # Nothing of the verb's locks went with the remover.
  run timeout 10 "$ESBX" session create p --name s2
  assert_success
}

@test "discard unmounts and removes the private state" {
  make_session p s1
  esbx_ok discard s1
  run grep -F "$m" /proc/self/mountinfo
  assert_failure
  assert_dir_not_exists "$ESBX_ROOT/sessions/s1"
  esbx_fails 1 discard s1
  assert_output --partial "does not exist"
}
