#!/usr/bin/env bats
# Review: a project whose gate asks for approvals keeps each request
# until that many distinct callers with the right to publish it approve;
# who approved and when go into the layer record and blame.  From the CLI
# and from the gateway; an observe token cannot approve, a token cannot
# approve what it filed, a reviewer can reject.

load gateway_helpers
bats_require_minimum_version 1.5.0

setup() {
  setup_gateway
  make_tree "$BATS_TEST_TMPDIR/src"
  esbx_ok project create p --from "$BATS_TEST_TMPDIR/src"
}

request_of() { json_field request <<<"$1"; }
state_of() { "$ESBX" --json queue show "$1" | json_field state; }

wait_state() {
  local i=0
  until [ "$(state_of "$1")" = "$2" ]; do
    i=$((i + 1))
    [ $i -lt 300 ] || { echo "request $1: $(state_of "$1"), wanted $2" >&2; return 1; }
    sleep 0.1
  done
}

@test "review from the CLI: approve lands it with the approver in the record and in blame; reject keeps the session's work" {
  esbx_ok project gate p --mode review --approvals 1
  make_sessions p a b
  echo a >"$(path_of a)/a.txt"
  echo b >"$(path_of b)/b.txt"
  run -5 "$ESBX" --json publish a -m "add a"
  local ra rb
  ra=$(request_of "$output")
  assert_equal "$(state_of "$ra")" review
  run -5 "$ESBX" --json publish b
  rb=$(request_of "$output")
  run -0 "$ESBX" review list --project p
  assert_output --partial "$ra"
  assert_output --partial "$rb"
  run -0 "$ESBX" review show "$ra"
  assert_output --partial "A /a.txt"
  esbx_ok review approve "$ra" -m "looks right"
  esbx_fails 1 review approve "$ra"
  wait_state "$ra" landed
  local layer
  layer=$("$ESBX" --json queue show "$ra" | json_field layer)
  run -0 cat "$ESBX_ROOT/projects/p/layers/$layer/record.json"
  assert_equal "$(json_field gate.approvals.0.by <<<"$output")" "uid:$(id -u)"
  [ -n "$(json_field gate.approvals.0.at <<<"$output")" ]
  run -0 "$ESBX" blame p /a.txt
  assert_output --partial "approved: uid:$(id -u)"
  run -0 "$ESBX" --json blame p /a.txt
  assert_equal "$(json_field gate.request <<<"$output")" "$ra"
  esbx_ok review reject "$rb" -m "not this way"
  assert_equal "$(state_of "$rb")" rejected
  run -0 "$ESBX" review show "$rb"
  assert_output --partial "not this way"
  run -0 "$ESBX" diff b
  assert_output --partial "/b.txt"
  [ "$(layer_count)" = 2 ]
  grep -q '"action":"approve"' "$ESBX_ROOT/audit.log"
  grep -q '"action":"reject"' "$ESBX_ROOT/audit.log"
}

@test "review over the gateway: observe cannot approve, the filer cannot, another manage token can; two approvals" {
  esbx_ok project gate p --mode review --approvals 2
  local agent r1 r2 obs
  agent=$(token manage --project p)
  r1=$(token manage --project p)
  r2=$(token manage,observe)
  obs=$(token observe --project p)
  make_session p s1
  echo x >"$m/x.txt"
  gw_expect 200 POST /v1/sessions/s1/publish "$agent" '{"message": "x"}'
  local id
  id=$(json_field request <<<"$output")
  assert_equal "$(json_field state <<<"$output")" review
  gw_expect 200 GET "/v1/requests?project=p" "$obs"
  assert_output --partial "$id"
  gw_expect 200 GET "/v1/requests/$id" "$obs"
  gw_expect 403 POST "/v1/requests/$id/approve" "$obs" '{}'
  gw_expect 403 POST "/v1/requests/$id/approve" "$agent" '{}'
  assert_output --partial "filed the request"
  gw_expect 200 POST "/v1/requests/$id/approve" "$r1" '{"message": "ok"}'
  assert_equal "$(state_of "$id")" review
  gw_expect 400 POST "/v1/requests/$id/approve" "$r1" '{}'
  gw_expect 200 POST "/v1/requests/$id/approve" "$r2" '{}'
  wait_state "$id" landed
  local layer t1 t2
  layer=$("$ESBX" --json queue show "$id" | json_field layer)
  t1=$("$ESBX" --json token list | python3 -c 'import json,sys; t=json.load(sys.stdin); print(t[1]["id"])')
  run -0 cat "$ESBX_ROOT/projects/p/layers/$layer/record.json"
  assert_output --partial '"by": "token:'
  [ "$(python3 -c 'import json,sys; print(len(json.load(sys.stdin)["gate"]["approvals"]))' <<<"$output")" = 2 ]
  # A token of another project sees nothing of p's queue.
  esbx_ok project create q
  local other
  other=$(token manage,observe --project q)
  gw_expect 403 POST "/v1/requests/$id/approve" "$other" '{}'
  gw_expect 200 GET "/v1/requests" "$other"
  refute_output --partial "$id"
  : "$t1"
}

@test "reject over the gateway; the gate over the gateway needs a token without limits" {
  local admin limited obs
  admin=$(token manage,observe)
  limited=$(token manage,observe --project p)
  obs=$(token observe)
  gw_expect 403 PUT /v1/projects/p/gate "$limited" '{"mode": "auto"}'
  gw_expect 403 PUT /v1/projects/p/gate "$obs" '{"mode": "review"}'
  gw_expect 400 PUT /v1/projects/p/gate "$admin" '{"mode": "checks"}'
  gw_expect 200 PUT /v1/projects/p/gate "$admin" '{"mode": "review", "approvals": 1}'
  gw_expect 200 GET /v1/projects/p/gate "$obs"
  assert_equal "$(json_field mode <<<"$output")" review
  make_session p s1
  echo x >"$m/x.txt"
  gw_expect 200 POST /v1/sessions/s1/publish "$limited" '{}'
  local id
  id=$(json_field request <<<"$output")
  gw_expect 200 POST "/v1/requests/$id/reject" "$admin" '{"message": "no"}'
  assert_equal "$(state_of "$id")" rejected
  gw_expect 400 POST "/v1/requests/$id/approve" "$admin" '{}'
  [ "$(layer_count)" = 1 ]
}

@test "checks and review combine: approved first, then checked, then landed" {
  esbx_ok project gate p --mode checks --check 'test -f /workspace/ok' --approvals 1
  make_sessions p a b
  touch "$(path_of a)/ok"
  echo b >"$(path_of b)/b.txt"
  run -5 "$ESBX" --json publish a
  local ra rb
  ra=$(request_of "$output")
  run -5 "$ESBX" --json publish b
  rb=$(request_of "$output")
  assert_equal "$(state_of "$ra")" review
  esbx_ok review approve "$ra"
  esbx_ok review approve "$rb"
  wait_state "$ra" landed
  wait_state "$rb" landed
  [ "$(layer_count)" = 3 ]
}
