#!/usr/bin/env bats
# Ignore rules: build outputs stay in the session (never in a layer, never
# in the conflict check), the rules are git's (compared with git
# check-ignore), .esbxignore adds project rules, --include-ignored
# publishes them anyway; published files get the publish time, so make
# rebuilds what an older-looking edit changed.

bats_require_minimum_version 1.5.0
load helpers

# A small C project: two sources, a Makefile, ignore rules at two levels.
make_c_project() {
  local d=$1
  mkdir -p "$d/sub"
  printf '#include "util.h"\nint main (void) { return util (); }\n' >"$d/main.c"
  printf 'int util (void);\n' >"$d/util.h"
  printf '#include "util.h"\nint util (void) { return 0; }\n' >"$d/util.c"
  printf 'prog: main.o util.o\n\tcc -o prog main.o util.o\n%%.o: %%.c util.h\n\tcc -c -o $@ $<\n' \
    >"$d/Makefile"
  printf '*.o\n/prog\n!keep.o\nbuild/\n/top-only\n' >"$d/.gitignore"
  printf '*.log\n!important.log\n' >"$d/sub/.gitignore"
  printf '*.tmp\n' >"$d/.esbxignore"
}

setup() {
  setup_store
  make_c_project "$BATS_TEST_TMPDIR/src"
  esbx_ok project create p --from "$BATS_TEST_TMPDIR/src"
}

# Build in session S: with the compiler inside the session when exec works,
# else the same outputs written from outside.
build_in() {
  local s=$1
  if "$ESBX" exec "$s" -- make >/dev/null 2>&1; then
    return 0
  fi
  local d
  d=$(path_of "$s")
  (cd "$d" && make >/dev/null)
}

@test "three sessions build and publish without conflict; no build output lands" {
  make_sessions p s1 s2 s3
  for s in s1 s2 s3; do build_in "$s"; done
  m1=$(path_of s1) m2=$(path_of s2) m3=$(path_of s3)
  [ -x "$m1/prog" ]
  [ -f "$m2/main.o" ]
  [ -f "$m3/util.o" ]
  echo 'int extra1;' >"$m1/extra1.c"
  echo 'int extra2;' >"$m2/extra2.c"
  echo 'int extra3;' >"$m3/extra3.c"
  esbx_ok diff s1
  assert_line "A /extra1.c"
  refute_output --partial ".o"
  refute_output --partial "/prog"
  for s in s1 s2 s3; do esbx_ok publish "$s"; done
  make_session p fresh
  for f in extra1.c extra2.c extra3.c; do assert_file_exists "$m/$f"; done
  for f in main.o util.o prog; do assert_file_not_exists "$m/$f"; done
  # The builds stay in their sessions.
  assert_file_exists "$m1/prog"
}

@test "negation, nested files, directory and anchored patterns, .esbxignore" {
  make_session p s1
  mkdir -p "$m/build/deep" "$m/sub/build" "$m/sub"
  touch "$m/a.o" "$m/keep.o" "$m/build/deep/x" "$m/sub/build/y" "$m/top-only" \
    "$m/sub/top-only" "$m/sub/debug.log" "$m/sub/important.log" "$m/x.tmp" "$m/sub/x.tmp" \
    "$m/notes.txt" "$m/sub/prog"
  esbx_ok diff s1
  assert_line "A /keep.o"
  assert_line "A /sub/top-only"
  assert_line "A /sub/important.log"
  assert_line "A /notes.txt"
  assert_line "A /sub/prog"
  refute_line "A /a.o"
  refute_line --partial "/build"
  refute_line "A /top-only"
  refute_line "A /sub/debug.log"
  refute_line --partial ".tmp"
  esbx_ok diff --ignored s1
  assert_line "A /a.o"
  assert_line "A /build"
  assert_line "A /build/deep/x"
  assert_line "A /sub/build"
  assert_line "A /sub/build/y"
  assert_line "A /top-only"
  assert_line "A /sub/debug.log"
  assert_line "A /x.tmp"
  assert_line "A /sub/x.tmp"
  refute_line "A /keep.o"
  refute_line "A /notes.txt"
  esbx_ok publish s1
  make_session p fresh
  assert_file_exists "$m/keep.o"
  assert_file_not_exists "$m/a.o"
  assert_file_not_exists "$m/build"
  assert_file_not_exists "$m/x.tmp"
  # An edit of the rules is a change like any other, and applies at once.
  make_session p s2
  printf '*.log\n' >"$m/sub/.gitignore"
  touch "$m/sub/important.log" "$m/sub/other.log"
  esbx_ok diff s2
  assert_line "M /sub/.gitignore"
  refute_line --partial ".log"
}

