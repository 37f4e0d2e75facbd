#!/usr/bin/env bats
# The boundary between gateway tokens (docs/SECURITY.md, items 19-21 and
# 25, and the table of what a token can do): what a token limited to a
# project or a session may give the sessions it makes, how many it may
# hold, and what travels between a client and the gateway's TCP listener.
# Each test makes the attack for real against its own esbxd (own store,
# sockets and ports) and checks what the attacker got.

bats_require_minimum_version 1.5.0
load gateway_helpers

# Each test starts its gateway itself, with the options it needs.
setup() { setup_store; }

teardown() {
  if [ -n "${SNIFF_PID:-}" ]; then
    kill -KILL "$SNIFF_PID" 2>/dev/null || true
    wait "$SNIFF_PID" 2>/dev/null || true
    SNIFF_PID=
  fi
  teardown_gateway
}

# `sniff FILE`: capture what passes on `lo` into FILE (the payloads, raw),
# as a command in a session with the host's network and CAP_NET_RAW would;
# stopped by sniff_stop.
sniff() {
  rm -f "$1.ready"
  python3 - "$1" <<'EOF' &
import signal, socket, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.bind(("lo", 0))
s.settimeout(0.1)
stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
open(sys.argv[1] + ".ready", "w").close()
with open(sys.argv[1], "wb", buffering=0) as f:
    while True:
        try:
            f.write(s.recv(65536))
        except (socket.timeout, InterruptedError):
            if stop:
                break
EOF
  SNIFF_PID=$!
  # Listening before the traffic it is to see: a condition, not a delay.
  for _ in $(seq 300); do [ -e "$1.ready" ] && break; sleep 0.05; done
  [ -e "$1.ready" ]
}

# Ends the capture once it has written all it has received.
sniff_stop() {
  kill -TERM "$SNIFF_PID"
  wait "$SNIFF_PID" 2>/dev/null || true
  SNIFF_PID=
}

@test "boundary 19: a project-limited token cannot give a session the host's network; an unlimited one may" {
  setup_gateway
  esbx_ok project create team-a
  esbx_ok session create team-a --name a1
  TOKEN=$(token manage,runtime,observe --project team-a)
  before=$(store_state)

  gw_expect 403 POST /v1/sessions "$TOKEN" '{"project":"team-a","name":"h1","network":"host"}'
  assert_equal "$(json_field error <<<"$output" | wc -l)" 1
  assert_output --partial "network"
  assert_output --partial "host"
  gw_expect 403 PUT /v1/projects/team-a/network "$TOKEN" '{"network":"host"}'
  assert_output --partial "host"
  assert_equal "$(store_state)" "$before"
  esbx_ok project network team-a
  assert_output --partial none

  # A default the operator set does not hand the host's network to the
  # token either: its sessions and forks name another network or fail.
  esbx_ok project network team-a --network host
  gw_expect 403 POST /v1/sessions "$TOKEN" '{"project":"team-a","name":"h2"}'
  assert_output --partial "host"
  gw_expect 403 POST /v1/sessions/a1/fork "$TOKEN" '{"name":"h3"}'
  run "$ESBX" session inspect h3
  assert_failure
  gw_expect 201 POST /v1/sessions "$TOKEN" '{"project":"team-a","name":"n1","network":"none"}'
  gw_expect 200 PUT /v1/projects/team-a/network "$TOKEN" '{"network":"none"}'

  # A session token is limited too.
  STOKEN=$(token manage,runtime --session a1)
  esbx_ok project network team-a --network host
  gw_expect 403 POST /v1/sessions/a1/fork "$STOKEN" '{"name":"h4"}'

  # A token without limits may, as root may with the CLI.
  ALL=$(token manage,runtime,observe)
  gw_expect 201 POST /v1/sessions "$ALL" '{"project":"team-a","name":"h5","network":"host"}'
  esbx_ok --json session inspect h5
  assert_equal "$(json_field network <<<"$output")" host
  gw_expect 200 PUT /v1/projects/team-a/network "$ALL" '{"network":"host"}'
}

