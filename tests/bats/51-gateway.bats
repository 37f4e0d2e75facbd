#!/usr/bin/env bats
# The gateway: authentication, scopes, limits, audit, bad requests, file
# operations, metrics.

load ./gateway_helpers.bash

setup() {
  setup_gateway
}

teardown() {
  teardown_gateway
}

@test "gateway: no, malformed or unknown token gets 401, changes nothing, is audited" {
  make_demo
  before=$(store_state)
  gw POST /v1/sessions/s1/publish -
  assert_http 401
  assert_output --partial "missing Authorization"
  gw POST /v1/sessions/s1/publish "not-a-token"
  assert_http 401
  gw POST /v1/sessions/s1/publish "esbx_$(printf '0%.0s' {1..64})"
  assert_http 401
  run curl -s --unix-socket "$GW_SOCK" -H "Authorization: Basic abc" -X DELETE http://esbx/v1/sessions/s1
  assert_output --partial "Bearer"
  assert_equal "$(store_state)" "$before"
  [ "$(grep -c '"token":null,"method":"POST","path":"/v1/sessions/s1/publish","decision":"denied","status":401' "$ESBX_ROOT/audit.log")" = 3 ]
  grep -q '"method":"DELETE".*"decision":"denied","status":401' "$ESBX_ROOT/audit.log"
  [ "$(stat -c %a "$GW_SOCK")" = 660 ]
}

@test "gateway: scope matrix; refused requests get 403 and leave the store as it was" {
  make_demo
  esbx_ok session create demo --name s2
  manage=$(token manage)
  runtime=$(token runtime)
  observe=$(token observe)
  before=$(store_state)

  # observe: reads yes, changes no.
  for p in /v1/projects /v1/projects/demo/log /v1/sessions /v1/sessions/s1 /v1/sessions/s1/diff \
    /v1/sessions/s1/events "/v1/projects/demo/blame?path=/README"; do
    gw GET "$p" "$observe"
    assert_http 200
  done
  gw POST /v1/sessions/s1/publish "$observe" '{}'
  assert_http 403
  assert_output --partial "lacks the \`manage\` scope"
  gw POST /v1/sessions/s1/exec "$observe" '{"argv":["touch","/workspace/x"]}'
  assert_http 403
  gw PUT "/v1/sessions/s1/files?path=x" "$observe" 'data'
  assert_http 403
  gw DELETE /v1/sessions/s2 "$observe"
  assert_http 403
  gw POST /v1/sessions "$observe" '{"project":"demo"}'
  assert_http 403

  # runtime: inside sessions only.
  gw GET /v1/sessions "$runtime"
  assert_http 403
  gw POST /v1/sessions/s1/publish "$runtime" '{}'
  assert_http 403
  gw POST /v1/projects "$runtime" '{"name":"other"}'
  assert_http 403
  gw GET "/v1/sessions/s1/files?path=README" "$runtime"
  assert_http 200
  assert_equal "$output" "changed"$'\n'

  # manage: no exec, no files.
  gw POST /v1/sessions/s1/exec "$manage" '{"argv":["touch","/workspace/x"]}'
  assert_http 403
  gw GET "/v1/sessions/s1/files?path=README" "$manage"
  assert_http 403
  gw GET /v1/sessions/s1/diff "$manage"
  assert_http 403

  assert_equal "$(store_state)" "$before"
  [ "$(grep -c '"decision":"denied","status":403' "$ESBX_ROOT/audit.log")" = 11 ]

  # And the allowed changes work.
  gw POST /v1/sessions/s1/exec "$runtime" '{"argv":["sh","-c","echo hi; echo err >&2; exit 5"]}'
  assert_http 200
  assert_equal "$(json_field status <<<"$output")" 5
  assert_equal "$(json_field stdout <<<"$output")" hi
  assert_equal "$(json_field stderr <<<"$output")" err
  gw POST /v1/sessions/s1/publish "$manage" '{"message":"via gateway"}'
  assert_http 200
  layer=$(json_field layer <<<"$output")
  run "$ESBX" project log demo
  assert_output --partial "$layer"
  assert_output --partial "via gateway"
  grep -q '"method":"POST","path":"/v1/sessions/s1/publish","decision":"allowed","status":200' "$ESBX_ROOT/audit.log"
}

