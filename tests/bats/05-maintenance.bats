#!/usr/bin/env bats
# fsck, gc, squash and deep stacks.

load helpers

setup() { setup_project; }

@test "fsck finds a layer whose content no longer matches its record" {
  esbx_ok fsck
  layer=$(echo "$ESBX_ROOT"/projects/p/layers/*)
  echo tampered >>"$layer/diff/README"
  esbx_fails 1 fsck p
  assert_output --partial "/README: content differs from the record"
  touch "$layer/diff/extra"
  esbx_fails 1 fsck
  assert_output --partial "/extra: not in the record"
}

@test "gc removes leftovers of crashed operations and leaves live state alone" {
  esbx_ok session create p --name live
  echo keep >"$("$ESBX" session path live)/keep"
  mkdir -p "$ESBX_ROOT/tmp/session-dead" "$ESBX_ROOT/projects/p/tmp/deadbeef/diff"
  mkdir -p "$ESBX_ROOT/projects/p/layers/0123456789abcdef/diff"
  mkdir -p "$ESBX_ROOT/projects/half" "$ESBX_ROOT/projects/nolock"
  touch "$ESBX_ROOT/projects/half/lock"
  esbx_ok gc
  assert_line "removed tmp/session-dead"
  assert_line "removed projects/p/tmp/deadbeef"
  assert_line "removed projects/p/layers/0123456789abcdef"
  assert_line "removed projects/half"
  assert_line "removed projects/nolock"
  assert_file_exists "$("$ESBX" session path live)/keep"
  esbx_ok gc
  assert_output ""
  esbx_ok fsck
}

@test "gc runs concurrently with publishers without losing a layer" {
  for i in 1 2 3 4; do
    esbx_ok session create p --name w$i
    echo $i >"$("$ESBX" session path w$i)/f$i"
  done
  for i in 1 2 3 4; do "$ESBX" publish w$i >/dev/null & "$ESBX" gc >/dev/null & done
  wait
  [ "$(wc -l <"$ESBX_ROOT/projects/p/stack")" -eq 5 ]
  esbx_ok fsck p
}

@test "a crash between layer install and head update leaves the old head; gc removes the orphan" {
  esbx_ok session create p --name s1
  echo x >"$("$ESBX" session path s1)/x"
  old=$(tail -n1 "$ESBX_ROOT/projects/p/stack")
  esbx_ok publish s1
  new=$output
  # Roll the head back as if the crash came before the stack rename.
  printf '%s\n' "$old" >"$ESBX_ROOT/projects/p/stack"
  esbx_ok discard s1
  esbx_ok gc
  assert_line "removed projects/p/layers/$new"
  esbx_ok fsck p
}

@test "squash flattens the stack into one layer with the same tree" {
  for i in 1 2 3; do
    esbx_ok session create p --name s$i
    echo $i >"$("$ESBX" session path s$i)/f$i"
    rm -f "$("$ESBX" session path s$i)/README"
    esbx_ok publish s$i --discard
  done
  esbx_ok project squash p
  id=$output
  [ "$(cat "$ESBX_ROOT/projects/p/stack")" = "$id" ]
  make_session p after
  [ "$(cat "$m/f3")" = 3 ]
  [ ! -e "$m/README" ]
  esbx_ok gc
  [ "$(ls "$ESBX_ROOT/projects/p/layers" | wc -l)" -eq 1 ]
  esbx_ok fsck p
}

@test "squash refuses while sessions use the project" {
  esbx_ok session create p --name s1
  esbx_fails 1 project squash p
  assert_output --partial "s1"
}

@test "a stack of 600 layers still creates sessions and reads files" {
  esbx_ok project create deep
  # Layers are built through the real publish path, one per publish.
  make_session deep builder
  for i in $(seq 1 599); do
    echo $i >"$m/f"
    echo $i >"$m/g$((i % 7))"
    "$ESBX" publish builder >/dev/null || fail "publish $i"
  done
  [ "$(wc -l <"$ESBX_ROOT/projects/deep/stack")" -eq 600 ]
  esbx_ok session create deep --name top
  top=$("$ESBX" session path top)
  [ "$(cat "$top/f")" = 599 ]
  for k in 0 1 2 3 4 5 6; do [ -f "$top/g$k" ]; done
  [ "$(cat "$top/g1")" = 596 ]
  # Beyond overlayfs's 500 lower layers the bottom ones are folded into a
  # read-only overlay of their own.
  grep -qF "$ESBX_ROOT/sessions/top/lower " /proc/self/mountinfo
  echo write >"$top/new"
  esbx_ok diff top
  assert_output "A /new"
  esbx_ok discard top
  run grep -F "$ESBX_ROOT/sessions/top" /proc/self/mountinfo
  assert_failure
  esbx_ok discard builder
  esbx_ok project squash deep
}
