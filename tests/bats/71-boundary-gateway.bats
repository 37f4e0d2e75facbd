#!/usr/bin/env bats
# The session boundary, the gateway's side (items 10, 11, 12, 16 and 17 of
# docs/SECURITY.md): each test makes the attack for real against its own
# esbxd (own store, sockets and ports) and checks what the attacker got.

bats_require_minimum_version 1.5.0
load gateway_helpers

# Each test starts its gateway itself, with the options it needs.
setup() { setup_store; }

teardown() {
  if [ -n "${FLOOD_PID:-}" ]; then
    kill -KILL "$FLOOD_PID" 2>/dev/null || true
    wait "$FLOOD_PID" 2>/dev/null || true
    FLOOD_PID=
  fi
  teardown_gateway
}

# `flood unix:PATH|tcp:HOST:PORT|tls:HOST:PORT N`: one process opens N
# connections and sends half a request head on each (no token, no end of
# the head; with tls:, a ClientHello and no more of the handshake), then
# holds them until teardown kills it.  Sets $FLOOD_HELD: how many of them
# the server still keeps open.
flood() {
  local ready=$BATS_TEST_TMPDIR/flood.ready
  rm -f "$ready"
  python3 - "$1" "$2" "$ready" <<'EOF' &
import os, resource, socket, ssl, sys, time
target, n, ready = sys.argv[1], int(sys.argv[2]), sys.argv[3]
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, n + 256), hard))
held, deadline = [], time.time() + 12
while len(held) < n and time.time() < deadline:
    if target.startswith("unix:"):
        s, addr = socket.socket(socket.AF_UNIX), target[5:]
    else:
        host, port = target[4:].rsplit(":", 1)
        s, addr = socket.socket(), (host, int(port))
    s.settimeout(0.5)
    try:
        s.connect(addr)
        if target.startswith("tls:"):
            # A whole ClientHello, and nothing after the server's answer.
            out = ssl.MemoryBIO()
            tls = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).wrap_bio(
                ssl.MemoryBIO(), out, server_hostname="localhost")
            try:
                tls.do_handshake()
            except ssl.SSLWantReadError:
                pass
            s.sendall(out.read())
        else:
            s.sendall(b"GET /v1/projects HTTP/1.1\r\nHost: esbx\r\nX-Slow: ")
        held.append(s)
    except OSError:
        s.close()
        time.sleep(0.01)
time.sleep(1)
alive = 0
for s in held:
    s.setblocking(False)
    try:
        alive += s.recv(1, socket.MSG_PEEK) != b""
    except BlockingIOError:
        alive += 1
    except OSError:
        pass
with open(ready + ".tmp", "w") as f:
    f.write("%d\n" % alive)
os.rename(ready + ".tmp", ready)
time.sleep(300)
EOF
  FLOOD_PID=$!
  for _ in $(seq 200); do [ -f "$ready" ] && break; sleep 0.1; done
  [ -f "$ready" ] || { echo "the flood did not finish connecting" >&2; return 1; }
  FLOOD_HELD=$(cat "$ready")
}

