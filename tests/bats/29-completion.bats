#!/usr/bin/env bats
# The bash completion (contrib/completion/esbx.bash): verbs, options per
# verb, and live names read from the store.

load helpers

setup() {
  setup_project
  make_sessions p pubtest s1
  # shellcheck source=../../contrib/completion/esbx.bash
  source "$ESBX_SRC/contrib/completion/esbx.bash"
}

# `complete_words WORD...`: COMPREPLY for the last word, as bash would ask.
complete_words() {
  COMP_WORDS=("$ESBX" "$@")
  COMP_CWORD=$#
  COMP_LINE="esbx $*"
  COMP_POINT=${#COMP_LINE}
  COMPREPLY=()
  _esbx
  output=$(printf '%s\n' "${COMPREPLY[@]}" | sort)
  mapfile -t lines <<<"$output"
}

@test "esbx pub<TAB> completes the verb" {
  complete_words pub
  assert_output "publish"
  complete_words ''
  assert_line "project"
  assert_line "export"
  assert_line "help"
}

@test "esbx publish <TAB> completes session names; options per verb" {
  complete_words publish ''
  assert_output $'pubtest\ns1'
  complete_words publish pu
  assert_output "pubtest"
  complete_words publish --
  assert_line "--message"
  assert_line "--discard"
  assert_line "--include-ignored"
  refute_line "--patch"
  refute_line "--root"
  complete_words export s1 --format ''
  assert_output $'oci-layer\ntar'
  complete_words session create ''
  assert_output "p"
}

@test "esbx export web@<TAB> completes the layers of the project" {
  esbx_ok project create web --from "$BATS_TEST_TMPDIR/src"
  make_session web w1
  echo x >"$m/new"
  esbx_ok publish w1 -m second
  mapfile -t ids < <("$ESBX" project log web | awk 'NR > 1 {print $1}')
  [ "${#ids[@]}" -eq 2 ]
  complete_words export web@
  assert_output "$(printf 'web@%s\n' "${ids[@]}" | sort)"
  complete_words export "web@${ids[0]:0:4}"
  assert_output "web@${ids[0]}"
  complete_words export ''
  assert_line "web"
  assert_line "w1"
}

@test "tokens, trash entries and --root before the verb" {
  "$ESBX" token create --scope observe >/dev/null 2>&1
  id=$("$ESBX" token list | awk 'NR == 2 {print $1}')
  complete_words token revoke ''
  assert_output "$id"
  # Names come from the store --root names, not from $ESBX_ROOT.
  other=$(mktemp -d /tmp/esbx-test.XXXXXX)
  "$ESBX" --root "$other" project create elsewhere >/dev/null
  complete_words --root "$other" project rm ''
  assert_output "elsewhere"
  rm -rf "$other"
}

@test "cmake --install puts the completion and the manual pages in place" {
  dest=$BATS_TEST_TMPDIR/inst
  cmake --install "$ESBX_BUILD" --prefix "$dest" >/dev/null
  assert_file_exists "$dest/share/bash-completion/completions/esbx"
  assert_file_exists "$dest/share/man/man1/esbx.1"
  assert_file_exists "$dest/share/man/man8/esbxd.8"
  assert_file_exists "$dest/share/man/man8/esbx-runtime.8"
}