@test "diff --ignored agrees with git check-ignore on a tricky tree" {
  make_session p s1
  printf 'doc/**/*.pdf\n**/gen\nx/*/y\n[a-c]r\n!keep/\nkeep/\n\\#hash\ntrail\\ \nout/\n!out/k\n' \
    >"$m/sub/.gitignore"
  mkdir -p "$m/sub/lib"
  printf '!*.o\n' >"$m/sub/lib/.gitignore"
  for p in a.o sub/lib/b.o sub/doc/x.pdf sub/doc/p/q/y.pdf sub/doc/z.txt sub/gen/f sub/t/gen \
    sub/x/k/y sub/x/k/l/y sub/ar sub/dr sub/keep/f '#hash' 'sub/#hash' 'sub/trail ' sub/trail \
    sub/out/k sub/out/j top-only sub/top-only q.tmp sub/n.log sub/important.log plain.c; do
    mkdir -p "$m/$(dirname "$p")"
    echo x >"$m/$p"
  done
  esbx_ok --json diff s1
  changed=$(python3 -c 'import json,sys; print("\n".join(c["path"][1:] for c in json.load(sys.stdin)))' <<<"$output")
  esbx_ok --json diff --ignored s1
  ignored=$(python3 -c 'import json,sys; print("\n".join(c["path"][1:] for c in json.load(sys.stdin)))' <<<"$output")
  # git on a copy of the merged view, .esbxignore as its info/exclude.
  g=$BATS_TEST_TMPDIR/git
  cp -a "$m" "$g"
  git -C "$g" init -q
  cp "$g/.esbxignore" "$g/.git/info/exclude"
  want=$(printf '%s\n%s\n' "$changed" "$ignored" | grep -v '^$' | sort |
    HOME=/nonexistent GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null \
      git -C "$g" check-ignore --no-index -v -n --stdin |
    awk -F'\t' '$1 != "::" && $1 !~ /:!/ {print $2}' | sort)
  got=$(printf '%s\n' "$ignored" | grep -v '^$' | sort)
  [ -n "$want" ]
  echo "git: $want" >&2
  echo "esbx: $got" >&2
  [ "$want" = "$got" ]
  # Both sides are non-trivial: some paths are published, some not.
  [[ $changed == *plain.c* ]]
  [[ $got == *a.o* ]]
}

@test "ignored paths take no part in the conflict check; --include-ignored publishes them" {
  make_sessions p s1 s2 s3
  m1=$(path_of s1) m2=$(path_of s2) m3=$(path_of s3)
  echo one >"$m1/out.o"
  echo two >"$m2/out.o"
  echo three >"$m3/out.o"
  echo a >"$m1/a.c"
  esbx_ok diff --include-ignored s1
  assert_line "A /out.o"
  esbx_ok publish --include-ignored s1
  # s2's out.o differs from what s1 published, but it is ignored.
  esbx_ok publish s2
  make_session p fresh
  assert_file_exists "$m/a.c"
  run cat "$m/out.o"
  assert_output "one"
  # With the rules off, it is a change like any other.
  esbx_fails 3 publish --include-ignored s3
  assert_output --partial "/out.o"
}

@test "a source edited earlier than another session's published build is rebuilt" {
  make_sessions p a b
  ma=$(path_of a) mb=$(path_of b)
  # b edits main.c, and the edit looks older than a's build.
  printf '#include "util.h"\nint main (void) { return util () + 0; }\n' >"$mb/main.c"
  touch -d '-10 minutes' "$mb/main.c"
  build_in a
  esbx_ok publish --include-ignored a
  before=$(date +%s)
  esbx_ok publish b
  make_session p c
  [ "$(stat -c %Y "$m/main.c")" -ge "$before" ]
  run "$ESBX" exec c -- make
  if [ "$status" -ne 0 ]; then
    run make -C "$m"
  fi
  assert_success
  assert_output --partial "-o main.o main.c"
  refute_output --partial "-o util.o"
}

@test "diff --ignored and --include-ignored exclude each other; --patch takes neither" {
  make_session p s1
  esbx_fails 2 diff --ignored --include-ignored s1
  esbx_fails 2 diff --patch --ignored s1
}
