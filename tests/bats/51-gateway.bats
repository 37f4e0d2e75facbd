#!/usr/bin/env bats
# The gateway: authentication, scopes, limits, audit, bad requests, file
# operations, metrics.

load gateway_helpers

@test "gateway: no, malformed or unknown token gets 401, changes nothing, is audited" {
  make_demo
  before=$(store_state)
  gw_expect 401 POST /v1/sessions/s1/publish -
  assert_output --partial "missing Authorization"
  gw_expect 401 POST /v1/sessions/s1/publish "not-a-token"
  gw_expect 401 POST /v1/sessions/s1/publish "esbx_$(printf '0%.0s' {1..64})"
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
    gw_expect 200 GET "$p" "$observe"
  done
  gw_expect 403 POST /v1/sessions/s1/publish "$observe" '{}'
  assert_output --partial "lacks the \`manage\` scope"
  gw_expect 403 POST /v1/sessions/s1/exec "$observe" '{"argv":["touch","/workspace/x"]}'
  gw_expect 403 PUT "/v1/sessions/s1/files?path=x" "$observe" 'data'
  gw_expect 403 DELETE /v1/sessions/s2 "$observe"
  gw_expect 403 POST /v1/sessions "$observe" '{"project":"demo"}'

  # runtime: inside sessions only.
  gw_expect 403 GET /v1/sessions "$runtime"
  gw_expect 403 POST /v1/sessions/s1/publish "$runtime" '{}'
  gw_expect 403 POST /v1/projects "$runtime" '{"name":"other"}'
  gw_expect 200 GET "/v1/sessions/s1/files?path=README" "$runtime"
  assert_equal "$output" "changed"$'\n'

  # manage: no exec, no files.
  gw_expect 403 POST /v1/sessions/s1/exec "$manage" '{"argv":["touch","/workspace/x"]}'
  gw_expect 403 GET "/v1/sessions/s1/files?path=README" "$manage"
  gw_expect 403 GET /v1/sessions/s1/diff "$manage"

  assert_equal "$(store_state)" "$before"
  [ "$(grep -c '"decision":"denied","status":403' "$ESBX_ROOT/audit.log")" = 11 ]

  # And the allowed changes work.
  gw_expect 200 POST /v1/sessions/s1/exec "$runtime" '{"argv":["sh","-c","echo hi; echo err >&2; exit 5"]}'
  assert_equal "$(json_field status <<<"$output")" 5
  assert_equal "$(json_field stdout <<<"$output")" hi
  assert_equal "$(json_field stderr <<<"$output")" err
  gw_expect 200 POST /v1/sessions/s1/publish "$manage" '{"message":"via gateway"}'
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
  assert_equal "$(json_names <<<"$output")" "s1 s2"
  gw GET /v1/projects "$proj"
  assert_equal "$(json_names <<<"$output")" demo
  gw_expect 403 GET /v1/sessions/o1/diff "$proj"
  assert_output --partial "limited to project \`demo\`"
  gw_expect 403 DELETE /v1/sessions/o1 "$proj"
  gw_expect 403 POST /v1/sessions "$proj" '{"project":"other"}'
  gw_expect 403 GET /v1/projects/other/log "$proj"
  gw_expect 403 POST /v1/gc "$proj"

  gw GET /v1/sessions "$sess"
  assert_equal "$(json_names <<<"$output")" s1
  gw_expect 403 POST /v1/sessions/s2/publish "$sess" '{}'
  assert_output --partial "limited to session \`s1\`"
  gw_expect 403 POST /v1/sessions "$sess" '{"project":"demo"}'
  gw_expect 403 DELETE /v1/projects/demo "$sess"
  gw_expect 403 GET /v1/sessions/nosuch "$sess"
  assert_equal "$(store_state)" "$before"

  gw_expect 200 GET /v1/sessions/s1/diff "$sess"
  assert_output --partial README
}

@test "gateway: bad JSON, unknown fields, wrong types, oversized bodies get 400/413" {
  make_demo
  t=$(token manage,runtime,observe)
  before=$(store_state)
  gw_expect 400 POST /v1/sessions "$t" '{"project": '
  assert_output --partial "invalid JSON"
  gw_expect 400 POST /v1/sessions "$t" '["demo"]'
  assert_output --partial "JSON object"
  gw_expect 400 POST /v1/sessions "$t" '{"project":"demo","colour":"blue"}'
  assert_output --partial "unknown field \`colour\`"
  gw_expect 400 POST /v1/sessions "$t" '{"project":["demo"]}'
  assert_output --partial "must be a string"
  gw_expect 400 POST /v1/sessions/s1/exec "$t" '{"argv":"ls"}'
  gw_expect 400 POST /v1/sessions/s1/exec "$t" '{"argv":[1,2]}'
  gw_expect 400 POST /v1/sessions "$t" '{"project":"demo","name":"../x"}'
  gw_expect 400 GET '/v1/sessions/a%20b' "$t"
  gw_expect 404 GET /v1/nothing "$t"
  gw_expect 405 PATCH /v1/sessions "$t"
  head -c $((5 * 1024 * 1024)) /dev/zero >"$BATS_TEST_TMPDIR/big"
  gw_expect 413 PUT "/v1/sessions/s1/files?path=big" "$t" "@$BATS_TEST_TMPDIR/big"
  assert_equal "$(store_state)" "$before"
  [ ! -e "$ESBX_ROOT/sessions/s1/upper/big" ]
}