@test "gateway: project and session limits" {
  make_demo
  esbx_ok project create other
  esbx_ok session create other --name o1
  esbx_ok session create demo --name s2
  proj=$(token manage,observe,runtime --project demo)
  sess=$(token manage,observe,runtime --session s1)
  before=$(store_state)

  gw GET /v1/sessions "$proj"
  assert_equal "$(json_field 0.name <<<"$output") $(json_field 1.name <<<"$output")" "s1 s2"
  refute_output --partial o1
  gw GET /v1/projects "$proj"
  refute_output --partial other
  gw GET /v1/sessions/o1/diff "$proj"
  assert_http 403
  assert_output --partial "limited to project \`demo\`"
  gw DELETE /v1/sessions/o1 "$proj"
  assert_http 403
  gw POST /v1/sessions "$proj" '{"project":"other"}'
  assert_http 403
  gw GET /v1/projects/other/log "$proj"
  assert_http 403
  gw POST /v1/gc "$proj"
  assert_http 403

  gw GET /v1/sessions "$sess"
  assert_equal "$(json_field 0.name <<<"$output")" s1
  refute_output --partial s2
  gw POST /v1/sessions/s2/publish "$sess" '{}'
  assert_http 403
  assert_output --partial "limited to session \`s1\`"
  gw POST /v1/sessions "$sess" '{"project":"demo"}'
  assert_http 403
  gw DELETE /v1/projects/demo "$sess"
  assert_http 403
  gw GET /v1/sessions/nosuch "$sess"
  assert_http 403
  assert_equal "$(store_state)" "$before"

  gw GET /v1/sessions/s1/diff "$sess"
  assert_http 200
  assert_output --partial README
}

@test "gateway: bad JSON, unknown fields, wrong types, oversized bodies get 400/413" {
  make_demo
  t=$(token manage,runtime,observe)
  before=$(store_state)
  gw POST /v1/sessions "$t" '{"project": '
  assert_http 400
  assert_output --partial "invalid JSON"
  gw POST /v1/sessions "$t" '["demo"]'
  assert_http 400
  assert_output --partial "JSON object"
  gw POST /v1/sessions "$t" '{"project":"demo","colour":"blue"}'
  assert_http 400
  assert_output --partial "unknown field \`colour\`"
  gw POST /v1/sessions "$t" '{"project":["demo"]}'
  assert_http 400
  assert_output --partial "must be a string"
  gw POST /v1/sessions/s1/exec "$t" '{"argv":"ls"}'
  assert_http 400
  gw POST /v1/sessions/s1/exec "$t" '{"argv":[1,2]}'
  assert_http 400
  gw POST /v1/sessions "$t" '{"project":"demo","name":"../x"}'
  assert_http 400
  gw GET '/v1/sessions/a%20b' "$t"
  assert_http 400
  gw GET /v1/nothing "$t"
  assert_http 404
  gw PATCH /v1/sessions "$t"
  assert_http 405
  head -c $((5 * 1024 * 1024)) /dev/zero >"$BATS_TEST_TMPDIR/big"
  gw PUT "/v1/sessions/s1/files?path=big" "$t" "@$BATS_TEST_TMPDIR/big"
  assert_http 413
  assert_equal "$(store_state)" "$before"
  [ ! -e "$ESBX_ROOT/sessions/s1/upper/big" ]
}

@test "gateway: file read, write and list stay beneath the session" {
  make_demo
  t=$(token runtime)
  ln -s /etc/shadow "$ESBX_ROOT/sessions/s1/merged/shadow"
  ln -s / "$ESBX_ROOT/sessions/s1/merged/rootlink"

  gw GET "/v1/sessions/s1/files?path=shadow" "$t"
  assert_http 400
  refute_output --regexp '(^|\n)root:'
  gw GET "/v1/sessions/s1/files?path=rootlink/etc/shadow" "$t"
  assert_http 400
  refute_output --regexp '(^|\n)root:'
  gw GET "/v1/sessions/s1/files?path=../../../../etc/shadow" "$t"
  assert_http 400
  gw GET "/v1/sessions/s1/files?path=/etc/shadow" "$t"
  assert_http 404
  gw PUT "/v1/sessions/s1/files?path=shadow" "$t" 'owned'
  assert_http 400
  assert_output --partial symlink
  gw PUT "/v1/sessions/s1/files?path=rootlink/tmp/esbx-escape" "$t" 'owned'
  assert_http 400
  [ ! -e /tmp/esbx-escape ]
  grep -q '^root:' /etc/shadow

  gw PUT "/v1/sessions/s1/files?path=/src/new.txt&mode=0600" "$t" 'new content'
  assert_http 200
  [ "$(cat "$ESBX_ROOT/sessions/s1/merged/src/new.txt")" = "new content" ]
  [ "$(stat -c %a "$ESBX_ROOT/sessions/s1/merged/src/new.txt")" = 600 ]
  gw GET "/v1/sessions/s1/files?path=src/new.txt" "$t"
  assert_output "new content"
  gw GET "/v1/sessions/s1/files?path=/src" "$t"
  assert_http 200
  assert_output --partial '"name":"new.txt","type":"file","size":11'
  run "$ESBX" diff s1
  assert_output --partial "A /src/new.txt"
}