@test "boundary 20: esbxd refuses a plain TCP listener unless told --gateway-tcp-insecure" {
  port=$(free_port)
  GW_DIR=$(mktemp -d /tmp/esbx-gw.XXXXXX)
  run timeout 5 "$ESBXD" --root "$ESBX_ROOT" --plugin-socket "$GW_DIR/p.sock" \
    --gateway-socket "$GW_DIR/g.sock" --metrics none --gateway-tcp "127.0.0.1:$port"
  assert_equal "$status" 2
  assert_equal "${#lines[@]}" 1
  assert_output --partial "--gateway-tls-cert"
  assert_output --partial "--gateway-tcp-insecure"
  # Half of a pair is refused as well.
  make_certs
  run timeout 5 "$ESBXD" --root "$ESBX_ROOT" --plugin-socket "$GW_DIR/p.sock" \
    --gateway-socket "$GW_DIR/g.sock" --metrics none --gateway-tcp "127.0.0.1:$port" \
    --gateway-tls-cert "$TLS/server.crt"
  assert_equal "$status" 2
  assert_output --partial "--gateway-tls-key"
  run timeout 5 "$ESBXD" --root "$ESBX_ROOT" --plugin-socket "$GW_DIR/p.sock" \
    --gateway-socket "$GW_DIR/g.sock" --metrics none --gateway-tcp "127.0.0.1:$port" \
    --gateway-tls-cert "$TLS/nosuch.crt" --gateway-tls-key "$TLS/server.key"
  assert_equal "$status" 2
  assert_equal "${#lines[@]}" 1
  assert_output --partial "nosuch.crt"
  rm -rf "$GW_DIR"

  # Told so, it serves tokens in clear, and anyone on loopback reads them.
  setup_gateway --gateway-tcp "127.0.0.1:$port" --gateway-tcp-insecure
  TOKEN=$(token observe)
  sniff "$BATS_TEST_TMPDIR/lo.raw"
  run curl -s -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$port/v1/whoami"
  sniff_stop
  assert_output --partial '"scopes":["observe"]'
  grep -qaF "$TOKEN" "$BATS_TEST_TMPDIR/lo.raw"
  grep -q "gateway-tcp-insecure" "$GW_LOG"
}

@test "boundary 20: the TCP listener speaks TLS; tokens never cross loopback in clear" {
  make_certs
  port=$(free_port)
  setup_gateway --gateway-tcp "127.0.0.1:$port" --gateway-tls-cert "$TLS/server.crt" \
    --gateway-tls-key "$TLS/server.key"
  esbx_ok project create demo
  TOKEN=$(token observe)

  sniff "$BATS_TEST_TMPDIR/lo.raw"
  run curl -s --cacert "$TLS/ca.crt" -H "Authorization: Bearer $TOKEN" \
    "https://127.0.0.1:$port/v1/projects"
  assert_success
  assert_output --partial '"name":"demo"'
  # The remote CLI, with the CA by option and by environment.
  ESBX_TOKEN=$TOKEN run "$ESBX" --host "https://127.0.0.1:$port" --ca "$TLS/ca.crt" project list
  assert_success
  assert_output --partial demo
  ESBX_TOKEN=$TOKEN ESBX_CA=$TLS/ca.crt run "$ESBX" --host "https://localhost:$port" project list
  assert_success
  assert_output --partial demo
  sniff_stop
  [ -s "$BATS_TEST_TMPDIR/lo.raw" ]
  run grep -caF "${TOKEN#esbx_}" "$BATS_TEST_TMPDIR/lo.raw"
  assert_output 0

  # Without the CA the server is not trusted and no token is sent.
  ESBX_TOKEN=$TOKEN run "$ESBX" --host "https://127.0.0.1:$port" project list
  assert_failure 1
  assert_equal "${#lines[@]}" 1
  assert_output --partial "certificate"
  ESBX_TOKEN=$TOKEN run "$ESBX" --host "https://127.0.0.1:$port" --ca "$TLS/nosuch" project list
  assert_failure
  # Plain HTTP to the TLS port is never answered.
  run curl -s -m 5 -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TOKEN" \
    "http://127.0.0.1:$port/v1/projects"
  [ "$output" != 200 ]
  kill -0 "$ESBXD_PID"
}

