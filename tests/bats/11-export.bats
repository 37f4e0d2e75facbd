#!/usr/bin/env bats
# esbx export: the whole tree (tar) or the change set (oci-layer) of a
# session, a project head or an older layer; deterministic, atomic, never
# following a symlink out of the session.

load helpers

setup() {
  setup_project
  src=$BATS_TEST_TMPDIR/src
  base=$(head -n1 "$ESBX_ROOT/projects/p/stack")
  out=$BATS_TEST_TMPDIR/out
  mkdir -p "$out"
}

# Names in an archive, one per line, in archive order.
names() {
  tar -tf "$1"
}

@test "export a project as tar: the tree round-trips" {
  esbx_ok export p -o "$out/p.tar"
  assert_output ""
  mkdir "$out/x"
  tar -C "$out/x" -xf "$out/p.tar"
  diff -r --no-dereference "$src" "$out/x"
  [ -L "$out/x/link" ]
  [ "$(readlink "$out/x/link")" = README ]
  # Nothing but the result next to it: the temp file was renamed.
  run ls -A "$out"
  assert_output "$(printf 'p.tar\nx')"
}

@test "an exported tar imports back into an identical project" {
  esbx_ok export p -o "$out/p.tar"
  esbx_ok project create q --from "$out/p.tar"
  q=$(head -n1 "$ESBX_ROOT/projects/q/stack")
  diff -r --no-dereference "$src" "$ESBX_ROOT/projects/q/layers/$q/diff"
}

@test "export is deterministic and lists parents before children in sorted order" {
  esbx_ok export p -o "$out/a.tar"
  esbx_ok export p -o "$out/b.tar"
  cmp "$out/a.tar" "$out/b.tar"
  run names "$out/a.tar"
  assert_output "$(printf 'README\ndocs/\ndocs/guide.txt\nlink\nsrc/\nsrc/main.c')"
}

@test "export a session as tar shows its current tree" {
  make_session p s1
  echo changed >"$m/README"
  rm "$m/docs/guide.txt"
  mkdir -p "$m/new/dir" && echo n >"$m/new/dir/file"
  ln -s /etc/shadow "$m/shadow"
  esbx_ok export s1 -o "$out/s1.tar"
  mkdir "$out/x"
  tar -C "$out/x" -xf "$out/s1.tar"
  [ "$(cat "$out/x/README")" = changed ]
  [ ! -e "$out/x/docs/guide.txt" ]
  [ -d "$out/x/docs" ]
  [ "$(cat "$out/x/new/dir/file")" = n ]
  # A symlink to a host file is stored as a symlink, its target unread.
  [ -L "$out/x/shadow" ]
  [ "$(readlink "$out/x/shadow")" = /etc/shadow ]
  run tar -xOf "$out/s1.tar" shadow
  refute_output --partial "root:"
}

@test "export a session as an OCI layer: its change set with whiteouts" {
  make_session p s1
  echo changed >"$m/README"
  rm "$m/docs/guide.txt"
  rm -rf "$m/src"
  echo n >"$m/docs/new.txt"
  esbx_ok export s1 --format oci-layer -o "$out/s1.tar"
  run names "$out/s1.tar"
  assert_output "$(printf 'README\ndocs/\ndocs/.wh.guide.txt\ndocs/new.txt\n.wh.src')"
  # Whiteouts are empty regular files, no device nodes.
  run tar -tvf "$out/s1.tar"
  refute_output --regexp '^c'
  [ "$(tar -xOf "$out/s1.tar" README)" = changed ]
}