# `within SECONDS WHAT CURL-ARGS...`: the request answers 2xx within
# SECONDS; prints the time it took on fd 3.
within() {
  local limit=$1 what=$2 out code t
  shift 2
  out=$(curl -s --max-time "$limit" -w '\n%{http_code} %{time_total}' "$@") || true
  code=${out##*$'\n'}
  t=${code#* }
  code=${code%% *}
  echo "# $what: HTTP $code in ${t}s" >&3
  [[ "$code" == 2?? ]] || { echo "$what: no answer within ${limit}s (HTTP $code): ${out%$'\n'*}" >&2; return 1; }
}

# Stop this test's esbxd and start it again with other options.
restart_gateway() {
  kill -TERM "$ESBXD_PID"
  for _ in $(seq 50); do kill -0 "$ESBXD_PID" 2>/dev/null || break; sleep 0.1; done
  start_gateway "$@"
}

# Everything three clients need while a flood runs: the health check, the
# Docker plugin socket, and a gateway request with a token (on the unix
# socket, or at URL with --tcp URL).
all_answer() {
  local gwargs=(--unix-socket "$GW_SOCK" http://esbx/v1/whoami)
  [ "${1:-}" = --tcp ] && gwargs=(--cacert "$TLS/ca.crt" "$2/v1/whoami")
  within 5 "/healthz" "http://127.0.0.1:$METRICS_PORT/healthz"
  within 5 "plugin Capabilities" --unix-socket "$GW_DIR/plugin.sock" -X POST -d '{}' \
    http://plugin/VolumeDriver.Capabilities
  within 5 "gateway whoami" -H "Authorization: Bearer $TOKEN" "${gwargs[@]}"
}

@test "boundary 10: 1,100 half-sent requests without a token stop neither the gateway, the plugin socket nor /metrics" {
  # systemd's default: a soft limit of 1,024 descriptors.
  ulimit -Sn 1024
  tcp_port=$(free_port)
  make_certs
  setup_gateway --gateway-tcp "127.0.0.1:$tcp_port" --gateway-tls-cert "$TLS/server.crt" \
    --gateway-tls-key "$TLS/server.key"
  TOKEN=$(token observe)

  flood "unix:$GW_SOCK" 1100
  echo "# unix socket flood: $FLOOD_HELD of 1100 connections held open by esbxd" >&3
  all_answer
  kill -KILL "$FLOOD_PID"
  wait "$FLOOD_PID" 2>/dev/null || true

  flood "tls:127.0.0.1:$tcp_port" 1100
  echo "# TLS flood: $FLOOD_HELD of 1100 connections held open by esbxd" >&3
  all_answer --tcp "https://127.0.0.1:$tcp_port"
  kill -0 "$ESBXD_PID"
  kill -KILL "$FLOOD_PID"
  wait "$FLOOD_PID" 2>/dev/null || true

  # A connection that never completes its request head is closed.
  restart_gateway --gateway-head-timeout 2
  run python3 -c '
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b"GET /v1/projects HTTP/1.1\r\nHost: esbx\r\n")
t0 = time.time()
s.settimeout(10)
try:
    while s.recv(4096):
        pass
except OSError:
    pass
print("%.1f" % (time.time() - t0))' "$GW_SOCK"
  echo "# a half-sent request head was closed after ${output}s (--gateway-head-timeout 2)" >&3
  [[ "$output" =~ ^[1-4]\. ]] || fail "closed after $output s"
}

@test "boundary 11: a 300 MB exec output through the gateway is streamed whole; esbxd stays small and the logs are capped" {
  setup_gateway
  esbx_ok project create demo
  esbx_ok session create demo --name big --memory 32M
  TOKEN=$(token runtime --session big)
  cmd='yes 0123456789abcdefghijklmnopqrstuvwxyz | head -c 300000000; echo done >&2; exit 7'
  want=$(sh -c "$cmd" 2>/dev/null | sha256sum)

  run --separate-stderr bash -c 'ESBX_HOST=unix://$1 ESBX_TOKEN=$2 timeout 120 "$ESBX" exec big -- sh -c "$3" |
      tee >(wc -c >"$4/count") | sha256sum; exit "${PIPESTATUS[0]}"' - "$GW_SOCK" "$TOKEN" "$cmd" \
    "$BATS_TEST_TMPDIR"
  hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$ESBXD_PID/status")
  logs=$ESBX_ROOT/sessions/big/logs
  echo "# the remote CLI printed $(cat "$BATS_TEST_TMPDIR/count") bytes, exit status $status" >&3
  echo "# esbxd VmHWM: $hwm kB" >&3
  echo "# logs: $(cd "$logs" && stat -c '%n %s bytes' -- *.out *.err | paste -sd,)" >&3

  assert_equal "$status" 7
  assert_equal "$stderr" done
  assert_equal "$output" "$want"
  [ "$hwm" -lt $((32 * 1024)) ] || fail "esbxd's resident memory peaked at $hwm kB"
  for f in "$logs"/*.out "$logs"/*.err; do
    [ "$(stat -c %s "$f")" -le $((16 * 1024 * 1024)) ] || fail "$f is not capped"
  done
}

@test "boundary 11: --exec-log-limit sets what a gateway exec keeps in its logs" {
  setup_gateway --exec-log-limit 1M
  esbx_ok project create demo
  esbx_ok session create demo --name s1
  TOKEN=$(token runtime --session s1)
  run bash -c 'ESBX_HOST=unix://$1 ESBX_TOKEN=$2 timeout 60 "$ESBX" exec s1 -- sh -c "head -c 5000000 /dev/zero" | wc -c' \
    - "$GW_SOCK" "$TOKEN"
  assert_success
  assert_output 5000000
  assert_equal "$(stat -c %s "$ESBX_ROOT"/sessions/s1/logs/*.out)" 1048576
  run bash -c '"$ESBX" events s1 --json | grep "\"type\":\"exec\""'
  assert_output --partial '"log_limit":1048576'
  assert_output --partial '"stdout_truncated":true'
  run "$ESBXD" --root "$ESBX_ROOT" --exec-log-limit lots
  assert_equal "$status" 2
  assert_output --partial "--exec-log-limit"
  # The stream carries bytes, not text: a character split across two
  # writes, a NUL, an invalid byte, stdout and stderr apart.
  bytes='printf "caf\303"; sleep 0.2; printf "\251\n\000\377end"; printf "e\342\202" >&2; exit 3'
  run bash -c 'ESBX_HOST=unix://$1 ESBX_TOKEN=$2 timeout 60 "$ESBX" exec s1 -- sh -c "$3" 2>"$4/err" | od -An -tx1' \
    - "$GW_SOCK" "$TOKEN" "$bytes" "$BATS_TEST_TMPDIR"
  assert_output "$(sh -c "$bytes" 2>/dev/null | od -An -tx1)"
  assert_equal "$(od -An -tx1 <"$BATS_TEST_TMPDIR/err")" "$(sh -c "$bytes" 2>&1 >/dev/null | od -An -tx1)"
}

@test "boundary 12: a session token dies with its session; a new session of the same name in another project is out of its reach" {
  setup_gateway
  make_demo
  TOKEN=$(token runtime,observe --session s1)
  gw_expect 200 GET "/v1/sessions/s1/files?path=README" "$TOKEN"
  esbx_ok --json session inspect s1
  old_id=$(json_field id <<<"$output")

  esbx_ok discard s1
  esbx_ok project create other
  esbx_ok session create other --name s1
  echo "secret of other" >"$ESBX_ROOT/sessions/s1/merged/secret"
  gw_expect 403 GET "/v1/sessions/s1/files?path=secret" "$TOKEN"
  refute_output --partial "secret of other"
  gw_expect 403 GET /v1/sessions/s1/diff "$TOKEN"
  gw_expect 403 POST /v1/sessions/s1/exec "$TOKEN" '{"argv":["cat","secret"]}'
  refute_output --partial "secret of other"
  gw_expect 200 GET /v1/sessions "$TOKEN"
  assert_equal "$(json_names <<<"$output")" ""

  # A project removed and created again is another project for its tokens.
  esbx_ok project create third
  PTOKEN=$(token manage,observe --project third)
  gw_expect 200 GET /v1/projects/third/log "$PTOKEN"
  esbx_ok project rm third
  esbx_ok project create third
  gw_expect 403 GET /v1/projects/third/log "$PTOKEN"
  gw_expect 403 POST /v1/sessions "$PTOKEN" '{"project":"third"}'
  assert_output --partial "now is another one"
  assert_equal "$("$ESBX" --json session list --project third)" "[]"
  # A token for a project yet to be made is bound to the one it makes.
  FTOKEN=$(token manage,observe --project future)
  gw_expect 201 POST /v1/projects "$FTOKEN" '{"name":"future"}'
  esbx_ok project rm future
  esbx_ok project create future
  gw_expect 403 GET /v1/projects/future/log "$FTOKEN"
  # A session token names a session that exists.
  esbx_fails 1 token create --scope runtime --session nosuch
  assert_output --partial "session \`nosuch\` does not exist"

  # The identity the tokens compare: random, shown by inspect.
  esbx_ok --json session inspect s1
  new_id=$(json_field id <<<"$output")
  [[ "$old_id" =~ ^[0-9a-f]{32}$ && "$new_id" =~ ^[0-9a-f]{32}$ ]] || fail "ids: '$old_id' '$new_id'"
  [ "$new_id" != "$old_id" ]
  esbx_ok session inspect s1
  assert_output --partial "$new_id"
}

@test "boundary 16: an observe token sees names, kinds, sizes and hashes, never file content" {
  setup_gateway
  make_demo
  echo "password=hunter2" >"$ESBX_ROOT/sessions/s1/merged/secret.txt"
  OBSERVE=$(token observe)
  gw_expect 200 GET /v1/sessions/s1/diff "$OBSERVE"
  assert_output --partial '"path":"/secret.txt"'
  assert_output --partial '"sha256":"'
  refute_output --partial hunter2
  gw_expect 403 GET "/v1/sessions/s1/diff?patch=1" "$OBSERVE"
  assert_output --partial "lacks the \`runtime\` scope"
  # However the flag is spelt: refused, or the diff without content.
  for q in patch=yes patch=true patch= patch 'patch=1&patch=0' 'patch=0&patch=1' 'PATCH=1' \
    'patch=%31' 'patch=1&x=%0A'; do
    gw GET "/v1/sessions/s1/diff?$q" "$OBSERVE"
    refute_output --partial hunter2
    [[ "$http_code" == 403 || "$output" == '[{"path"'* ]] || fail "?$q: HTTP $http_code $output"
  done
  gw_expect 403 GET "/v1/sessions/s1/files?path=secret.txt" "$OBSERVE"
  refute_output --partial hunter2

  # The CLI's diff --patch over the gateway needs runtime.
  run env ESBX_HOST="unix://$GW_SOCK" ESBX_TOKEN="$OBSERVE" "$ESBX" diff s1 --patch
  assert_equal "$status" 1
  assert_output --partial "lacks the \`runtime\` scope"
  refute_output --partial hunter2
  run env ESBX_HOST="unix://$GW_SOCK" ESBX_TOKEN="$(token observe,runtime)" "$ESBX" diff s1 --patch
  assert_success
  assert_output --partial "+password=hunter2"
}

@test "boundary 17: a newline in a name forges no line in esbxd's log or the audit log" {
  setup_gateway
  make_demo
  forged='esbxd: gateway DELETE /v1/sessions/s1 token=0123456789ab status=200: forged'
  enc=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "x
$forged")
  gw GET "/v1/sessions/$enc" -
  assert_http 401
  gw GET "/v1/sessions/$enc/diff" "$(token observe)"
  [[ "$http_code" == 4?? ]]
  gw GET "/v1/projects/demo/blame?path=$enc" "$(token observe)"
  # The plugin logs the volume name of every request.
  plugin_forged='esbxd: POST /VolumeDriver.Remove volume=s1 status=200 result=ok 0.1ms'
  body=$(python3 -c 'import json, sys; print(json.dumps({"Name": "v\n" + sys.argv[1]}))' "$plugin_forged")
  curl -s --unix-socket "$GW_DIR/plugin.sock" -X POST -d "$body" http://plugin/VolumeDriver.Remove
  sleep 0.2

  run grep -c -e '^esbxd: gateway DELETE' -e '^esbxd: POST /VolumeDriver.Remove volume=s1' "$GW_LOG"
  assert_output 0
  grep -q 'x\\x0aesbxd: gateway DELETE' "$GW_LOG" || fail "the name is not in the log, escaped"
  # The audit log: one JSON object per request, the name inside its path.
  python3 - "$ESBX_ROOT/audit.log" <<'EOF'
import json, sys
lines = open(sys.argv[1], "rb").read().split(b"\n")
assert lines[-1] == b"", "no newline at the end"
recs = [json.loads(l) for l in lines[:-1]]
assert len(recs) == 3, "%d records for 3 requests" % len(recs)
assert all(r["method"] == "GET" for r in recs), recs
assert "\n" in recs[0]["path"] and recs[0]["status"] == 401, recs[0]
EOF
}