@test "boundary 20: the TLS certificate and key from esbxd.conf" {
  make_certs
  port=$(free_port)
  conf=$BATS_TEST_TMPDIR/esbxd.conf
  printf 'gateway-tls-cert = %s\ngateway-tls-key = %s\n' "$TLS/server.crt" "$TLS/server.key" >"$conf"
  setup_gateway --config "$conf" --gateway-tcp "127.0.0.1:$port"
  TOKEN=$(token observe)
  run curl -s --cacert "$TLS/ca.crt" -H "Authorization: Bearer $TOKEN" "https://127.0.0.1:$port/v1/whoami"
  assert_output --partial '"scopes":["observe"]'
}

@test "boundary 21: a project token attaches only its project's secrets, never another's or a store-wide one" {
  setup_gateway
  esbx_ok project create team-a
  esbx_ok project create team-b
  value=teamb-db-password-5c1e9a77
  printf '%s' "$value" | "$ESBX" secret create teamb-db
  TOKEN=$(token manage,runtime,observe --project team-a)
  before=$(store_state)

  # The attack: a store-wide secret (as every secret was) in a team-a
  # session, read back reversed past the redaction.
  gw_expect 403 POST /v1/sessions "$TOKEN" '{"project":"team-a","name":"a1","secrets":["teamb-db"]}'
  assert_output --partial "teamb-db"
  assert_equal "$(json_field error <<<"$output" | wc -l)" 1
  gw POST /v1/sessions/a1/exec "$TOKEN" '{"argv":["rev","/run/secrets/teamb-db"]}'
  refute_output --partial "$(rev <<<"$value")"
  assert_equal "$(store_state)" "$before"

  # A secret of team-b, and one that does not exist, look alike to it.
  printf 'teamb-own-value-1d2f' | "$ESBX" secret create teamb-own --project team-b
  gw_expect 403 POST /v1/sessions "$TOKEN" '{"project":"team-a","name":"a1","secrets":["teamb-own,env=X"]}'
  gw_expect 403 POST /v1/sessions "$TOKEN" '{"project":"team-a","name":"a1","secrets":["nosuch"]}'
  assert_output --partial "is not a secret of project \`team-a\`"
  run "$ESBX" session inspect a1
  assert_failure

  # Its own project's secrets it may use, and make, list and remove.
  printf 'teama-db-value-77e0a1' | "$ESBX" secret create teama-db --project team-a
  gw_expect 201 POST /v1/sessions "$TOKEN" '{"project":"team-a","name":"a1","secrets":["teama-db"]}'
  gw_expect 200 POST /v1/sessions/a1/exec "$TOKEN" '{"argv":["cat","/run/secrets/teama-db"]}'
  assert_output --partial '***teama-db***'
  gw_expect 201 POST /v1/secrets "$TOKEN" '{"name":"teama-2","value":"teama-2-value-0099","project":"team-a"}'
  gw_expect 403 POST /v1/secrets "$TOKEN" '{"name":"wide","value":"wide-value-0099"}'
  gw_expect 403 POST /v1/secrets "$TOKEN" '{"name":"teamb-3","value":"teamb-3-value","project":"team-b"}'
  gw_expect 200 GET "/v1/secrets?project=team-a" "$TOKEN"
  assert_equal "$(json_names <<<"$output")" "teama-2 teama-db"
  gw_expect 403 GET /v1/secrets "$TOKEN"
  gw_expect 403 GET "/v1/secrets?project=team-b" "$TOKEN"
  gw_expect 403 DELETE "/v1/secrets/teamb-own?project=team-a" "$TOKEN"
  gw_expect 403 DELETE /v1/secrets/teamb-db "$TOKEN"
  gw_expect 200 DELETE "/v1/secrets/teama-2?project=team-a" "$TOKEN"
  assert_file_not_exists "$ESBX_ROOT/secrets/teama-2"
  assert_file_exists "$ESBX_ROOT/secrets/teamb-own"
  # The remote CLI, the same way.
  run env ESBX_HOST="unix://$GW_SOCK" ESBX_TOKEN="$TOKEN" "$ESBX" secret list --project team-a
  assert_success
  assert_line --regexp "^teama-db	21	.*	team-a$"
  refute_output --partial teamb

  # A token without limits may use a store-wide secret anywhere, a
  # project's only in that project's sessions.
  ALL=$(token manage,runtime,observe)
  gw_expect 201 POST /v1/sessions "$ALL" '{"project":"team-a","name":"a2","secrets":["teamb-db"]}'
  gw_expect 403 POST /v1/sessions "$ALL" '{"project":"team-a","name":"a3","secrets":["teamb-own"]}'
  assert_output --partial "belongs to project \`team-b\`"
  gw_expect 201 POST /v1/sessions "$ALL" '{"project":"team-b","name":"b1","secrets":["teamb-own"]}'
  gw_expect 200 GET /v1/secrets "$ALL"
  assert_equal "$(json_names <<<"$output")" "teama-db teamb-db teamb-own"
}

