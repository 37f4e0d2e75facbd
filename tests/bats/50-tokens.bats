#!/usr/bin/env bats
# esbx token create|list|revoke, and what the gateway does with revoked and
# expired tokens.

load gateway_helpers

setup() {
  setup_store
}

@test "token create prints the secret once; the store keeps only its hash" {
  run "$ESBX" token create --scope manage,observe --project demo --ttl 1h
  assert_success
  secret=$(grep "^esbx_" <<<"$output")
  [[ "$secret" =~ ^esbx_[0-9a-f]{64}$ ]]
  assert_output --partial "shown only once"
  id=$(ls "$ESBX_ROOT/tokens" | sed 's/\.json$//')
  [[ "$id" =~ ^[0-9a-f]{12}$ ]]
  run grep -r "${secret#esbx_}" "$ESBX_ROOT"
  assert_failure
  hash=$(printf %s "$secret" | sha256sum | cut -d' ' -f1)
  grep -q "$hash" "$ESBX_ROOT/tokens/$id.json"
  [ "$(stat -c %a "$ESBX_ROOT/tokens/$id.json")" = 600 ]
  [ "$(stat -c %a "$ESBX_ROOT/tokens")" = 700 ]

  esbx_ok token list
  assert_output --partial "$id"
  assert_output --partial "manage,observe"
  refute_output --partial "$secret"
  refute_output --partial "$hash"
  esbx_ok --json token list
  assert_equal "$(json_field 0.project <<<"$output")" demo
  refute_output --partial "$hash"
}

@test "token create refuses bad scopes, names and durations" {
  esbx_fails 2 token create --scope root
  assert_output --partial "unknown scope"
  esbx_fails 2 token create
  esbx_fails 2 token create --scope observe --ttl soon
  esbx_fails 2 token create --scope observe --project "a/b"
  esbx_fails 2 token revoke nothex
  esbx_fails 1 token revoke 0123456789ab
  assert_output --partial "does not exist"
  [ -z "$(ls "$ESBX_ROOT/tokens")" ]
}

@test "revoked and expired tokens get 401" {
  setup_gateway
  t=$(token observe)
  gw_expect 200 GET /v1/projects "$t"
  id=$("$ESBX" --json token list | json_field 0.id)
  esbx_ok token revoke "$id"
  gw_expect 401 GET /v1/projects "$t"
  assert_output --partial "unknown or revoked"

  short=$(token observe --ttl 1s)
  sleep 2
  gw_expect 401 GET /v1/projects "$short"
  assert_output --partial "expired"
  [ "$(grep -c '"decision":"denied","status":401' "$ESBX_ROOT/audit.log")" = 2 ]
}