@test "export PROJECT@LAYER: an older layer and the layer's own diff as an OCI layer" {
  make_session p s1
  rm "$m/README"
  echo two >"$m/docs/guide.txt"
  esbx_ok publish s1
  top=$output

  esbx_ok export "p@$base" -o "$out/old.tar"
  [ "$(tar -xOf "$out/old.tar" README)" = hello ]
  esbx_ok export p@head -o "$out/head.tar"
  run names "$out/head.tar"
  refute_line README
  [ "$(tar -xOf "$out/head.tar" docs/guide.txt)" = two ]

  esbx_ok export "p@$top" --format oci-layer -o "$out/layer.tar"
  run names "$out/layer.tar"
  assert_line .wh.README
  assert_line docs/guide.txt
  refute_line src/main.c
  run tar -tvf "$out/layer.tar"
  refute_output --regexp '^c'
}

@test "an OCI layer applied over the base tree gives the session's tree" {
  make_session p s1
  rm -rf "$m/docs"
  echo x >"$m/src/extra.c"
  esbx_ok export s1 --format oci-layer -o "$out/layer.tar"
  esbx_ok export s1 -o "$out/full.tar"
  mkdir "$out/applied" "$out/full"
  cp -a "$src/." "$out/applied/"
  tar -C "$out/applied" -xf "$out/layer.tar"
  # Realise the whiteouts the way a container engine does.
  find "$out/applied" -name '.wh.*' | while read -r wh; do
    rm -rf "$(dirname "$wh")/$(basename "$wh" | sed 's/^\.wh\.//')" "$wh"
  done
  tar -C "$out/full" -xf "$out/full.tar"
  diff -r --no-dereference "$out/full" "$out/applied"
}

@test "export to stdout with -o -" {
  run bash -c '"$ESBX" export p -o - | tar -tf -'
  [ "$status" -eq 0 ]
  assert_line src/main.c
}

@test "export of an unknown ref fails with one line and leaves the old file" {
  echo old >"$out/keep.tar"
  esbx_fails 1 export nosuch -o "$out/keep.tar"
  [ "${#lines[@]}" -eq 1 ]
  assert_output --partial "nosuch"
  esbx_fails 1 export p@ffffffffffff -o "$out/keep.tar"
  [ "${#lines[@]}" -eq 1 ]
  [ "$(cat "$out/keep.tar")" = old ]
  run ls -A "$out"
  assert_output keep.tar
}

@test "export refuses a device node in a session and leaves no file" {
  make_session p s1
  mknod "$m/dev0" c 1 3
  esbx_fails 1 export s1 -o "$out/s1.tar"
  [ "${#lines[@]}" -eq 1 ]
  assert_output --partial "device node"
  run ls -A "$out"
  assert_output ""
}

@test "export strips setuid bits with a warning" {
  make_session p s1
  printf '#!/bin/sh\n' >"$m/suid"
  chmod 04755 "$m/suid"
  esbx_ok export s1 -o "$out/s1.tar"
  assert_output --partial "stripped setuid/setgid bits from \`/suid\`"
  run tar -tvf "$out/s1.tar" suid
  assert_output --regexp '^-rwxr-xr-x'
}

@test "export usage errors exit 2" {
  esbx_fails 2 export p
  esbx_fails 2 export p -o "$out/x.tar" --format zip
  assert_output --partial "unknown format"
}

@test "an opaque directory in a layer's diff becomes .wh..wh..opq in the OCI layer" {
  # Layers published by esbx spell a replaced directory as whiteouts; a
  # layer in overlayfs format may also carry the opaque xattr: plant one.
  make_session p s1
  echo n >"$m/docs/new.txt"
  esbx_ok publish s1
  top=$output
  esbx_ok discard s1
  diff=$ESBX_ROOT/projects/p/layers/$top/diff
  python3 -c 'import os,sys; os.setxattr(sys.argv[1], "trusted.overlay.opaque", b"y")' "$diff/docs"
  mknod "$diff/gone" c 0 0
  esbx_ok export "p@$top" --format oci-layer -o "$out/layer.tar"
  run names "$out/layer.tar"
  assert_output "$(printf 'docs/\ndocs/.wh..wh..opq\ndocs/new.txt\n.wh.gone')"
}