@test "boundary 25: a limited token holds at most its caps of sessions and egress sessions" {
  setup_gateway
  esbx_ok project create team-a
  TOKEN=$(token manage,runtime,observe --project team-a)
  # The default of a limited token: 8 egress sessions, each one of the
  # host's 64 slots while it runs, and 32 sessions.
  for i in $(seq 8); do
    gw_expect 201 POST /v1/sessions "$TOKEN" "{\"project\":\"team-a\",\"name\":\"e$i\",\"network\":\"egress\",\"allow\":[\"192.0.2.1\"]}"
  done
  gw_expect 403 POST /v1/sessions "$TOKEN" '{"project":"team-a","name":"e9","network":"egress","allow":["192.0.2.1"]}'
  assert_output --partial "egress"
  assert_output --partial "--max-egress"
  run "$ESBX" session inspect e9
  assert_failure
  # A project default of egress counts the same.
  gw_expect 200 PUT /v1/projects/team-a/network "$TOKEN" '{"allow":["192.0.2.1"]}'
  gw_expect 403 POST /v1/sessions "$TOKEN" '{"project":"team-a","name":"e9"}'
  gw_expect 403 POST /v1/sessions/e1/fork "$TOKEN" '{"name":"e9"}'
  gw_expect 201 POST /v1/sessions "$TOKEN" '{"project":"team-a","name":"n0","network":"none"}'
  # Discarding one gives its place back.
  gw_expect 200 DELETE /v1/sessions/e8 "$TOKEN"
  gw_expect 201 POST /v1/sessions "$TOKEN" '{"project":"team-a","name":"e9"}'
  gw_expect 200 GET /v1/whoami "$TOKEN"
  assert_equal "$(json_field max_sessions <<<"$output")" 32
  assert_equal "$(json_field max_egress <<<"$output")" 8

  # Caps of its own, for sessions and forks alike.
  SMALL=$(token manage,observe --project team-a --max-sessions 2 --max-egress 1)
  gw_expect 201 POST /v1/sessions "$SMALL" '{"project":"team-a","name":"s1","network":"none"}'
  gw_expect 201 POST /v1/sessions/s1/fork "$SMALL" '{"name":"s2"}'
  gw_expect 403 POST /v1/sessions "$SMALL" '{"project":"team-a","name":"s3","network":"none"}'
  assert_output --partial "2 sessions"
  assert_output --partial "--max-sessions"
  esbx_ok --json token list
  assert_output --partial '"max_sessions": 2'
  # Sessions of other tokens, the CLI's or Docker's are not its own.
  esbx_ok session create team-a --name cli1
  gw_expect 200 DELETE /v1/sessions/s2 "$SMALL"
  gw_expect 201 POST /v1/sessions "$SMALL" '{"project":"team-a","name":"s3","network":"none"}'
  esbx_fails 2 token create --scope manage --project team-a --max-sessions 0
  esbx_fails 2 token create --scope manage --max-egress lots

  # A token without limits has no cap unless given one.
  ALL=$(token manage,observe)
  gw_expect 200 GET /v1/whoami "$ALL"
  assert_equal "$(json_field max_sessions <<<"$output")" ""
  for i in $(seq 9); do
    gw_expect 201 POST /v1/sessions "$ALL" "{\"project\":\"team-a\",\"name\":\"u$i\",\"network\":\"egress\",\"allow\":[\"192.0.2.1\"]}"
  done
}
