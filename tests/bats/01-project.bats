#!/usr/bin/env bats
# Projects: create from nothing and from a directory, list, log, rm.

load helpers

@test "project create without --from makes an empty layer 0" {
  esbx_ok project create empty
  assert_output "empty"
  esbx_ok project log empty
  assert_line --partial "empty project"
  esbx_ok --json project list
  assert_output --partial '"name": "empty"'
  assert_output --partial '"layers": 1'
}

@test "project create --from DIR records every file with its hash" {
  make_tree "$BATS_TEST_TMPDIR/src"
  esbx_ok project create p --from "$BATS_TEST_TMPDIR/src"
  esbx_ok --json project log p
  assert_output --partial '"changes": 6'
  sha=$(sha256sum "$BATS_TEST_TMPDIR/src/README" | cut -d' ' -f1)
  grep -q "$sha" "$ESBX_ROOT"/projects/p/layers/*/record.json
  esbx_ok fsck p
}

@test "project names outside the rule are refused and nothing is created" {
  for bad in "../x" ".hidden" "a/b" "" "$(printf 'x%.0s' {1..129})" "sp ace" "x:y" "é"; do
    esbx_fails 2 project create "$bad"
    assert_output --partial "must match"
  done
  esbx_fails 2 project create -dash
  run ls "$ESBX_ROOT/projects"
  assert_output ""
}

@test "creating a project twice fails and keeps the first" {
  esbx_ok project create p
  esbx_fails 1 project create p
  assert_output --partial "already exists"
  esbx_ok project log p
}

@test "project create from a missing source fails cleanly" {
  esbx_fails 1 project create p --from /nonexistent/src
  assert_output --partial "/nonexistent/src"
  run ls "$ESBX_ROOT/projects"
  assert_output ""
}

@test "project rm refuses while sessions exist, then removes" {
  esbx_ok project create p
  esbx_ok session create p --name s1
  esbx_fails 1 project rm p
  assert_output --partial "s1"
  esbx_ok discard s1
  esbx_ok project rm p
  esbx_fails 1 project log p
  assert_output --partial "does not exist"
}

@test "unknown commands and options are usage errors" {
  esbx_fails 2 frobnicate
  esbx_fails 2 project create p --bogus
  esbx_fails 2 session create
  esbx_fails 2 --nope project list
}

@test "listings and the log have column headers; --json has none, and an empty list is []" {
  esbx_ok project list
  assert_output "$(printf 'NAME\tLAYERS\tHEAD')"
  esbx_ok session list
  assert_output "$(printf 'NAME\tPROJECT\tBASE\tSTATE\tAGE\tIDLE\tEXPIRES')"
  esbx_ok --json project list
  assert_output "[]"
  esbx_ok --json session list
  assert_output "[]"
  esbx_ok project create p
  head=$(cat "$ESBX_ROOT/projects/p/stack")
  esbx_ok project list
  assert_output "$(printf 'NAME\tLAYERS\tHEAD\np\t1\t%s' "$head")"
  esbx_ok project log p
  assert_line --index 0 --regexp '^LAYER +# CREATED +SESSION +CHANGES +MESSAGE$'
  assert_line --index 1 --regexp "^$head +0 "
  esbx_ok session create p --name s1
  esbx_ok session list
  assert_line --index 0 "$(printf 'NAME\tPROJECT\tBASE\tSTATE\tAGE\tIDLE\tEXPIRES')"
  assert_line --index 1 --regexp "^s1	p	$head	mounted	[0-9]+s	[0-9]+s	-$"
  esbx_ok --json session list
  echo "$output" | jq -e 'length == 1'
  esbx_ok --json project log p
  echo "$output" | jq -e 'length == 1'
  esbx_ok --json diff s1
  assert_output "[]"
}

@test "VERB --help, esbx help VERB and the manual pages list every long option the code parses" {
  local f verb opt opts man esbxd_man section
  # The pages as text: roff's escaped dashes made plain.
  man=$(sed 's/\\-/-/g' "$ESBX_BUILD/man/esbx.1")
  esbxd_man=$(sed 's/\\-/-/g' "$ESBX_BUILD/man/esbxd.8")
  for f in "$ESBX_SRC"/cli/cmd_*.c; do
    verb=$(basename "$f" .c)
    verb=${verb#cmd_}
    esbx_ok "$verb" --help
    assert_line --index 0 --partial "usage: esbx $verb"
    # A verb's sub-verbs may live beside it in VERB_*.c (project_gate.c).
    opts=$(cat "$f" "$ESBX_SRC/cli/${verb}"_*.c 2>/dev/null |
      grep -oE '\{ "[a-z][a-z-]*", (no|required|optional)_argument' | cut -d'"' -f2 | sort -u)
    # The shared --progress/--quiet entries of cli.h.
    if grep -q CLI_PROGRESS_OPTIONS "$f"; then opts="$opts progress quiet"; fi
    [ -n "$opts" ] || continue
    for opt in $opts; do
      if ! grep -qE -- "--$opt([^a-z-]|$)" <<<"$output"; then
        echo "esbx $verb --help does not list --$opt" >&2
        return 1
      fi
      # In the verb's section of esbx(1), or (--json) its global options.
      section="^\\.SS $verb\$"
      [ "$opt" != json ] || section="^\\.SH GLOBAL OPTIONS"
      if ! sed -n "/$section/,/^\\.S[SH] /p" <<<"$man" | grep -qE -- "--$opt([^a-z-]|$)"; then
        echo "esbx(1) does not list --$opt under $verb" >&2
        return 1
      fi
    done
    run "$ESBX" help "$verb"
    [ "$status" -eq 0 ] && assert_line --index 0 --partial "usage: esbx $verb"
  done
  for opt in $(grep -oE '\{ "[a-z][a-z-]*", (no|required|optional)_argument' "$ESBX_SRC/volume-plugin/main.c" | cut -d'"' -f2); do
    if ! grep -qE -- "--$opt([^a-z-]|$)" <<<"$esbxd_man"; then
      echo "esbxd(8) does not list --$opt" >&2
      return 1
    fi
  done
  grep -q '^\.SH NAME' "$ESBX_BUILD/man/esbx-runtime.8"
  esbx_ok -h
  assert_output --partial "esbx publish S [-m|--message MESSAGE] [--discard]"
  esbx_ok help
  assert_output --partial "esbx publish S [-m|--message MESSAGE] [--discard]"
  esbx_fails 2 help nosuchverb
  # The command's own --help is left to it (here: there is no session s1).
  esbx_fails 1 exec s1 ls --help
  assert_output --partial "s1"
}