@test "gateway: session create with env; bad env gets 400 and makes nothing" {
  make_demo
  t=$(token manage,runtime,observe)
  gw_expect 201 POST /v1/sessions "$t" '{"project":"demo","name":"e1","env":{"GREETING":"hi there","EMPTY":""}}'
  gw_expect 200 GET /v1/sessions/e1 "$t"
  jq -e '.env == {"GREETING": "hi there", "EMPTY": ""}' <<<"$output"
  gw_expect 200 POST /v1/sessions/e1/exec "$t" '{"argv":["sh","-c","echo \"$GREETING\""]}'
  jq -e '.stdout == "hi there\n"' <<<"$output"
  before=$(store_state)
  gw_expect 400 POST /v1/sessions "$t" '{"project":"demo","name":"bad","env":{"1X":"y"}}'
  assert_output --partial '`1X`'
  gw_expect 400 POST /v1/sessions "$t" '{"project":"demo","name":"bad","env":{"NL":"a\nb"}}'
  assert_output --partial '`NL`'
  gw_expect 400 POST /v1/sessions "$t" '{"project":"demo","name":"bad","env":{"N":1}}'
  assert_output --partial "field \`env\`"
  gw_expect 400 POST /v1/sessions "$t" '{"project":"demo","name":"bad","env":["A=b"]}'
  assert_output --partial "field \`env\`"
  assert_equal "$(store_state)" "$before"
  [ ! -e "$ESBX_ROOT/sessions/bad" ]
}

@test "gateway: session create with an egress allow-list; bad entries get 400 and make nothing" {
  make_demo
  t=$(token manage,runtime,observe)
  gw_expect 201 POST /v1/sessions "$t" '{"project":"demo","name":"g1","network":"egress","allow":["a.test:8080","*.wild.test","198.19.233.0/24"]}'
  gw_expect 200 GET /v1/sessions/g1 "$t"
  jq -e '.network == "egress" and .egress.allow == ["a.test:8080", "*.wild.test", "198.19.233.0/24"]' <<<"$output"
  before=$(store_state)
  gw_expect 400 POST /v1/sessions "$t" '{"project":"demo","name":"bad","network":"egress","allow":["a.test:99999"]}'
  assert_output --partial 'a.test:99999'
  gw_expect 400 POST /v1/sessions "$t" '{"project":"demo","name":"bad","network":"egress","allow":["bad_name!"]}'
  gw_expect 400 POST /v1/sessions "$t" '{"project":"demo","name":"bad","allow":["a.test"]}'
  assert_output --partial "only a session with --network egress"
  gw_expect 400 POST /v1/sessions "$t" '{"project":"demo","name":"bad","network":"egress","allow":"a.test"}'
  assert_output --partial "field \`allow\`"
  assert_equal "$(store_state)" "$before"
  [ ! -e "$ESBX_ROOT/sessions/bad" ]
}

@test "gateway: the events of an egress session include the names it was refused" {
  make_demo
  t=$(token manage,runtime,observe)
  gw_expect 201 POST /v1/sessions "$t" '{"project":"demo","name":"g2","network":"egress"}'
  gw_expect 200 POST /v1/sessions/g2/exec "$t" '{"argv":["getent","hosts","b.test"]}'
  jq -e '.status == 2' <<<"$output"
  gw_expect 200 GET /v1/sessions/g2/events "$t"
  jq -e '.events | any(.type == "egress.refused_name" and .name == "b.test")' <<<"$output"
  gw_expect 200 DELETE '/v1/sessions/g2?force=1' "$t"
}