@test "gateway: event stream and exec events" {
  make_demo
  t=$(token runtime,observe)
  gw POST /v1/sessions/s1/exec "$t" '{"argv":["true"]}'
  assert_http 200
  gw GET "/v1/sessions/s1/events" "$t"
  assert_http 200
  assert_output --partial '"type":"exec"'
  off=$(json_field offset <<<"$output")
  gw GET "/v1/sessions/s1/events?offset=$off" "$t"
  assert_equal "$(json_field events <<<"$output")" "[]"
  # Follow: the stream ends when the session is discarded.
  curl -sN --max-time 20 --unix-socket "$GW_SOCK" -H "Authorization: Bearer $t" \
    "http://esbx/v1/sessions/s1/events?follow=1&offset=$off" >"$BATS_TEST_TMPDIR/stream" &
  cpid=$!
  sleep 0.5
  gw POST /v1/sessions/s1/exec "$t" '{"argv":["echo","streamed"]}'
  sleep 0.5
  esbx_ok discard s1
  wait "$cpid"
  grep -q '"streamed"' "$BATS_TEST_TMPDIR/stream"
}

@test "metrics: /healthz and /metrics on loopback only, counting requests and publishes" {
  make_demo
  esbx_ok session create demo --name s2
  echo other >"$ESBX_ROOT/sessions/s2/merged/README"
  t=$(token manage,observe)
  run curl -s "http://127.0.0.1:$METRICS_PORT/healthz"
  assert_output ok
  run ss -ltnH "sport = :$METRICS_PORT"
  assert_output --partial "127.0.0.1:$METRICS_PORT"
  refute_output --partial "0.0.0.0:$METRICS_PORT"

  gw GET /v1/projects -
  gw POST /v1/sessions/s1/publish "$t" '{}'
  assert_http 200
  gw POST /v1/sessions/s2/publish "$t" '{}'
  assert_http 409
  assert_equal "$(json_field code <<<"$output")" 3
  assert_equal "$(json_field conflicts.0.path <<<"$output")" /README

  run curl -s "http://127.0.0.1:$METRICS_PORT/metrics"
  assert_success
  m=$output
  grep -qx 'esbx_publishes_total{result="ok"} 1' <<<"$m"
  grep -qx 'esbx_publishes_total{result="conflict"} 1' <<<"$m"
  grep -qx 'esbx_gateway_auth_failures_total 1' <<<"$m"
  grep -qx 'esbx_project_layers{project="demo"} 2' <<<"$m"
  grep -qx 'esbx_sessions{state="mounted"} 2' <<<"$m"
  grep -qx 'esbx_gateway_requests_total{endpoint="session_publish",method="POST",code="409"} 1' <<<"$m"
  grep -q '^esbx_gateway_request_duration_seconds_bucket{endpoint="session_publish",le="+Inf"} 2$' <<<"$m"
  grep -q '^esbx_gateway_request_duration_seconds_count{endpoint="session_publish"} 2$' <<<"$m"
  # Strict exposition check: every line a comment or `name{labels} number`.
  if command -v promtool >/dev/null; then
    promtool check metrics <<<"$m"
  else
    bad=$(grep -Ev '^(# (HELP|TYPE) [a-z_]+ .+|[a-z_]+(\{([a-z_]+="[^"]*",?)+\})? -?[0-9.e+]+)$' <<<"$m" || true)
    [ -z "$bad" ] || { echo "bad lines: $bad"; return 1; }
  fi
}

@test "esbxd refuses non-loopback metrics and gateway TCP addresses" {
  for a in 0.0.0.0:9595 10.1.2.3:9595 '[::]:9595' example.com:9595; do
    run "$ESBXD" --root "$ESBX_ROOT" --plugin-socket "$GW_DIR/p2.sock" --gateway-socket none --metrics "$a"
    assert_equal "$status" 2
    assert_equal "${#lines[@]}" 1
    assert_output --partial "non-loopback"
  done
  run "$ESBXD" --root "$ESBX_ROOT" --plugin-socket "$GW_DIR/p2.sock" --gateway-tcp 0.0.0.0:9596
  assert_equal "$status" 2
  assert_output --partial "--gateway-tcp"
  run "$ESBXD" --root "$ESBX_ROOT" --plugin-socket "$GW_DIR/p2.sock" --metrics 127.0.0.1
  assert_equal "$status" 2
}

@test "gateway: loopback TCP listener answers like the socket" {
  teardown_gateway
  port=$((20000 + RANDOM % 20000))
  setup_gateway --gateway-tcp "127.0.0.1:$port"
  esbx_ok project create demo
  t=$(token observe)
  run curl -s -H "Authorization: Bearer $t" "http://127.0.0.1:$port/v1/projects"
  assert_output --partial '"name":"demo"'
  ESBX_TOKEN=$t run "$ESBX" --host "tcp://127.0.0.1:$port" project list
  assert_success
  assert_output --partial demo
}
