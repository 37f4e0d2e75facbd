#!/usr/bin/env bats
# The trash: discarding unpublished work keeps it for a while, restorable.

load helpers
bats_require_minimum_version 1.5.0

setup() { setup_session; }

# The one trash entry of the store.
only_entry() {
  run "$ESBX" --json trash list
  assert_success
  assert_equal "$(jq length <<<"$output")" 1
  entry=$(jq -r '.[0].entry' <<<"$output")
}

no_entries() {
  run "$ESBX" --json trash list
  assert_success
  assert_equal "$(jq length <<<"$output")" 0
}

@test "discard of unpublished changes warns with their count and keeps them in the trash" {
  echo new >"$m/new"
  echo changed >"$m/README"
  run --separate-stderr "$ESBX" discard s1
  assert_success
  assert_output ""
  [ "$(wc -l <<<"$stderr")" = 1 ]
  [[ "$stderr" == *"warning: discard \`s1\`: 2 unpublished changes kept in the trash as \`s1."* ]]
  esbx_fails 1 session inspect s1
  only_entry
  run "$ESBX" --json trash list
  assert_equal "$(jq -r '.[0].session' <<<"$output")" s1
  assert_equal "$(jq -r '.[0].project' <<<"$output")" p
  assert_equal "$(jq -r '.[0].changes' <<<"$output")" 2
  [ "$(jq -r '.[0].size' <<<"$output")" -gt 0 ]
  [ "$(jq -r '.[0].expires' <<<"$output")" \> "$(jq -r '.[0].deleted' <<<"$output")" ]
  esbx_ok trash list
  assert_line --regexp "^$entry	s1	p	[0-9a-f]{12}	2	[0-9]+	"
  esbx_ok fsck
  esbx_ok gc
  assert_output ""

  esbx_ok trash restore "$entry"
  assert_output s1
  [ "$(cat "$(path_of s1)/new")" = new ]
  [ "$(cat "$(path_of s1)/README")" = changed ]
  esbx_ok diff s1
  assert_line "A /new"
  assert_line "M /README"
  no_entries
  esbx_ok publish s1 -m restored
}

@test "restore under another name; a taken name or a gone project is refused in one line" {
  echo new >"$m/new"
  esbx_ok discard s1
  only_entry
  esbx_ok session create p --name s1
  esbx_fails 1 trash restore "$entry"
  assert_output "esbx: restore \`$entry\`: session \`s1\` already exists (restore it with --name NEW)"
  esbx_fails 1 trash restore nosuch.20240101T000000Z
  assert_output "esbx: trash entry \`nosuch.20240101T000000Z\` does not exist"
  esbx_ok trash restore "$entry" --name s2
  assert_output s2
  [ "$(cat "$(path_of s2)/new")" = new ]

  echo again >"$(path_of s2)/again"
  esbx_ok discard s2
  only_entry
  esbx_ok discard s1
  esbx_ok project rm p
  esbx_fails 1 trash restore "$entry"
  assert_output "esbx: restore \`$entry\`: project \`p\` no longer exists"
  only_entry
}

@test "discard --force, a session without changes and publish --discard leave no trash" {
  echo new >"$m/new"
  run --separate-stderr "$ESBX" discard --force s1
  assert_success
  [[ "$stderr" == *"warning: discard \`s1\`: 1 unpublished change deleted (--force)"* ]]
  no_entries

  make_session p s2
  run --separate-stderr "$ESBX" discard s2
  assert_success
  assert_equal "$stderr" ""
  make_session p s3
  echo x >"$m/x"
  run --separate-stderr "$ESBX" publish s3 --discard
  assert_success
  assert_equal "$stderr" ""
  no_entries
  [ ! -e "$ESBX_ROOT/trash" ] || [ -z "$(ls -A "$ESBX_ROOT/trash")" ]
}

@test "expired entries are purged by gc; trash purge removes one or all" {
  echo new >"$m/new"
  ESBX_TRASH_TTL=1s esbx_ok discard s1
  make_session p s2
  echo two >"$m/two"
  esbx_ok discard s2
  run "$ESBX" --json trash list
  assert_equal "$(jq length <<<"$output")" 2
  sleep 2
  esbx_ok gc
  assert_line --regexp '^purged trash entry `s1\.[0-9TZ]+` \(expired '
  only_entry
  [[ "$entry" == s2.* ]]
  esbx_fails 2 trash purge
  esbx_ok trash purge "$entry"
  no_entries

  make_session p s3
  echo x >"$m/x"
  esbx_ok trash ttl
  assert_output 1d
  esbx_ok trash ttl 7d
  esbx_ok trash ttl
  assert_output 7d
  esbx_ok discard s3
  run "$ESBX" --json trash list
  exp=$(jq -r '.[0].expires' <<<"$output")
  del=$(jq -r '.[0].deleted' <<<"$output")
  [ $(($(date -d "$exp" +%s) - $(date -d "$del" +%s))) = 604800 ]
  make_session p s4
  echo y >"$m/y"
  esbx_ok discard s4
  esbx_ok trash purge --all
  no_entries
}

@test "a TTL of 0 turns the trash off" {
  echo new >"$m/new"
  ESBX_TRASH_TTL=0 run --separate-stderr "$ESBX" discard s1
  assert_success
  [[ "$stderr" == *"1 unpublished change deleted (the trash is off)"* ]]
  no_entries
  make_session p s2
  echo x >"$m/x"
  ESBX_TRASH_TTL=soon run "$ESBX" discard s2
  assert_failure 1
  assert_output "esbx: ESBX_TRASH_TTL: invalid duration \`soon\`: expected e.g. 30s, 15m, 2h, 7d or 0"
  [ "$(cat "$(path_of s2)/x")" = x ]
  esbx_fails 2 trash ttl never
  esbx_ok discard --force s2
}