@test "gateway: a project's network defaults: GET with observe, PUT with manage, bad ones 400" {
  make_demo
  m=$(token manage)
  o=$(token observe)
  gw_expect 200 GET /v1/projects/demo/network "$o"
  jq -e '. == {"network": "none"}' <<<"$output"
  before=$(store_state)
  gw_expect 403 PUT /v1/projects/demo/network "$o" '{"allow":["a.test"]}'
  gw_expect 400 PUT /v1/projects/demo/network "$m" '{"network":"host","allow":["a.test"]}'
  gw_expect 400 PUT /v1/projects/demo/network "$m" '{"allow":["a.test:0"]}'
  gw_expect 400 PUT /v1/projects/demo/network "$m" '{}'
  gw_expect 404 PUT /v1/projects/nope/network "$m" '{"allow":["a.test"]}'
  assert_equal "$(store_state)" "$before"
  [ ! -e "$ESBX_ROOT/projects/demo/network.json" ]
  gw_expect 200 PUT /v1/projects/demo/network "$m" '{"allow":["a.test:8080"]}'
  jq -e '. == {"network": "egress", "allow": ["a.test:8080"]}' <<<"$output"
  gw_expect 201 POST /v1/sessions "$m" '{"project":"demo","name":"d1"}'
  gw_expect 200 GET /v1/sessions/d1 "$o"
  jq -e '.network == "egress" and .egress.allow == ["a.test:8080"]' <<<"$output"
}

@test "gateway: file read, write and list stay beneath the session" {
  make_demo
  t=$(token runtime)
  ln -s /etc/shadow "$ESBX_ROOT/sessions/s1/merged/shadow"
  ln -s / "$ESBX_ROOT/sessions/s1/merged/rootlink"

  # A symlink out of the session is the kind forbidden: 403, as a token
  # refused is (the one map of kinds to HTTP statuses).
  gw_expect 403 GET "/v1/sessions/s1/files?path=shadow" "$t"
  refute_output --regexp '(^|\n)root:'
  gw_expect 403 GET "/v1/sessions/s1/files?path=rootlink/etc/shadow" "$t"
  refute_output --regexp '(^|\n)root:'
  gw_expect 400 GET "/v1/sessions/s1/files?path=../../../../etc/shadow" "$t"
  gw_expect 404 GET "/v1/sessions/s1/files?path=/etc/shadow" "$t"
  gw_expect 403 PUT "/v1/sessions/s1/files?path=shadow" "$t" 'owned'
  assert_output --partial symlink
  gw_expect 403 PUT "/v1/sessions/s1/files?path=rootlink/tmp/esbx-escape" "$t" 'owned'
  [ ! -e /tmp/esbx-escape ]
  grep -q '^root:' /etc/shadow

  gw_expect 200 PUT "/v1/sessions/s1/files?path=/src/new.txt&mode=0600" "$t" 'new content'
  [ "$(cat "$ESBX_ROOT/sessions/s1/merged/src/new.txt")" = "new content" ]
  [ "$(stat -c %a "$ESBX_ROOT/sessions/s1/merged/src/new.txt")" = 600 ]
  gw GET "/v1/sessions/s1/files?path=src/new.txt" "$t"
  assert_output "new content"
  gw_expect 200 GET "/v1/sessions/s1/files?path=/src" "$t"
  assert_output --partial '"name":"new.txt","type":"file","size":11'
  run "$ESBX" diff s1
  assert_output --partial "A /src/new.txt"
}

