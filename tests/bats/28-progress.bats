#!/usr/bin/env bats
# Progress of long work on stderr: drawn in place on a terminal (driven
# here through a pty by script(1)), nothing when stderr is not one,
# --progress to force it, --quiet to silence it.

load helpers
bats_require_minimum_version 1.5.0

# 20,000 files in 20 directories, with a few bytes each.
make_big_tree() {
  local d
  for d in $(seq 0 19); do
    mkdir -p "$1/d$d"
    (cd "$1/d$d" && seq 0 999 | sed 's/^/f/' | xargs touch && for f in f1 f2 f3; do echo data >"$f"; done)
  done
}

setup() {
  setup_store
  big=$BATS_TEST_TMPDIR/big
  make_big_tree "$big"
}

@test "import on a terminal redraws one progress line and ends with a summary" {
  run script -qfec "$ESBX project create big --from $big" /dev/null
  [ "$status" -eq 0 ] || { echo "$output" >&2; return 1; }
  # In place: carriage returns, no line per update.
  [[ "$output" == *$'\r'"Importing: "* ]]
  [[ "$output" == *"Importing: 20,020 files, "*", done."* ]]
  [[ "$output" == *"Scanning: 20,000 files, "*", done."* ]]
  assert_line --partial "big"
}

@test "import with stderr not a terminal shows no progress" {
  run --separate-stderr "$ESBX" project create big --from "$big"
  [ "$status" -eq 0 ]
  assert_output "big"
  [ -z "$stderr" ]
}

@test "--progress writes progress lines into a file, --quiet nothing" {
  "$ESBX" project create big --from "$big" --progress 2>"$BATS_TEST_TMPDIR/log"
  run cat "$BATS_TEST_TMPDIR/log"
  assert_line --regexp '^Importing: 20,020 files, .*, done\.$'
  assert_line --regexp '^Scanning: 20,000 files, .*, done\.$'
  refute_output --partial $'\r'
  # Global form, before the verb.
  "$ESBX" --progress project create big2 --from "$big" 2>"$BATS_TEST_TMPDIR/log2"
  grep -q '^Importing: ' "$BATS_TEST_TMPDIR/log2"

  run script -qfec "$ESBX project create big3 --from $big --quiet" /dev/null
  [ "$status" -eq 0 ]
  assert_output $'big3\r'
}

@test "an archive import shows a percentage; a failed import ends the line before its error" {
  tar -C "$big" -cf "$BATS_TEST_TMPDIR/big.tar" .
  "$ESBX" project create fromtar --from "$BATS_TEST_TMPDIR/big.tar" --progress 2>"$BATS_TEST_TMPDIR/log"
  grep -qE '^Importing: 100% \(20,021 files, .*\), .* s, done\.$' "$BATS_TEST_TMPDIR/log"

  ESBX_IMPORT_MAX_ENTRIES=100 run script -qfec "$ESBX project create small --from $big" /dev/null
  [ "$status" -eq 1 ]
  assert_line --partial "esbx: "
  assert_line --partial "more than 100 entries"
  refute_output --partial "done."
}

@test "export, diff --patch and gc report progress with --progress, none piped" {
  make_tree "$BATS_TEST_TMPDIR/src"
  esbx_ok project create p --from "$BATS_TEST_TMPDIR/src"
  make_session p s1
  echo changed >"$m/README"
  echo new >"$m/new.txt"

  "$ESBX" export p -o "$BATS_TEST_TMPDIR/p.tar" --progress 2>"$BATS_TEST_TMPDIR/log"
  grep -qE '^Exporting: [0-9]+ files, .*, done\.$' "$BATS_TEST_TMPDIR/log"
  "$ESBX" diff s1 --patch --progress >/dev/null 2>"$BATS_TEST_TMPDIR/log"
  grep -qE '^Writing patch: 100% \(2/2 changes\), .* s, done\.$' "$BATS_TEST_TMPDIR/log"
  "$ESBX" gc --progress >/dev/null 2>"$BATS_TEST_TMPDIR/log"
  grep -qE '^Collecting garbage: 100% \(1/1 projects\), .* s, done\.$' "$BATS_TEST_TMPDIR/log"

  run --separate-stderr "$ESBX" export s1 -o "$BATS_TEST_TMPDIR/s1.tar"
  [ "$status" -eq 0 ]
  [ -z "$stderr" ]
  run --separate-stderr "$ESBX" gc
  [ "$status" -eq 0 ]
  [ -z "$stderr" ]
  esbx_fails 2 gc extra
  esbx_fails 2 gc --bogus
}
