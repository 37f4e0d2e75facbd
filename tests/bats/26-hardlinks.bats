#!/usr/bin/env bats
# Hard links made in a session: one file in the published layer, hard-link
# entries in exports, bytes counted once in sizes.  Links to a file the
# session did not change stay copies.

load helpers

setup() {
  setup_session
  out=$BATS_TEST_TMPDIR/out
  mkdir -p "$out"
}

diff_of() { echo "$ESBX_ROOT/projects/p/layers/$(head_of)/diff"; }

# Two names of one 1 MiB file, and a third name in another directory.
make_links() {
  head -c 1048576 /dev/urandom >"$m/tool"
  mkdir "$m/bin"
  ln "$m/tool" "$m/bin/tool-a"
  ln "$m/tool" "$m/bin/tool-b"
}

@test "names of one file in a session stay one file in the layer and in new sessions" {
  make_links
  sum=$(sha256sum <"$m/tool")
  esbx_ok --json diff s1
  # The first name in path order carries the bytes; the others name it.
  jq -e '[.[] | select(.path == "/bin/tool-b")][0].link == "/bin/tool-a"' <<<"$output"
  jq -e '[.[] | select(.path == "/tool")][0].link == "/bin/tool-a"' <<<"$output"
  jq -e '[.[] | select(.path == "/bin/tool-a")][0] | has("link") | not' <<<"$output"
  esbx_ok publish s1
  d=$(diff_of)
  [ "$(stat -c %i "$d/tool")" = "$(stat -c %i "$d/bin/tool-a")" ]
  [ "$(stat -c %i "$d/bin/tool-b")" = "$(stat -c %i "$d/bin/tool-a")" ]
  [ "$(stat -c %h "$d/tool")" = 3 ]
  jq -e '[.changes[] | select(.path == "/tool")][0] | .link == "/bin/tool-a" and .size == 1048576' \
    "$ESBX_ROOT/projects/p/layers/$(head_of)/record.json"
  esbx_ok fsck p

  make_session p s2
  [ "$(sha256sum <"$m/tool")" = "$sum" ]
  [ "$(sha256sum <"$m/bin/tool-b")" = "$sum" ]
  [ "$(stat -c %h "$m/tool")" = 3 ]
  [ "$(stat -c %i "$m/tool")" = "$(stat -c %i "$m/bin/tool-a")" ]
  esbx_ok diff s2
  assert_output ""
}

@test "fsck reports a name recorded as a link that is a separate file" {
  make_links
  esbx_ok publish s1
  d=$(diff_of)
  cp "$d/tool" "$d/tool.copy" && mv "$d/tool.copy" "$d/tool"
  esbx_fails 1 fsck p
  assert_output --partial "/tool: not the same file as /bin/tool-a"
}

@test "tar and OCI-layer exports write later names as hard-link entries" {
  make_links
  esbx_ok export s1 -o "$out/s1.tar"
  esbx_ok export s1 --format oci-layer -o "$out/s1-oci.tar"
  esbx_ok publish s1
  esbx_ok export p -o "$out/p.tar"
  esbx_ok export p --format oci-layer -o "$out/p-oci.tar"
  for t in s1.tar s1-oci.tar p.tar p-oci.tar; do
    run tar -tvf "$out/$t"
    assert_line --regexp '^-.* bin/tool-a$'
    assert_line --regexp '^h.* bin/tool-b link to bin/tool-a$'
    assert_line --regexp '^h.* tool link to bin/tool-a$'
  done
  # The data is in the archive once.
  [ "$(stat -c %s "$out/p.tar")" -lt $((2 * 1048576)) ]

  # An export imports back as one file.
  esbx_ok project create q --from "$out/p.tar"
  q=$ESBX_ROOT/projects/q/layers/$(head -n1 "$ESBX_ROOT/projects/q/stack")/diff
  [ "$(stat -c %i "$q/tool")" = "$(stat -c %i "$q/bin/tool-b")" ]
  [ "$(stat -c %h "$q/bin/tool-a")" = 3 ]
  cmp "$q/tool" "$(diff_of)/tool"
  esbx_ok fsck q
}

@test "session inspect and the trash count linked bytes once" {
  make_links
  sync
  esbx_ok --json session inspect s1
  bytes=$(jq -r .upper_bytes <<<"$output")
  [ "$bytes" -ge 1048576 ]
  [ "$bytes" -lt $((1048576 + 524288)) ]
  esbx_ok discard s1
  esbx_ok --json trash list
  size=$(jq -r '.[0].size' <<<"$output")
  [ "$size" -ge 1048576 ]
  [ "$size" -lt $((1048576 + 524288)) ]
}

@test "a link to a file the session did not change stays a copy" {
  # README is in the base; the session's new names of it are linked to each
  # other in the layer, never to the base's file, which another layer holds.
  ln "$m/README" "$m/readme-1"
  ln "$m/README" "$m/readme-2"
  esbx_ok diff s1
  assert_output "$(printf 'A /readme-1\nA /readme-2')"
  esbx_ok publish s1
  d=$(diff_of)
  [ ! -e "$d/README" ]
  [ "$(stat -c %h "$d/readme-1")" = 2 ]
  [ "$(stat -c %i "$d/readme-1")" = "$(stat -c %i "$d/readme-2")" ]
  esbx_ok fsck p

  make_session p s2
  [ "$(cat "$m/readme-2")" = hello ]
  [ "$(cat "$m/README")" = hello ]
  [ "$(stat -c %i "$m/README")" != "$(stat -c %i "$m/readme-1")" ]
  # Changing the base's name later leaves the published copies alone.
  echo changed >"$m/README"
  esbx_ok publish s2
  make_session p s3
  [ "$(cat "$m/readme-1")" = hello ]
  [ "$(cat "$m/README")" = changed ]
}

@test "a directory import and a squash keep names of one file as one file" {
  dir=$BATS_TEST_TMPDIR/linked
  mkdir -p "$dir/bin"
  echo tool >"$dir/tool"
  ln "$dir/tool" "$dir/bin/tool"
  esbx_ok project create q --from "$dir"
  q=$ESBX_ROOT/projects/q/layers/$(tail -n1 "$ESBX_ROOT/projects/q/stack")/diff
  [ "$(stat -c %i "$q/tool")" = "$(stat -c %i "$q/bin/tool")" ]
  esbx_ok fsck q

  make_links
  esbx_ok publish s1
  esbx_ok discard s1
  esbx_ok project squash p
  [ "$(wc -l <"$ESBX_ROOT/projects/p/stack")" -eq 1 ]
  d=$(diff_of)
  [ "$(stat -c %i "$d/tool")" = "$(stat -c %i "$d/bin/tool-b")" ]
  [ "$(stat -c %h "$d/bin/tool-a")" = 3 ]
  esbx_ok fsck p
}