@test "gateway: event stream and exec events" {
  make_demo
  t=$(token runtime,observe)
  gw_expect 200 POST /v1/sessions/s1/exec "$t" '{"argv":["true"]}'
  gw_expect 200 GET "/v1/sessions/s1/events" "$t"
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
  gw_expect 200 POST /v1/sessions/s1/publish "$t" '{}'
  gw_expect 409 POST /v1/sessions/s2/publish "$t" '{}'
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

@test "metrics: publishes made with the CLI on the same store are counted, across restarts" {
  make_demo
  esbx_ok session create demo --name s2
  echo other >"$ESBX_ROOT/sessions/s2/merged/README"
  esbx_ok publish s1
  esbx_fails 3 publish s2
  run curl -s "http://127.0.0.1:$METRICS_PORT/metrics"
  assert_success
  grep -qx 'esbx_publishes_total{result="ok"} 1' <<<"$output"
  grep -qx 'esbx_publishes_total{result="conflict"} 1' <<<"$output"
  kill -TERM "$ESBXD_PID"
  for _ in $(seq 50); do kill -0 "$ESBXD_PID" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$ESBXD_PID" 2>/dev/null; then fail "esbxd did not stop on SIGTERM"; fi
  start_gateway
  t=$(token manage)
  gw_expect 200 POST /v1/sessions/s1/publish "$t" '{}'
  run curl -s "http://127.0.0.1:$METRICS_PORT/metrics"
  grep -qx 'esbx_publishes_total{result="ok"} 2' <<<"$output"
  grep -qx 'esbx_publishes_total{result="conflict"} 1' <<<"$output"
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

@test "gateway: loopback TCP listener answers like the socket, with TLS or, when told, in clear" {
  teardown_gateway
  make_certs
  port=$(free_port)
  setup_gateway --gateway-tcp "127.0.0.1:$port" --gateway-tls-cert "$TLS/server.crt" \
    --gateway-tls-key "$TLS/server.key"
  esbx_ok project create demo
  t=$(token observe)
  run curl -s --cacert "$TLS/ca.crt" -H "Authorization: Bearer $t" "https://127.0.0.1:$port/v1/projects"
  assert_output --partial '"name":"demo"'
  ESBX_TOKEN=$t run "$ESBX" --host "https://127.0.0.1:$port" --ca "$TLS/ca.crt" project list
  assert_success
  assert_output --partial demo
  teardown_gateway
  setup_gateway --gateway-tcp "127.0.0.1:$port" --gateway-tcp-insecure
  esbx_ok project create demo
  t=$(token observe)
  run curl -s -H "Authorization: Bearer $t" "http://127.0.0.1:$port/v1/projects"
  assert_output --partial '"name":"demo"'
  ESBX_TOKEN=$t run "$ESBX" --host "tcp://127.0.0.1:$port" project list
  assert_success
  assert_output --partial demo
}

@test "gateway: export with ?progress=1 streams progress lines, the result, then the archive" {
  # A report every millisecond (the library's knob), so that an export of a
  # few thousand files makes several before its result.
  teardown_gateway
  export ESBX_PROGRESS_INTERVAL_MS=1
  setup_gateway
  mkdir -p "$BATS_TEST_TMPDIR/big"
  (cd "$BATS_TEST_TMPDIR/big" && seq 0 2999 | sed 's/^/f/' | xargs touch && echo data >f1)
  esbx_ok project create big --from "$BATS_TEST_TMPDIR/big"
  t=$(token manage)
  out=$BATS_TEST_TMPDIR/stream
  run curl -s -D "$BATS_TEST_TMPDIR/head" -o "$out" -w '%{http_code}' --unix-socket "$GW_SOCK" \
    -H "Authorization: Bearer $t" "http://esbx/v1/export?ref=big&progress=1"
  assert_output 200
  grep -qi '^content-type: application/vnd.esbx.progress' "$BATS_TEST_TMPDIR/head"
  # Progress lines, then the result line, then the archive.
  n=$(grep -a -n -m1 '^{"result":' "$out" | cut -d: -f1)
  [ -n "$n" ]
  head -n $((n - 1)) "$out" >"$BATS_TEST_TMPDIR/lines"
  [ "$(grep -c '^{"phase":"export","unit":"files","done":[0-9]*,"total":0,"bytes":[0-9]*,"elapsed_ms":[0-9]*' "$BATS_TEST_TMPDIR/lines")" -ge 2 ] || {
    cat "$BATS_TEST_TMPDIR/lines" >&2
    return 1
  }
  [ "$(grep -vc '^{"phase":"export",' "$BATS_TEST_TMPDIR/lines")" = 0 ]
  tail -n 1 "$BATS_TEST_TMPDIR/lines" | grep -q '"done":3000,.*"final":true}$'
  result=$(sed -n "${n}p" "$out")
  size=$(head -n "$n" "$out" | wc -c)
  tail -c +$((size + 1)) "$out" >"$BATS_TEST_TMPDIR/big.tar"
  assert_equal "$result" "{\"result\":{\"size\":$(stat -c %s "$BATS_TEST_TMPDIR/big.tar")}}"
  run tar -tf "$BATS_TEST_TMPDIR/big.tar"
  assert_success
  assert_line f2999
  "$ESBX" export big -o "$BATS_TEST_TMPDIR/local.tar"
  cmp "$BATS_TEST_TMPDIR/big.tar" "$BATS_TEST_TMPDIR/local.tar"

  # A bad ref is still the HTTP error it is without the flag; without the
  # flag the answer is the archive alone.
  gw GET "/v1/export?ref=nosuch" "$t"
  plain="$http_code $output"
  [ "$http_code" -ge 400 ]
  gw GET "/v1/export?ref=nosuch&progress=1" "$t"
  assert_equal "$http_code $output" "$plain"
  run curl -s -o "$BATS_TEST_TMPDIR/plain.tar" -w '%{http_code}' --unix-socket "$GW_SOCK" \
    -H "Authorization: Bearer $t" "http://esbx/v1/export?ref=big"
  assert_output 200
  cmp "$BATS_TEST_TMPDIR/plain.tar" "$BATS_TEST_TMPDIR/local.tar"

  # gc streams its reports too; its result is the report it answers without.
  gw_expect 200 POST "/v1/gc?progress=1" "$t"
  mapfile -t lines <<<"$output"
  assert_line --regexp '^[{]"phase":"gc","unit":"projects","done":1,"total":1,.*"final":true[}]$'
  assert_equal "$(printf %s "$output" | tail -n 1)" '{"result":{"report":""}}'
  gw_expect 200 POST /v1/gc "$t"
  assert_output '{"report":""}'
}
